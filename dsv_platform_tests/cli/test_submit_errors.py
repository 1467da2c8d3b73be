"""``--submit`` refuses an unusable webserver with one line and the failure table's code, before any run, never a password;
a followed run's failure is the exit code of the platform error that failed its step, as in process.

A real HTTP server on loopback answers as a broken proxy, a web page, a GraphQL server of another schema and a Dagster
webserver without the job would, or a webserver replaying a run's polls; a closed port is a webserver that is down. The
runs themselves (queued, followed, failed, interrupted) are in dsv_platform_tests/deploy/test_submit.py against a real
webserver and daemon.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from dsv_platform.cli import submit as submit_module
from dsv_platform.cli.main import main
from dsv_platform.core.errors import FailureKind
from dsv_platform_tests.core.config_support import write_config
from dsv_platform_tests.deploy.cluster import free_port


class _Server(ThreadingHTTPServer):
    status = 200
    body = b""
    replies: list[dict[str, object]]  # answered in turn before ``body``
    seen: list[tuple[str, str | None, dict[str, object]]]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.seen.append((self.path, self.headers.get("Authorization"), request))
        body = json.dumps(self.server.replies.pop(0)).encode() if self.server.replies else self.server.body
        self.send_response(self.server.status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[_Server]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.seen, httpd.replies = [], []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DSV_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DSV_CONFIG_DIR", str(write_config(tmp_path / "config")))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.delenv("DSV_DAGSTER_URL", raising=False)
    return tmp_path


def _one_line(capsys: pytest.CaptureFixture[str], kind: FailureKind, *argv: str) -> str:
    assert main(["build", "meter_readings:v1", *argv]) == kind.exit_code
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("dsv: error: "), err
    return err


def _url(server: _Server) -> str:
    return f"http://ops:hunter2@127.0.0.1:{server.server_address[1]}"


def test_submit_needs_a_webserver_url(env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert "--submit needs the webserver's URL" in _one_line(capsys, FailureKind.ENVIRONMENT, "--submit")
    assert "not an http(s)://host:port URL" in _one_line(capsys, FailureKind.ENVIRONMENT, "--submit", "ftp://ops:hunter2@host/x")
    monkeypatch.setenv("DSV_DAGSTER_URL", f"http://ops:hunter2@127.0.0.1:{free_port()}")  # the setting, when --submit names none
    err = _one_line(capsys, FailureKind.SERVICE_UNREACHABLE, "--submit")
    assert "Dagster webserver http://ops:***@127.0.0.1:" in err and "does not answer" in err and "hunter2" not in err
    assert not (env / "home" / "dagster").exists(), "no run in this process"


@pytest.mark.parametrize(
    ("status", "body", "kind", "says"),
    [
        (503, b"upstream down", FailureKind.SERVICE_UNREACHABLE, "HTTP 503"),
        (404, b"no such page", FailureKind.ENVIRONMENT, "HTTP 404"),
        (200, b"<html>a web page</html>", FailureKind.ENVIRONMENT, "the answer is not JSON"),
        (200, b'{"errors": [{"message": "Cannot query field \\"repositoriesOrError\\""}]}', FailureKind.ENVIRONMENT, "GraphQL error: Cannot query"),
    ],
)
def test_submit_to_something_else_is_one_line(
    env: Path, capsys: pytest.CaptureFixture[str], server: _Server, status: int, body: bytes, kind: FailureKind, says: str
) -> None:
    server.status, server.body = status, body
    err = _one_line(capsys, kind, "--submit", _url(server))
    assert says in err and "ops:***@" in err and "hunter2" not in err, err


def test_submit_names_the_job_no_code_location_serves(env: Path, capsys: pytest.CaptureFixture[str], server: _Server) -> None:
    nodes = [{"name": "__repository__", "location": {"name": "elsewhere"}, "pipelines": [{"name": "__ASSET_JOB"}, {"name": "other_job"}]}]
    server.body = json.dumps({"data": {"repositoriesOrError": {"__typename": "RepositoryConnection", "nodes": nodes}}}).encode()
    err = _one_line(capsys, FailureKind.ENVIRONMENT, "--submit", _url(server))
    assert "no code location serves job 'publish_meter_readings_v1' (its jobs: ['__ASSET_JOB', 'other_job'])" in err, err
    [(path, auth, request)] = server.seen  # one question, nothing launched; the password only as basic authentication
    assert path == "/graphql" and auth == "Basic " + base64.b64encode(b"ops:hunter2").decode() and "launchRun" not in str(request["query"])


def _poll(status: str, *events: dict[str, object]) -> dict[str, object]:
    logs = {"__typename": "EventConnection", "cursor": str(len(events)), "hasMore": False, "events": list(events)}
    return {"data": {"runOrError": {"__typename": "Run", "status": status}, "logsForRun": logs}}


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ("AccessDeniedError", FailureKind.ACCESS_DENIED),
        ("NotFoundError", FailureKind.NOT_FOUND),
        ("GatesFailedError", FailureKind.INVALID),
        ("KeyError", FailureKind.FAILED),
    ],
)
def test_a_followed_run_fails_with_its_step_error_kind(
    env: Path, capsys: pytest.CaptureFixture[str], server: _Server, monkeypatch: pytest.MonkeyPatch, error: str, kind: FailureKind
) -> None:
    monkeypatch.setattr(submit_module, "POLL_SECONDS", 0.01)
    monkeypatch.setattr(submit_module, "WAITING_NOTE_SECONDS", 0.0)
    job = "publish_meter_readings_v1"
    nodes = [{"name": "__repository__", "location": {"name": "dsv_platform"}, "pipelines": [{"name": job}]}]
    chain = {"className": "DagsterExecutionStepExecutionError", "message": "Error occurred while executing op",
             "causes": [{"className": error, "message": f"dsv_platform.core.errors.{error}: ACCESS_DENIED: meter_readings:v1: refused"}]}  # fmt: skip
    step = "datasets__meter_readings__v1"
    server.replies = [
        {"data": {"repositoriesOrError": {"__typename": "RepositoryConnection", "nodes": nodes}}},
        {"data": {"launchRun": {"__typename": "LaunchRunSuccess", "run": {"runId": "r-1", "status": "QUEUED"}}}},
        _poll("QUEUED", {"__typename": "RunEnqueuedEvent", "message": ""}),
        _poll("QUEUED"),
        _poll("STARTED", {"__typename": "RunStartEvent"}, {"__typename": "ExecutionStepStartEvent", "stepKey": step}),
        _poll("FAILURE", {"__typename": "ExecutionStepFailureEvent", "stepKey": step, "error": chain}, {"__typename": "RunFailureEvent", "error": None}),
    ]
    assert main(["build", "meter_readings:v1", "--submit", _url(server)]) == kind.exit_code
    out, err = capsys.readouterr()
    lines = err.splitlines()
    ui = f"http://ops:***@127.0.0.1:{server.server_address[1]}"
    waiting = "dsv: run r-1 still queued: waiting for the instance's run queue (its concurrency limits)"
    assert out == "" and lines[:3] == [f"dsv: run r-1 submitted to {ui} (follow it in the UI: {ui}/runs/r-1)", "dsv: run r-1 queued", waiting], err
    assert lines[3:6] == ["dsv: run r-1 started", f"dsv: {step}: started", f"dsv: {step}: FAILED"], err
    assert lines[-1].startswith("dsv: error: ") and "run r-1" in lines[-1] and "meter_readings:v1: refused" in lines[-1] and "hunter2" not in err, err
    launch = server.seen[1][2]
    tags = {t["key"]: t["value"] for t in launch["variables"]["p"]["executionMetadata"]["tags"]}  # type: ignore[index]
    assert launch["variables"]["p"]["selector"]["jobName"] == job and "dsv/launch" in tags, launch  # type: ignore[index]
