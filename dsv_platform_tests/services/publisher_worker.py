"""A builder process for the publication protocol tests (run as a real subprocess), and the helpers they share.

    python publisher_worker.py REGISTRY_URL STORE_ROOT REQUEST_ID [--logical-key K]
        [--kill-step STEP --marker PATH] [--start-at EPOCH]

With ``--kill-step``, the builder writes ``--marker`` when the protocol reports
that step (candidate, part_written, sealed, gates_run, published) and then
sleeps, so the test can SIGKILL it there. ``--start-at`` waits until that
wall-clock time (racing builders start together). On success it prints one JSON
line: the realization, its manifest hash and the publish outcome.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pyarrow as pa

from dsv_platform.adapters.objects.local_store import LocalObjectStore
from dsv_platform.adapters.objects.object_store import ObjectStore
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.contracts.contract import Contract
from dsv_platform.core.publication.gates import GateResult, rows_at_least
from dsv_platform.core.publication.manifest import Manifest
from dsv_platform.examples.fraud.sample_data import transactions_for_day
from dsv_platform.services.publication.publisher import BuildRequest, BuildResult, BuildStep, Publisher

NAME = "txn_protocol"
VERSION = "v1"
ROWS = 120
DAYS = (dt.date(2026, 6, 1), dt.date(2026, 6, 2), dt.date(2026, 6, 3))


def bundled_contract(name: str) -> Contract:
    """The contract of a source of the packaged fraud example (the demo's)."""
    from dsv_platform.examples.fraud.specs import SOURCES

    return SOURCES[name].contract


CONTRACT = bundled_contract("transactions")


def partitions(*, rows: int = ROWS, days: Sequence[dt.date] = DAYS, seed: int = 7, shuffle: bool = False) -> list[tuple[str, pa.Table]]:
    """Small day partitions; ``shuffle`` reorders rows and re-chunks each table (same content)."""
    out = []
    for i, day in enumerate(days):
        table = transactions_for_day(day, rows=rows, seed=seed)
        if shuffle:
            order = list(range(table.num_rows))[::-1]
            order = order[1::2] + order[0::2]
            table = table.take(pa.array(order))
            step = 17 + i
            table = pa.concat_tables([table.slice(k, step) for k in range(0, table.num_rows, step)])
        out.append((day.isoformat(), table))
    return list(reversed(out)) if shuffle else out


def row_gate(manifest: Manifest, parts: Mapping[str, pa.Table]) -> list[GateResult]:
    return [rows_at_least(manifest.rows, 1)]


def register(reg: Registry, *, allowed_readers: Sequence[str] = ()) -> None:
    reg.register_definition(
        NAME, VERSION, contract=CONTRACT.to_document(), recipe={"sources": ["raw.transactions"]}, owner="data-platform", allowed_readers=allowed_readers
    )


def request(request_id: str, *, logical_key: str | None = None, parts: Sequence[tuple[str, pa.Table]] | None = None, **kw: object) -> BuildRequest:
    return BuildRequest(
        dataset=NAME,
        version=VERSION,
        contract=CONTRACT,
        request_id=request_id,
        partitions=list(parts if parts is not None else partitions()),
        logical_key=logical_key,
        gates=kw.pop("gates", row_gate),  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )


def build(reg: Registry, store: ObjectStore, request_id: str, **kw: object) -> BuildResult:
    return Publisher(reg, store, actor="builder").build(request(request_id, **kw))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("registry_url")
    p.add_argument("store_root")
    p.add_argument("request_id")
    p.add_argument("--logical-key")
    p.add_argument("--kill-step", choices=[s.value for s in BuildStep])
    p.add_argument("--marker")
    p.add_argument("--start-at", type=float)
    args = p.parse_args(argv)

    def on_step(step: BuildStep, detail: str) -> None:
        if args.kill_step == step.value:
            Path(args.marker).write_text(f"{step.value} {detail}\n")
            time.sleep(600)  # the test SIGKILLs us here

    reg = Registry.from_url(args.registry_url)
    store = LocalObjectStore(args.store_root)
    if args.start_at:
        time.sleep(max(0.0, args.start_at - time.time()))
    result = Publisher(reg, store, actor=f"builder-{args.request_id}", on_step=on_step).build(request(args.request_id, logical_key=args.logical_key))
    print(
        json.dumps(
            {
                "realization_id": result.realization.id,
                "candidate_id": result.outcome.candidate_id,
                "manifest_hash": result.manifest.manifest_hash,
                "published_hash": result.realization.manifest_hash,
                "outcome": result.outcome.result.name,
                "created": result.outcome.created,
            }
        )
    )
    reg.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
