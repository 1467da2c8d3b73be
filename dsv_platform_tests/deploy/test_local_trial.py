"""deploy/README.md's local production trial, run exactly as written: its ```sh trial blocks, in order, as one bash script.

The script starts its own PostgreSQL, loopback S3 server (moto) and Redis on free ports, the code server, webserver,
daemon and a Celery worker; a day of batches dropped under the S3 drop prefix is landed by the drop sensor, the v6
labels and the publication run follow, and `dsv` lists and verifies the published realization. Whatever the outcome,
the script's trap stops everything it started: no process of it is left, and its PostgreSQL folder is gone.
Slow (a few minutes on 2 busy cores): every run is a new process, every step another in the Celery worker.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from dsv_platform_tests.deploy.cluster import BIN

pytestmark = [pytest.mark.postgres, pytest.mark.s3]

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "deploy" / "README.md"
SERVERS = 3  # the blocks up to PostgreSQL, the S3 server and Redis


def trial_blocks() -> list[str]:
    """The README's ```sh trial blocks, in order."""
    blocks = re.findall(r"^```sh trial\n(.*?)^```$", README.read_text(encoding="utf-8"), flags=re.S | re.M)
    assert len(blocks) >= SERVERS + 3, "deploy/README.md lost its trial blocks"
    return blocks


def run_trial(folder: Path, script: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """``script`` with bash in an empty ``folder``, as a user with the virtualenv active (this checkout first on the path)."""
    folder.mkdir()
    (folder / "trial.sh").write_text(script, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSV_", "DAGSTER_", "AWS_", "PYTHONPATH"))}
    env |= {"CHECKOUT": str(ROOT), "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}", "PYTHONPATH": str(ROOT)}
    return subprocess.run(["bash", "trial.sh"], cwd=folder, env=env, capture_output=True, text=True, timeout=timeout)


def leftovers(folder: Path) -> list[str]:
    """Processes the trial started that are still alive: run in its folder, or its PostgreSQL (``-D /tmp/dsv-trial-pg.*``)."""
    found = []
    for p in psutil.process_iter(["pid", "cmdline", "cwd"]):
        cmdline, cwd = " ".join(p.info["cmdline"] or []), p.info["cwd"] or ""
        if (cwd.startswith(str(folder)) or "dsv-trial-pg." in cmdline) and p.info["pid"] != os.getpid():
            found.append(f"{p.info['pid']}: {cmdline}")
    return found


def _gone(folder: Path, seconds: float = 15) -> list[str]:
    deadline = time.monotonic() + seconds
    while (left := leftovers(folder)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


def _logs(folder: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2500:]}" for p in sorted((folder / "logs").glob("*.log")))


@pytest.mark.slow
def test_the_readme_trial_publishes_a_dropped_day_and_stops_everything(tmp_path: Path) -> None:
    folder = tmp_path / "trial"
    t0 = time.monotonic()
    out = run_trial(folder, "\n".join(trial_blocks()), timeout=1500)
    print(f"the trial took {time.monotonic() - t0:.0f} s\n{out.stdout}")
    assert out.returncode == 0, f"{out.stdout[-3000:]}\n{out.stderr[-5000:]}\n{_logs(folder)}"
    assert re.search(r"^v6 +\S+ +PUBLISHED ", out.stdout, flags=re.M), out.stdout  # dsv versions
    assert re.search(r"^OK fraud_training_set:v6@sha256:[0-9a-f]{64}: .* verified$", out.stdout, flags=re.M), out.stdout  # dsv verify
    assert [f"dropped {s}__2026-06-01__daily.csv" for s in ("transactions", "chargebacks", "account_features")] == re.findall(
        r"^dropped .*$", out.stdout, flags=re.M
    )
    assert out.stdout.rstrip().endswith("trial stopped (exit 0)"), out.stdout[-2000:]
    assert _gone(folder) == [], "the trial left processes running"


def test_a_failing_step_still_stops_every_server_the_trial_started(tmp_path: Path) -> None:
    folder = tmp_path / "trial"
    script = "\n".join(trial_blocks()[:SERVERS]) + '\necho "servers up: $PG_PORT $S3_PORT $REDIS_PORT $PGROOT"\nfalse  # a step that fails\n'
    out = run_trial(folder, script, timeout=300)
    assert out.returncode == 1 and "trial stopped (exit 1)" in out.stdout, f"{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    pg, s3, redis, pgroot = re.findall(r"^servers up: (\d+) (\d+) (\d+) (\S+)$", out.stdout, flags=re.M)[0]
    assert _gone(folder) == [], "a failed trial left processes running"
    for port in (pg, s3, redis):
        assert not any(c.laddr.port == int(port) and c.status == psutil.CONN_LISTEN for c in psutil.net_connections("tcp")), port
    assert not Path(pgroot).exists()
