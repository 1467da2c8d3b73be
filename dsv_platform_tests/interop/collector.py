"""A loopback OpenLineage collector: an HTTP server in a thread keeping every POSTed JSON event, and the name mapping of docs/interop.md."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Collector:
    url: str
    events: list[dict[str, Any]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)

    def completed(self) -> list[dict[str, Any]]:
        return [e for e in self.events if e["eventType"] == "COMPLETE"]


@contextmanager
def collector() -> Iterator[Collector]:
    """A collector on 127.0.0.1 (an ephemeral port) for the duration of the block."""
    found = Collector("")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            found.paths.append(self.path)
            found.events.append(json.loads(body))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    found.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield found
    finally:
        server.shutdown()
        server.server_close()


def iceberg_table(dataset: dict[str, Any]) -> str | None:
    """The table an Iceberg dataset (named by its location) is, from its symlink ``canonical.<table>`` in ``dsv://`` (docs/interop.md)."""
    for ident in ((dataset.get("facets") or {}).get("symlinks") or {}).get("identifiers") or []:
        if ident["namespace"].startswith("dsv://") and ident["name"].startswith("canonical.") and ident["type"] == "TABLE":
            return str(ident["name"]).removeprefix("canonical.")
    return None


def node_of(dataset: dict[str, Any]) -> str | None:
    """Our lineage node for an OpenLineage dataset, by name (or symlink) and version alone (docs/interop.md); None outside it (a source file)."""
    name = dataset["name"]
    version = ((dataset.get("facets") or {}).get("version") or {}).get("datasetVersion")
    table = iceberg_table(dataset)
    if version is not None and table is not None:
        return f"iceberg_snapshot:{table}@{version}"
    if version is None or not dataset["namespace"].startswith("dsv://"):
        return None
    if name.startswith("raw/"):
        return f"raw_batch:{name.split('/', 2)[2]}@{version}"
    if name.startswith("model/"):
        return f"model_run:{version}"
    return f"realization:{version}"


def graph(events: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """Edges ``(input node, output node)`` of every COMPLETE event, plus each Iceberg table's version history (previous -> next output version)."""
    edges: set[tuple[str, str]] = set()
    history: dict[str, list[str]] = {}
    for event in events:
        if event["eventType"] != "COMPLETE":
            continue
        outs = [(iceberg_table(o), node_of(o)) for o in event.get("outputs", [])]
        for i in event.get("inputs", []):
            edges |= {(src, dst) for src in [node_of(i)] for _, dst in outs if src and dst}
        for name, node in outs:
            if name is None:
                continue  # only Iceberg tables have a version history our lineage records (succeeded_by)
            chain = history.setdefault(name, [])
            if node and node not in chain:
                chain.append(node)
    for chain in history.values():
        edges |= set(itertools.pairwise(chain))
    return edges


def upstream(edges: set[tuple[str, str]], start: str) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        node = todo.pop()
        for src, dst in edges:
            if dst == node and src not in seen:
                seen.add(src)
                todo.append(src)
    return seen
