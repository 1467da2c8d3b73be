"""The point-in-time join vectors (as-of-join/1): the shipped file, an independent reference, the check command."""

from __future__ import annotations

import copy
import datetime as dt
import json
from importlib import resources
from typing import Any

import pytest

from dsv_platform.cli.main import main
from dsv_platform.core.assembly.join_conformance import build_join_vectors, check_join_vectors, dumps_join_vectors

DOC = build_join_vectors()


def _at(text: str | None) -> dt.datetime | None:
    return None if text is None else dt.datetime.fromisoformat(text)


def _days(text: str) -> dt.timedelta:
    n, unit = int(text[:-1]), text[-1]
    return dt.timedelta(**{{"d": "days", "h": "hours", "m": "minutes", "s": "seconds"}[unit]: n})


def _reference(vector: dict[str, Any], known_at: bool) -> list[int | None]:
    """Written from the notes alone: the state as known at the watermark (or at t - lag), then the as-of rule."""
    join, key, mark = vector["join"], vector["key"], _at(vector["watermark"])
    versions = [(i, r) for i, r in enumerate(vector["right"]) if _at(r["recorded_at"]) <= mark]
    out: list[int | None] = []
    for row in vector["left"]:
        t = _at(row["t"])
        if t is None or row["entity"] is None:
            out.append(None)
            continue
        cut = t - _days(join["lag"])
        state: dict[tuple[Any, ...], tuple[int, dict[str, Any]]] = {}
        for i, r in versions:
            k = tuple(r[c] for c in key)
            if known_at and _at(r["recorded_at"]) > cut:
                continue
            if k not in state or (_at(r["recorded_at"]), r["batch"]) > (_at(state[k][1]["recorded_at"]), state[k][1]["batch"]):
                state[k] = (i, r)
        live = [(_at(r["valid"]), k, i) for k, (i, r) in state.items() if r["entity"] == row["entity"] and r["valid"] is not None]
        live = [c for c in live if c[0] <= cut]
        best = max(live, default=None, key=lambda c: (c[0], c[1]))
        fresh = best is not None and ("max_age" not in join or best[0] >= cut - _days(join["max_age"]))
        out.append(best[2] if fresh and best is not None else None)
    return out


@pytest.mark.parametrize("vector", DOC["vectors"], ids=lambda v: v["id"])
def test_an_independent_reference_agrees_with_every_vector(vector):
    assert vector["expected"]["watermark"]["picked"] == _reference(vector, known_at=False)
    assert vector["expected"]["example_time"]["picked"] == _reference(vector, known_at=True)


def test_the_vectors_contrast_the_two_joins():
    differ = [v["id"] for v in DOC["vectors"] if v["expected"]["watermark"] != v["expected"]["example_time"]]
    assert {"late-recorded", "correction", "lag", "ties", "moved-valid-time", "nulls", "max-age"} <= set(differ)


def test_the_shipped_file_is_the_built_document_beside_the_canon_file():
    shipped = resources.files("dsv_platform.conformance").joinpath("as_of_joins.json").read_text(encoding="utf-8")
    assert shipped == dumps_join_vectors(DOC), "regenerate with: dsv conformance --joins --write dsv_platform/conformance/as_of_joins.json"
    canon = json.loads(resources.files("dsv_platform.conformance").joinpath("vectors.json").read_text(encoding="utf-8"))
    assert DOC["kind"] not in {v["kind"] for v in canon["vectors"]}  # a separate file: the dsv-canon/1 vectors are not touched


def test_check_lists_every_mismatch(tmp_path, capsys):
    assert check_join_vectors(DOC) == []
    bad = copy.deepcopy(DOC)
    bad["vectors"][0]["expected"]["example_time"]["values"][0] = 3  # the leak the option prevents
    del bad["vectors"][-1]
    failures = check_join_vectors(bad)
    assert any("late-recorded: expected.example_time" in f for f in failures) and any("nulls: missing from the file" in f for f in failures)
    assert check_join_vectors({"format": "dsv-canon/1 conformance", "vectors": []})[0].startswith("not a 'as-of-join/1 conformance'")
    (tmp_path / "good.json").write_text(dumps_join_vectors(DOC), encoding="utf-8")
    (tmp_path / "bad.json").write_text(json.dumps(bad), encoding="utf-8")
    assert main(["conformance", "--check", str(tmp_path / "good.json")]) == 0
    assert f"all {len(DOC['vectors'])} vectors agree" in capsys.readouterr().out
    assert main(["conformance", "--check", str(tmp_path / "bad.json")]) == 1
    assert "mismatch(es) with dsv_platform's assembly" in capsys.readouterr().err
