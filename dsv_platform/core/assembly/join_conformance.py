"""Conformance vectors for point-in-time joins (``as-of-join/1``): as known at the watermark and at the example time.

Shipped as ``dsv_platform/conformance/as_of_joins.json``, beside (never inside) the ``dsv-canon/1``
vectors. A vector gives base rows, the joined source's versions with their recording times, its key, the
watermark and the join; ``expected`` gives, per base row in order, the index of the joined version and
its value, once for the join as known at the watermark (``watermark``) and once with ``as_known_at:
example_time`` (``example_time``). :func:`build_join_vectors` computes them with the in-memory assembly;
:func:`check_join_vectors` recomputes a document's vectors and lists every mismatch.

Details: docs/configuration.md (as_of_joins) and docs/lineage-and-reproduction.md (point in time)
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.core.assembly.assembly import as_of_indices, known_at_indices
from dsv_platform.core.assembly.join_cases import JOIN_CASES, KIND
from dsv_platform.core.assembly.known_at import BATCH, RECORDED_AT
from dsv_platform.core.config.dataset_definition import AsOfJoin, parse_duration
from dsv_platform.core.errors import DsvError

JOIN_FORMAT = "as-of-join/1 conformance"
JOIN_NOTES = (
    "times: ISO 8601 instants (microseconds, UTC). watermark: versions recorded after it are never read. "
    "expected.watermark: each key's latest version recorded by the watermark (greatest recorded_at, then batch), then per base row "
    "the version of its entity with the latest valid time <= t - lag (ties: the largest key; max_age: valid >= t - lag - max_age). "
    "expected.example_time: the same rule over the versions known at t - lag (each key's latest version recorded by then). "
    "picked: an index into right, or null; values: its value."
)
_STAMP = pa.timestamp("us", tz="UTC")


def _instant(text: str | None) -> dt.datetime | None:
    return None if text is None else dt.datetime.fromisoformat(text)


def _tables(vector: Mapping[str, Any]) -> tuple[pa.Table, pa.Table]:
    left = pa.table({"entity": pa.array([r["entity"] for r in vector["left"]], pa.string()), "t": pa.array([_instant(r["t"]) for r in vector["left"]], _STAMP)})
    rows = vector["right"]
    right = pa.table({
        "entity": pa.array([r["entity"] for r in rows], pa.string()),
        "valid": pa.array([_instant(r["valid"]) for r in rows], _STAMP),
        "rev": pa.array([r["rev"] for r in rows], pa.int64()),
        "value": pa.array([r["value"] for r in rows], pa.int64()),
        RECORDED_AT: pa.array([_instant(r["recorded_at"]) for r in rows], _STAMP),
        BATCH: pa.array([r["batch"] for r in rows], pa.string()),
        "__row": pa.array(range(len(rows)), pa.int64()),
    })  # fmt: skip
    return left, right


def _latest(versions: pa.Table, key: list[str]) -> pa.Table:
    """Each key's latest version (greatest recorded time, then batch)."""
    order = pc.sort_indices(versions, sort_keys=[(RECORDED_AT, "descending"), (BATCH, "descending")])
    newest_first = versions.take(order).append_column("__pos", pa.array(range(versions.num_rows), pa.int64()))
    first = newest_first.group_by(key, use_threads=False).aggregate([("__pos", "min")]).column("__pos_min")
    return newest_first.take(first).drop_columns(["__pos"])


def _picked(right: pa.Table, indices: pa.Array) -> dict[str, list[Any]]:
    taken = right.select(["__row", "value"]).take(indices)
    return {"picked": taken.column("__row").to_pylist(), "values": taken.column("value").to_pylist()}


def join_expected(vector: Mapping[str, Any]) -> dict[str, Any]:
    """Recompute a vector's ``expected`` block with this package's in-memory assembly."""
    spec, key = vector["join"], list(vector["key"])
    where = f"vector {vector['id']}"
    lag = parse_duration(spec.get("lag", "0d"), file=where, key="join.lag")
    max_age = parse_duration(spec["max_age"], file=where, key="join.max_age") if "max_age" in spec else None
    join = AsOfJoin("right", tuple(spec["on"]), spec["time"], lag, max_age)
    left, right = _tables(vector)
    mark = _instant(vector["watermark"])
    known = right.filter(pc.less_equal(right.column(RECORDED_AT), pa.scalar(mark, _STAMP)))
    latest = _latest(known, key)
    plain = as_of_indices(left, latest, join, vector["valid_time"], key)
    bitemporal = known_at_indices(left, known, replace(join, known_at="example_time"), vector["valid_time"], key)
    return {"watermark": _picked(latest, plain), "example_time": _picked(known, bitemporal)}


def build_join_vectors() -> dict[str, Any]:
    """The join conformance document: every case with its expected outputs."""
    vectors = [{**case, "expected": join_expected(case)} for case in JOIN_CASES]
    if len({v["id"] for v in vectors}) != len(vectors):
        raise ValueError("join conformance vector ids must be unique")
    return {"format": JOIN_FORMAT, "kind": KIND, "notes": JOIN_NOTES, "vectors": vectors}


def dumps_join_vectors(doc: Mapping[str, Any]) -> str:
    """The shipped file's text: indented, ASCII only, LF at the end (as the dsv-canon/1 file)."""
    return json.dumps(doc, indent=1, ensure_ascii=True) + "\n"


def check_join_vectors(doc: Any) -> list[str]:
    """Every mismatch between a join conformance document and this code (empty when they agree)."""
    if not isinstance(doc, Mapping) or doc.get("format") != JOIN_FORMAT or not isinstance(doc.get("vectors"), list):
        return [f"not a {JOIN_FORMAT!r} document (needs 'format' and a 'vectors' list)"]
    failures, seen = [], set()
    for index, vector in enumerate(doc["vectors"]):
        name = vector.get("id", f"#{index}") if isinstance(vector, Mapping) else f"#{index}"
        seen.add(name)
        try:
            actual = join_expected(vector)
        except (KeyError, TypeError, ValueError, AttributeError, DsvError) as exc:
            failures.append(f"vector {name}: cannot evaluate ({type(exc).__name__}: {exc})")
            continue
        for mode in ("watermark", "example_time"):
            expected = (vector.get("expected") or {}).get(mode)
            if expected != actual[mode]:
                failures.append(f"vector {name}: expected.{mode}: file says {expected!r}, this code gives {actual[mode]!r}")
    failures += [f"vector {c['id']}: missing from the file" for c in JOIN_CASES if c["id"] not in seen]
    return failures


__all__ = ["JOIN_FORMAT", "build_join_vectors", "check_join_vectors", "dumps_join_vectors", "join_expected"]
