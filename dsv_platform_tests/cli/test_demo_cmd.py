"""`dsv demo` end to end in a subprocess: old realizations re-hash unchanged, rebuilds change where they should."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dsv_platform import open_dataset
from dsv_platform.settings import load_settings


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    home = tmp_path_factory.mktemp("demo") / "home"
    env = {**os.environ, "DSV_HOME": str(home)}
    dsv = Path(sys.executable).with_name("dsv")
    result = subprocess.run([str(dsv), "demo", "--days", "5", "--rows-per-day", "120"], env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return home, result.stdout


def _events(stdout: str) -> dict[str, tuple[str, str, str, str, str]]:
    pattern = re.compile(
        r"== (?P<title>[^:\n]+)[^\n]*\n  old (?P<old>\S+)\n\s+content hash (?P<oldc>[0-9a-f]{64})  re-read from storage: (?P<reread>[0-9a-f]{64}) .*\n"
        r"  new (?P<new>\S+)\n\s+content hash (?P<newc>[0-9a-f]{64})"
    )
    return {m["title"]: (m["old"], m["oldc"], m["reread"], m["new"], m["newc"]) for m in pattern.finditer(stdout)}


def test_demo_old_hashes_unchanged_and_new_ones_changed_where_they_should(demo):
    _, stdout = demo
    found = _events(stdout)
    assert set(found) == {"late events", "backfill", "label definition v5 -> v6 applied to history (fraud_training_set", "renamed column", "malformed batch"}
    for old, old_content, reread, new, new_content in found.values():
        assert reread == old_content
    for title in ("late events", "backfill"):
        old, old_content, _, new, new_content = found[title]
        assert new != old and new_content != old_content and new.startswith("fraud_training_set:v6@sha256:")
    label = next(v for k, v in found.items() if k.startswith("label definition"))
    assert label[0].startswith("fraud_training_set:v5@") and label[3].startswith("fraud_training_set:v6@") and label[1] != label[4]
    for title in ("renamed column", "malformed batch"):
        old, old_content, _, new, new_content = found[title]
        assert new_content == old_content
    assert "all checks ok" in stdout and "make ui" in stdout
    assert re.search(r"-> pinned snapshots:\n\s+\| transactions \| \d+ \| fraud_training_set-v6-[0-9a-f]{20} \|", stdout)


def test_demo_realizations_resolve_again_from_a_fresh_process(demo):
    home, stdout = demo
    first = re.search(r"fraud_training_set:v6 -> (\S+)", stdout)[1]
    ds = open_dataset(first, settings=load_settings({"DSV_HOME": str(home)}))
    assert ds.verify_content() == ds.content_hash
    assert (home / "dagster").is_dir()
