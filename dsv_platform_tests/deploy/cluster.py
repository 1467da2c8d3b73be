"""deploy/dagster.yaml, unchanged, as real processes: ``dagster api grpc``, ``dagster-webserver``, ``dagster-daemon run``.

Each process gets its own session (killed by process group at the end) and a log file under the
deployment's root; a failed wait shows the tail of every log.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DEPLOY_YAML = REPO / "deploy" / "dagster.yaml"
BIN = Path(sys.executable).parent
LOCATION = "dsv_platform"
REPOSITORY = "__repository__"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def dagster_home(root: Path) -> Path:
    """A DAGSTER_HOME holding deploy/dagster.yaml copied byte for byte."""
    home = root / "dagster_home"
    home.mkdir(parents=True)
    shutil.copyfile(DEPLOY_YAML, home / "dagster.yaml")
    assert (home / "dagster.yaml").read_bytes() == DEPLOY_YAML.read_bytes()
    return home


@dataclass
class Deployment:
    root: Path
    env: dict[str, str]
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    base: str = ""

    def log(self, name: str) -> Path:
        return self.root / f"{name}.log"

    def logs(self) -> str:
        return "\n".join(f"--- {n}.log\n{self.log(n).read_text(errors='replace')[-3000:]}" for n in self.procs)

    def start(self, name: str, args: list[str]) -> None:
        with self.log(name).open("wb") as out:
            self.procs[name] = subprocess.Popen(
                args, cwd=REPO, env=self.env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def wait_for(self, what: str, ready: Callable[[], Any], timeout: float, interval: float = 1.0) -> Any:
        """Poll ``ready`` until it returns something truthy; fail with every log when a process died or time ran out."""
        deadline = time.monotonic() + timeout
        while True:
            dead = {n: p.returncode for n, p in self.procs.items() if p.poll() is not None}
            if dead:
                raise AssertionError(f"while waiting for {what}: process(es) exited {dead}\n{self.logs()}")
            value = ready()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not within {timeout:.0f} s\n{self.logs()}")
            time.sleep(interval)

    def stop(self) -> None:
        for proc in reversed(list(self.procs.values())):
            if proc.poll() is None:
                with suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)

    # -- GraphQL on the webserver ------------------------------------------------------------------
    def graphql(self, query: str, **variables: Any) -> dict[str, Any]:
        body = json.dumps({"query": query, "variables": variables}).encode()
        req = urllib.request.Request(f"{self.base}/graphql", data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            reply = json.load(r)
        assert not reply.get("errors"), reply
        return dict(reply["data"])


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def _grpc_healthy(env: Mapping[str, str], port: int) -> bool:
    probe = subprocess.run(
        [str(BIN / "dagster"), "api", "grpc-health-check", "--host", "127.0.0.1", "--port", str(port)], env=dict(env), capture_output=True, timeout=60
    )
    return probe.returncode == 0


@contextmanager
def running(root: Path, env: Mapping[str, str], timeout: float = 180.0) -> Iterator[Deployment]:
    """The user code server, the webserver and the daemon on a workspace that names the code server."""
    grpc_port, web_port = free_port(), free_port()
    workspace = root / "workspace.yaml"
    workspace.write_text(f"load_from:\n  - grpc_server:\n      host: 127.0.0.1\n      port: {grpc_port}\n      location_name: {LOCATION}\n")
    deployment = Deployment(root, dict(env))
    try:
        deployment.start("grpc", [str(BIN / "dagster"), "api", "grpc", "-m", "dsv_platform.definitions", "-h", "127.0.0.1", "-p", str(grpc_port)])
        deployment.wait_for("the code server", lambda: _grpc_healthy(env, grpc_port), timeout, interval=2.0)
        deployment.start("webserver", [str(BIN / "dagster-webserver"), "-h", "127.0.0.1", "-p", str(web_port), "-w", str(workspace)])
        deployment.start("daemon", [str(BIN / "dagster-daemon"), "run", "-w", str(workspace)])
        deployment.base = f"http://127.0.0.1:{web_port}"
        deployment.wait_for("the webserver", lambda: _answers(f"{deployment.base}/server_info"), timeout)
        yield deployment
    finally:
        deployment.stop()
