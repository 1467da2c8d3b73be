"""Issue 26 items 1 and 2: a run inside the image records the commit it was built from; the user's platform.yaml stays theirs.

The image has no ``.git``: deploy/Dockerfile bakes ``dsv_platform/build_pin.json`` (commit, dirty flag, lock hash) before
installing the package. Here the package is copied into a folder outside any checkout, as the image lays it out, and
a fresh interpreter records the code pins a build and a model run take.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import dsv_platform

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import json
from dsv_platform.services.publication.realization_inputs import REPO, code_pin
from dsv_platform.services.reproduction.code_pins import checkout_of, lockfile_sha256, module_file
from dsv_platform.examples.fraud import model
where = checkout_of(module_file(model.TRAINER))
print(json.dumps({"build": code_pin(REPO).to_document(), "trainer": where, "lock": lockfile_sha256(where["repo"], where["commit"])}))
"""


def _image_layout(tmp_path: Path) -> Path:
    site = tmp_path / "site-packages"
    shutil.copytree(Path(dsv_platform.__file__).parent, site / "dsv_platform", ignore=shutil.ignore_patterns("__pycache__", "build_pin.json"))
    return site


def _probe(site: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSV_")} | {"PYTHONPATH": str(site)}
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, cwd=site, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_run_in_the_image_records_the_baked_commit_and_lock(tmp_path: Path) -> None:
    site = _image_layout(tmp_path)
    lock = hashlib.sha256((ROOT / "requirements.lock").read_bytes()).hexdigest()
    commit = "0123456789abcdef0123456789abcdef01234567"
    (site / "dsv_platform" / "build_pin.json").write_text(json.dumps({"commit": commit, "dirty": False, "lock_sha256": lock}))
    pins = _probe(site)
    assert pins["build"]["commit"] == commit and pins["build"]["dirty"] is False
    assert (pins["trainer"]["commit"], pins["trainer"]["dirty"]) == (commit, False)
    assert pins["lock"] == lock


def test_without_a_baked_pin_the_image_records_unknown_never_a_guess(tmp_path: Path) -> None:
    site = _image_layout(tmp_path)
    (site / "dsv_platform" / "build_pin.json").write_text('{"commit": "HEAD", "dirty": false}')  # malformed: not a commit
    pins = _probe(site)
    assert pins["build"]["commit"] == "unknown" and pins["trainer"]["commit"] == "unknown"


def test_the_dockerfile_installs_the_lock_bakes_the_pin_and_keeps_the_users_platform_yaml() -> None:
    text = (ROOT / "deploy" / "Dockerfile").read_text()
    assert "--require-hashes --no-deps -r requirements.lock" in text and "COPY pyproject.toml README.md requirements.lock" in text
    assert "dsv_platform/build_pin.json" in text and "ARG DSV_COMMIT" in text
    assert "add_executor.py /opt/dsv/config" in text and "platform.yaml /opt/dsv/config/platform.yaml" not in text
