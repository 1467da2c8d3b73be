"""The cases of the point-in-time join vectors (see :mod:`dsv_platform.core.assembly.join_conformance`).

Inputs only: base rows (``entity``, ``t``), the joined source's versions (``entity``, ``valid``,
``rev``, ``value``, ``recorded_at``, ``batch``), its key, the watermark and the join; each case is
evaluated as known at the watermark and as known at the example time.
"""

from __future__ import annotations

from typing import Any

KIND = "as-of-join/1"
KEYED_BY_VALID = ["entity", "valid", "rev"]  # a correction keeps its valid time
KEYED_BY_REV = ["entity", "rev"]  # a correction may move its valid time


def _t(day: int, hour: int = 0) -> str:
    return f"2026-01-{day:02d}T{hour:02d}:00:00Z"


def _v(entity: str | None, valid: str | None, rev: int, value: int | None, recorded: str, batch: str = "raw_batch:a") -> dict[str, Any]:
    return {"entity": entity, "valid": valid, "rev": rev, "value": value, "recorded_at": recorded, "batch": batch}


def _case(ident: str, rule: str, left: list[tuple[str | None, str | None]], right: list[dict[str, Any]], **join: Any) -> dict[str, Any]:
    key = join.pop("key", KEYED_BY_VALID)
    spec = {"on": ["entity"], "time": "t", "lag": join.pop("lag", "0d"), **({"max_age": join.pop("max_age")} if "max_age" in join else {})}
    return {
        "id": ident, "kind": KIND, "rule": rule, "key": key, "valid_time": "valid", "watermark": join.pop("watermark", _t(28)),
        "join": spec, "left": [{"entity": e, "t": t} for e, t in left], "right": right,
    }  # fmt: skip


JOIN_CASES: tuple[dict[str, Any], ...] = (
    _case("late-recorded", "a value valid before the example but recorded after it is not known at the example time",
          [("a", _t(5, 12)), ("a", _t(8))], [_v("a", _t(1), 0, 1, _t(1)), _v("a", _t(3), 0, 3, _t(6))]),
    _case("recorded-at-the-example-instant", "recorded at the cutoff counts as known (at or before)",
          [("a", _t(6)), ("a", _t(5, 23))], [_v("a", _t(1), 0, 1, _t(1)), _v("a", _t(3), 0, 3, _t(6))]),
    _case("correction", "a correction of the same key is seen from its recording on; before, the earlier version",
          [("a", _t(5)), ("a", _t(6)), ("a", _t(7))], [_v("a", _t(2), 0, 20, _t(2)), _v("a", _t(2), 0, 25, _t(6), "raw_batch:b")]),
    _case("same-instant-versions", "two versions of a key recorded at one instant: the greater batch wins",
          [("a", _t(6))], [_v("a", _t(2), 0, 1, _t(4), "raw_batch:b"), _v("a", _t(2), 0, 2, _t(4), "raw_batch:a")]),
    _case("lag", "lag moves both cutoffs: valid and recorded at or before time - lag",
          [("a", _t(5, 12))], [_v("a", _t(1), 0, 1, _t(1)), _v("a", _t(4), 0, 4, _t(4, 18)), _v("a", _t(3), 0, 5, _t(4, 12))], lag="1d"),
    _case("max-age", "max_age applies to the row known at the cutoff",
          [("a", _t(5, 12)), ("a", _t(6)), ("a", _t(9))], [_v("a", _t(1), 0, 1, _t(1)), _v("a", _t(4), 0, 4, _t(6))], max_age="2d"),
    _case("ties", "ties on valid time go to the largest key among the versions known at the cutoff",
          [("a", _t(3)), ("a", _t(6))], [_v("a", _t(2), 1, 1, _t(2)), _v("a", _t(2), 3, 3, _t(5)), _v("a", _t(2), 2, 2, _t(2))]),
    _case("moved-valid-time", "a version superseded by a correction that moves its valid time is no longer a candidate",
          [("a", _t(6)), ("a", _t(8)), ("a", _t(10))],
          [_v("a", _t(5), 1, 5, _t(5)), _v("a", _t(9), 1, 9, _t(7), "raw_batch:b"), _v("a", _t(2), 2, 2, _t(2))], key=KEYED_BY_REV),
    _case("watermark", "versions recorded after the watermark are never read, whatever the example time",
          [("a", _t(20))], [_v("a", _t(1), 0, 1, _t(1)), _v("a", _t(2), 0, 2, _t(12)), _v("a", _t(1), 0, 7, _t(11), "raw_batch:b")], watermark=_t(10)),
    _case("nulls", "a null entity or time joins nothing, a version with a null valid time is no candidate (and supersedes its key); a null value joins as null",
          [(None, _t(5)), ("a", None), ("a", _t(2)), ("a", _t(5)), ("b", _t(5))],
          [_v("a", _t(1), 0, None, _t(1)), _v("a", None, 1, 9, _t(2)), _v("a", _t(1), 2, 4, _t(1)), _v("a", None, 2, 5, _t(3), "raw_batch:b"),
           _v("b", _t(1), 0, 1, _t(1))], key=KEYED_BY_REV),
)  # fmt: skip

__all__ = ["JOIN_CASES", "KIND"]
