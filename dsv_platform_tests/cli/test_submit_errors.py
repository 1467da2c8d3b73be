"""``--submit`` refuses an unusable webserver with one line and the failure table's code, before any run, never a password.

A real HTTP server on loopback answers as a broken proxy, a web page, a GraphQL server of another schema and a Dagster
webserver without the job would; a closed port is a webserver that is down. The runs themselves (queued, followed,
failed, interrupted) are in dsv_platform_tests/deploy/test_submit.py against a real webserver and daemon.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from dsv_platform.cli.main import main
from dsv_platform.core.errors import FailureKind
from dsv_platform_tests.core.config_support import write_config
from dsv_platform_tests.deploy.cluster import free_port


class _Server(ThreadingHTTPServer):
    status = 200
    body = b""
    seen: list[tuple[str, str | None, dict[str, object]]]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.seen.append((self.path, self.headers.get("Authorization"), request))
        self.send_response(self.server.status)
        self.send_header("Content-Length", str(len(self.server.body)))
        self.end_headers()
        self.wfile.write(self.server.body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
        pass


@pytest.fixture
def server() -> Iterator[_Server]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.seen = []
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
