"""Issue 22: a batch's read-through is remembered by its bytes' SHA-256 and its source spec, never by its path.

``dsv ingest`` scanned each file three times (the check, the landing, the load); now the later two recall the first.
A miss must never be wrong: other bytes at the same path, or the same bytes under another reading rule, scan anew.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from dsv_platform.core.ingest import scan_memo
from dsv_platform.core.ingest.batch_stream import scan_batch
from dsv_platform.core.ingest.landing_format import encode_batch
from dsv_platform.core.ingest.landing_stream import bytes_opener
from dsv_platform_tests.core.test_batch_stream import source


def _write(path: Path, ids: list[str], ns: list[str]) -> bytes:
    table = pa.table({"id": ids, "n": ns, "day": ["2026-06-01"] * len(ids), "x": ["1.5"] * len(ids)})
    data = encode_batch(table, "csv")
    path.write_bytes(data)
    return data


def test_the_same_bytes_recall_their_scan_and_other_bytes_do_not(tmp_path):
    scan_memo.forget()
    spec = source(tmp_path, "csv", ["id"])
    path = tmp_path / "batch.csv"
    data = _write(path, ["a", "b", "a"], ["1", "2", "3"])  # key a repeats: both rows rejected
    digest, first = scan_memo.scan_file(path, spec)
    assert first == scan_batch(bytes_opener(data), spec)
    assert first.rejected == 2 and first.plan is not None and first.plan.repeated_key
    assert scan_memo.recall(digest, spec) is first
    again_digest, again = scan_memo.scan_file(path, spec)
    assert (again_digest, again) == (digest, first) and again is first  # not read again

    other = _write(path, ["a", "b", "c"], ["1", "2", "x"])  # other bytes at the same path
    other_digest, changed = scan_memo.scan_file(path, spec)
    assert other_digest != digest and changed is not first
    assert changed == scan_batch(bytes_opener(other), spec) and changed.rejected == 1

    path.write_bytes(data)  # the first bytes again, under another key: nothing repeats
    wider = source(tmp_path, "csv", ["id", "n"])
    assert scan_memo.recall(digest, wider) is None and scan_memo.recall(digest, spec) is first
    _, rekeyed = scan_memo.scan_file(path, wider)
    assert rekeyed == scan_batch(bytes_opener(data), wider) and rekeyed.rejected == 0


def test_a_scan_with_too_many_failures_is_not_kept(tmp_path, monkeypatch):
    scan_memo.forget()
    monkeypatch.setattr(scan_memo, "MAX_FAILURES", 0)
    spec = source(tmp_path, "csv", ["id"])
    path = tmp_path / "batch.csv"
    _write(path, ["a", "b"], ["1", "bad"])
    digest, scan = scan_memo.scan_file(path, spec)
    assert scan.failures and scan_memo.recall(digest, spec) is None
