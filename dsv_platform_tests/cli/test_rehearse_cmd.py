"""`dsv rehearse` (daily, resolvable) and `dsv rehearse --full` (weekly, reproduced in full) in process on a real small world."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsv_platform_tests.cli.test_reproduce_cmd import dsv
from dsv_platform_tests.services.reproduce_support import Lab


def test_rehearse_full_reproduces_what_the_daily_rehearsal_cannot_resolve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lab = Lab.create(tmp_path / "lab")
    build = lab.fresh()
    run = lab.model(build)
    lab.expire(build, delete_objects=False)

    code, out, _ = dsv(lab, monkeypatch, capsys, "rehearse")
    assert code == 1 and out.startswith("reconstructable today: 0 of 1 sampled (0%); 1 retained models and artifacts"), out
    assert "EXPIRED" in out and run.run_hash in out

    code, out, _ = dsv(lab, monkeypatch, capsys, "rehearse", "--full")
    assert code == 0 and out.startswith("fully reproduced: 1 of 1 sampled (100%); 1 retained models and artifacts"), out
    assert "REPRODUCED_AFTER_REBUILD" in out and run.run_hash in out

    code, out, _ = dsv(lab, monkeypatch, capsys, "rehearse", "--full", "--json")
    doc = json.loads(out)
    assert (code, doc["procedure"], doc["fraction"], doc["rebuilt_from_raw"]) == (0, "full_rehearsal", 1.0, 1), doc
    assert [r["outcome"] for r in doc["results"]] == ["REPRODUCED_AFTER_REBUILD"]
