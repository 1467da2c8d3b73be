"""Real Celery worker processes for the Dagster Celery executor: ``python -m celery -A dagster_celery.app worker``.

Each worker gets a distinct ``-n`` name, ``--concurrency 1`` (one prefork child runs the steps) and the broker and
result backend through a ``dagster_celery_config`` module on its ``PYTHONPATH`` (what ``dagster-celery worker start -y``
writes). :func:`celery_workers` starts them, waits until every one is ready and stops them (by their own pids) afterwards.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

CONFIG_MODULE = "dagster_celery_config"


@dataclass(frozen=True)
class Worker:
    name: str  # the Celery node name, as Dagster's "Executing steps ... in celery worker" event reports it
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.proc.pid


def write_config(folder: Path, broker: str, backend: str) -> Path:
    """The worker-side Celery settings (broker, backend, one task at a time, acknowledged after it ran)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [f"broker_url = {broker!r}", f"result_backend = {backend!r}", "worker_prefetch_multiplier = 1", "task_acks_late = True"]
    (folder / f"{CONFIG_MODULE}.py").write_text("\n".join(lines) + "\n")
    return folder


def _start(name: str, env: Mapping[str, str], log: Path, cwd: Path) -> Worker:
    args = [sys.executable, "-m", "celery", "-A", "dagster_celery.app", "worker", "-n", f"{name}@%h", "--concurrency", "1", "--pool", "prefork"]
    args += ["-Q", "dagster", "--prefetch-multiplier", "1", "--loglevel", "INFO", "--without-gossip", "--without-mingle"]
    with open(log, "ab") as out:
        proc = subprocess.Popen(args, env=dict(env), cwd=cwd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return Worker(f"{name}@{socket.gethostname()}", proc, log)


def _wait_ready(workers: list[Worker], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    pending = list(workers)
    while pending and time.monotonic() < deadline:
        for w in list(pending):
            if w.proc.poll() is not None:
                raise RuntimeError(f"celery worker {w.name} exited {w.proc.returncode}: {w.log.read_text(errors='replace')[-3000:]}")
            if " ready." in w.log.read_text(errors="replace"):
                pending.remove(w)
        time.sleep(0.2)
    if pending:
        raise RuntimeError(f"celery workers not ready after {timeout}s: {[w.name for w in pending]}: {pending[0].log.read_text(errors='replace')[-3000:]}")


def _stop(worker: Worker) -> None:
    if worker.proc.poll() is None:
        worker.proc.terminate()  # warm shutdown; the worker reaps its pool child
        try:
            worker.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.proc.kill()
            worker.proc.wait(timeout=10)


@contextlib.contextmanager
def celery_workers(count: int, env: Mapping[str, str], folder: Path, *, timeout: float = 120) -> Iterator[list[Worker]]:
    """``count`` ready workers named ``dsv-worker-<i>@<host>`` with ``env`` (which must carry ``PYTHONPATH`` to the config)."""
    folder.mkdir(parents=True, exist_ok=True)
    workers: list[Worker] = []
    try:
        for i in range(count):
            workers.append(_start(f"dsv-worker-{i}", env, folder / f"worker-{i}.log", folder))
        _wait_ready(workers, timeout)
        yield workers
    finally:
        for w in workers:
            _stop(w)
