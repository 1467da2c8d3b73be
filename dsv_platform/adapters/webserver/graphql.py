"""A Dagster webserver's GraphQL endpoint over HTTP (urllib and JSON only): find a job, launch a run, poll its status and events.

Every failure is one typed line naming the webserver with any password masked: no answer (SERVICE_UNREACHABLE: refused,
timed out, a 502/503/504 from a proxy), an answer that is not a Dagster webserver's or refuses the request (ENVIRONMENT:
``DSV_DAGSTER_URL`` or ``--submit`` names something unusable, or the instance does not serve this configuration's job).
A password in the URL goes out as HTTP basic authentication, never in the request line.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from dsv_platform.adapters.webserver import queries
from dsv_platform.core.errors import EnvironmentSetupError, ServiceUnreachableError, mask_url

TIMEOUT = 30.0
"""Seconds a request may take (a poll reads one page of events; launching a run answers once it is queued)."""
TRANSIENT_HTTP = (502, 503, 504)
TERMINAL = frozenset({"SUCCESS", "FAILURE", "CANCELED"})


class WebserverError(EnvironmentSetupError):
    """The webserver answered, but not as a Dagster webserver serving this request (GraphQL errors, an unknown job, a refused launch)."""


class WebserverUnreachableError(ServiceUnreachableError):
    """The webserver does not answer (connection refused or timed out, a proxy's 502/503/504)."""


@dataclass(frozen=True)
class RunEvent:
    """One event of a run's event log, as much of it as the command shows."""

    kind: str  # the GraphQL type: ExecutionStepStartEvent, LogMessageEvent, MaterializationEvent, ...
    message: str = ""
    level: str = ""
    step: str | None = None
    asset: str | None = None
    partition: str | None = None  # a materialization's partition
    metadata: dict[str, Any] = field(default_factory=dict)  # a materialization's values (text, int, float, bool, JSON)
    check: tuple[str, bool] | None = None  # an asset check evaluation: (check name, passed)
    errors: tuple[tuple[str, str], ...] = ()  # a failure's error chain, outermost first: (class name, message)


@dataclass(frozen=True)
class RunPoll:
    status: str
    events: list[RunEvent]
    cursor: str | None


def _value(entry: dict[str, Any]) -> Any:
    if "jsonString" in entry:
        return json.loads(entry["jsonString"])
    if "intRepr" in entry:  # intValue is a GraphQL Int (32 bits): a row count past 2**31 would be null
        return int(entry["intRepr"])
    for key in ("text", "floatValue", "boolValue"):
        if key in entry:
            return entry[key]
    return None


def _event(raw: dict[str, Any]) -> RunEvent:
    evaluation = raw.get("evaluation") or {}
    error = raw.get("error")
    chain = (
        ((error["className"] or "", error["message"] or ""), *((c["className"] or "", c["message"] or "") for c in error.get("causes") or ())) if error else ()
    )
    asset = raw.get("assetKey") or evaluation.get("assetKey")
    return RunEvent(
        kind=raw["__typename"],
        message=raw.get("message") or "",
        level=raw.get("level") or "",
        step=raw.get("stepKey"),
        asset="/".join(asset["path"]) if asset else None,
        partition=raw.get("partition"),
        metadata={e["label"]: _value(e) for e in raw.get("metadataEntries") or ()},
        check=(evaluation["checkName"], bool(evaluation["success"])) if evaluation else None,
        errors=chain,
    )


class Webserver:
    """The GraphQL API of the webserver at ``url`` (``http[s]://[user:password@]host:port[/prefix]``)."""

    def __init__(self, url: str, *, timeout: float = TIMEOUT) -> None:
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise WebserverError(f"Dagster webserver {mask_url(url)!r}: not an http(s)://host:port URL (--submit URL or DSV_DAGSTER_URL)")
        netloc = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
        self.base = urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
        self.shown = mask_url(url.strip().rstrip("/"))
        self.timeout = timeout
        self._auth = None
        if parts.username is not None:
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            self._auth = "Basic " + base64.b64encode(pair).decode("ascii")

    def run_url(self, run_id: str) -> str:
        """Where the UI shows the run (password masked)."""
        return f"{self.shown}/runs/{run_id}"

    def query(self, document: str, **variables: Any) -> dict[str, Any]:
        """The ``data`` of one GraphQL request; a typed one-line error otherwise."""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._auth is not None:
            headers["Authorization"] = self._auth
        body = json.dumps({"query": document, "variables": variables}).encode()
        request = urllib.request.Request(f"{self.base}/graphql", data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                reply = json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            if exc.code in TRANSIENT_HTTP:
                raise WebserverUnreachableError(f"Dagster webserver {self.shown}: HTTP {exc.code} {exc.reason}; retry when it is up") from None
            raise WebserverError(
                f"Dagster webserver {self.shown}: HTTP {exc.code} {exc.reason} from {self.shown}/graphql (is it a Dagster webserver?)"
            ) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise WebserverUnreachableError(f"Dagster webserver {self.shown}: does not answer ({reason}); is it running?") from None
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise WebserverError(f"Dagster webserver {self.shown}: the answer is not JSON (is it a Dagster webserver?)") from None
        if not isinstance(reply, dict) or reply.get("errors") or not isinstance(reply.get("data"), dict):
            errors = reply.get("errors") if isinstance(reply, dict) else None
            first = errors[0].get("message", errors[0]) if isinstance(errors, list) and errors and isinstance(errors[0], dict) else reply
            raise WebserverError(f"Dagster webserver {self.shown}: GraphQL error: {' '.join(str(first).split())[:300]}")
        return dict(reply["data"])

    def find_job(self, job: str) -> tuple[str, str]:
        """The (code location, repository) serving ``job``; a one-line error naming the instance's jobs when none does."""
        found = self.query(queries.JOBS)["repositoriesOrError"]
        if found["__typename"] != "RepositoryConnection":
            raise WebserverError(f"Dagster webserver {self.shown}: cannot list its jobs ({found.get('message', found['__typename'])})")
        jobs = sorted({p["name"] for n in found["nodes"] for p in n["pipelines"]})
        for node in found["nodes"]:
            if any(p["name"] == job for p in node["pipelines"]):
                return str(node["location"]["name"]), str(node["name"])
        raise WebserverError(f"Dagster webserver {self.shown}: no code location serves job {job!r} (its jobs: {jobs}); deploy this configuration there")

    def launch_run(self, job: str, *, tags: dict[str, str], run_config: dict[str, Any] | None = None, assets: list[list[str]] | None = None) -> str:
        """Submit one run of ``job`` (only ``assets`` of it, given as key paths, if given) to the instance's run queue; its run id."""
        location, repository = self.find_job(job)
        selector: dict[str, Any] = {"repositoryLocationName": location, "repositoryName": repository, "jobName": job}
        if assets:
            selector["assetSelection"] = [{"path": list(path)} for path in assets]
        params = {"selector": selector, "runConfigData": run_config or {}, "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in tags.items()]}}
        out = self.query(queries.LAUNCH_RUN, p=params)["launchRun"]
        if out["__typename"] != "LaunchRunSuccess":
            why = "; ".join(e["message"] for e in out.get("errors") or ()) or out.get("message") or ""
            raise WebserverError(f"Dagster webserver {self.shown}: launching {job} refused ({out['__typename']}: {' '.join(why.split())[:300]})")
        return str(out["run"]["runId"])

    def poll(self, run_id: str, cursor: str | None = None) -> RunPoll:
        """The run's status and its events after ``cursor`` (every page of them), with the cursor to read on from."""
        events: list[RunEvent] = []
        while True:
            data = self.query(queries.POLL, runId=run_id, after=cursor)
            run, logs = data["runOrError"], data["logsForRun"]
            if run["__typename"] != "Run" or logs["__typename"] != "EventConnection":
                raise WebserverError(f"Dagster webserver {self.shown}: run {run_id}: {run.get('message') or logs.get('message') or run['__typename']}")
            events += [_event(e) for e in logs["events"]]
            cursor = logs["cursor"]
            if not logs["hasMore"]:
                return RunPoll(str(run["status"]), events, cursor)
