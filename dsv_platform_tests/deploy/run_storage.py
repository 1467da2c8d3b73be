"""The production instance's run storage, read directly from its PostgreSQL database: runs, their tags and queue events."""

from __future__ import annotations

import json
import re
from typing import Any

import psycopg2


def query(env: dict[str, str], sql: str, *args: object) -> list[tuple[Any, ...]]:
    """Rows from the Dagster instance's own PostgreSQL database, read directly."""
    dsn = f"host={env['DAGSTER_PG_HOST']} port={env['DAGSTER_PG_PORT']} user={env['DAGSTER_PG_USER']} dbname={env['DAGSTER_PG_DB']}"
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute(sql, args)
        rows = cur.fetchall()
    conn.close()
    return rows


def instance_runs(env: dict[str, str]) -> dict[str, dict[str, Any]]:
    rows = query(env, "SELECT run_id, status, pipeline_name, start_time, end_time FROM runs")
    tags = query(env, "SELECT run_id, key, value FROM run_tags")
    events = query(env, "SELECT run_id, dagster_event_type, event FROM event_logs WHERE dagster_event_type IN ('PIPELINE_ENQUEUED', 'PIPELINE_STARTING')")
    at = {(run_id, kind): float(json.loads(event)["timestamp"]) for run_id, kind, event in events}
    runs = {
        r[0]: {
            "status": r[1],
            "job": r[2],
            "queued": at.get((r[0], "PIPELINE_ENQUEUED")),  # submitted to the QueuedRunCoordinator
            "launched": at.get((r[0], "PIPELINE_STARTING")),  # dequeued by the daemon and handed to the run launcher
            "start": r[3],
            "end": r[4],
            "tags": {},
        }
        for r in rows
    }
    for run_id, key, value in tags:
        if run_id in runs:
            runs[run_id]["tags"][key] = value
    return runs


def why(env: dict[str, str], run_id: str) -> str:
    """The messages and errors of a run's failure and engine events, for the assertion message."""
    rows = query(env, "SELECT dagster_event_type, event FROM event_logs WHERE run_id = %s ORDER BY id", run_id)
    lines = []
    for kind, event in rows:
        if kind and ("FAIL" in kind or kind == "ENGINE_EVENT"):
            body = json.loads(event)
            errors = re.findall(r'"message": "((?:[^"\\]|\\.){0,400})', json.dumps(body.get("dagster_event")))
            lines.append(f"  {run_id[:8]} {kind}: {body.get('user_message', '')[:300]} {errors[:3]}")
    return "\n".join(lines)
