"""A stored split assignment cross-checked: recomputed from the manifest's policy over the realization's own rows.

The manifest records the policy (its document), the assignment object, its hash and the counts per split. The
check reads the stored partitions one at a time into a scratch DuckDB database, runs the build's own streamed
assignment (:func:`assign_splits`) over them and compares what it would store with what is stored: the object's
address, the assignment hash and the counts. A difference is CORRUPT (exit 6), naming the realization, what
differs and the first examples assigned differently. ``dsv verify --splits`` and the rehearsal call it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from dsv_platform.adapters.engine.duckdb_engine import EngineLimits, engine, load
from dsv_platform.core.assembly.assembly_sql import quote
from dsv_platform.core.errors import CorruptError
from dsv_platform.core.identity.example_id import example_id_column
from dsv_platform.core.splits.policy import policy_from_document
from dsv_platform.services.publication.examples import EngineExamples
from dsv_platform.services.publication.split_assignment import Splitting, assign_splits

if TYPE_CHECKING:
    from dsv_platform.adapters.engine.duckdb_engine import Connection
    from dsv_platform.bootstrap import Platform
    from dsv_platform.services.publication.datasets import Dataset

ROWS = "__verified_rows"
CHUNK = 1 << 20
SHOWN = 5


@dataclass(frozen=True)
class SplitVerification:
    """What a recomputation of a realization's split assignment found (``ok`` when it equals the stored one)."""

    policy: str
    rows: int
    stored: Mapping[str, Any]
    recomputed: Mapping[str, Any]
    differing: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return dict(self.stored) == dict(self.recomputed)

    def to_document(self) -> dict[str, Any]:
        found = {"stored": dict(self.stored), "recomputed": dict(self.recomputed), "differing": list(self.differing)}
        return {"ok": self.ok, "policy": self.policy, "rows": self.rows, **found}


class _Kept:
    """An object store that keeps the file a put would store (under ``folder``) and answers its address, storing nothing."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "recomputed.parquet"

    def put_file(self, path: str | os.PathLike[str]) -> str:
        shutil.copyfile(path, self.path)
        h = hashlib.sha256()
        with open(self.path, "rb") as f:
            while chunk := f.read(CHUNK):
                h.update(chunk)
        return h.hexdigest()


def verify_splits(platform: Platform, dataset: Dataset) -> SplitVerification | None:
    """Recompute ``dataset``'s split assignment from its manifest's policy and compare (None: it has none).

    Raises CorruptError naming the realization when the recomputation differs from what is stored.
    """
    splits = dataset.manifest.splits
    if splits is None:
        return None
    contract, policy = dataset.contract, policy_from_document(splits.policy)
    split = Splitting(contract, policy, policy.grouped_by or example_id_column(contract), dataset.ref)
    limits = EngineLimits(memory=platform.settings.build_memory, spill_root=platform.settings.spill_dir)
    with engine(limits) as con, tempfile.TemporaryDirectory(dir=limits.spill_root, prefix="split-verify-") as folder:
        load(con, ROWS, _stored_rows(dataset))
        kept = _Kept(Path(folder))
        summary, entry = assign_splits(split, EngineExamples(con, ROWS, contract), kept, limits)  # type: ignore[arg-type]
        stored = {"assignment_object": splits.assignment_object, "assignment_hash": splits.assignment_hash, "counts": dict(splits.counts)}
        recomputed = {"assignment_object": entry.assignment_object, "assignment_hash": entry.assignment_hash, "counts": dict(entry.counts)}
        if stored == recomputed:
            return SplitVerification(policy.policy_name, summary.rows, stored, recomputed)
        differing = _differing(con, dataset, kept.path, example_id_column(contract))
    result = SplitVerification(policy.policy_name, summary.rows, stored, recomputed, differing)
    fields = ", ".join(k for k in stored if stored[k] != recomputed[k])
    shown = f"; examples assigned differently: {', '.join(differing)}" if differing else ""
    raise CorruptError(
        f"{dataset.ref}: the stored split assignment is not what its policy {policy.policy_name} gives over the realization's rows ({fields} differ){shown}",
        detail={"ref": dataset.ref, "splits": result.to_document()},
    )


def _stored_rows(dataset: Dataset) -> pa.RecordBatchReader:
    """The realization's stored rows, whole (no access filter), one partition in memory at a time."""
    schema = dataset.contract.arrow_schema

    def batches() -> Iterator[pa.RecordBatch]:
        for _, table in dataset._stored_partitions(kind="verify_splits"):
            yield from table.select(schema.names).cast(schema).to_batches()

    return pa.RecordBatchReader.from_batches(schema, batches())


def _differing(con: Connection, dataset: Dataset, recomputed: Path, ident: str) -> tuple[str, ...]:
    """Up to :data:`SHOWN` example ids whose stored split is not the recomputed one, or that only one side has."""
    splits = dataset.manifest.splits
    assert splits is not None
    stored = recomputed.with_name("stored.parquet")
    dataset.store.get_file(splits.assignment_object, stored)
    col = quote(ident)
    rows = con.execute(
        f"SELECT CAST(coalesce(s.{col}, r.{col}) AS VARCHAR) FROM read_parquet(?) s FULL OUTER JOIN read_parquet(?) r ON s.{col} = r.{col} "
        f"WHERE s.split IS DISTINCT FROM r.split ORDER BY 1 LIMIT {SHOWN}",
        [str(stored), str(recomputed)],
    ).fetchall()
    return tuple(str(r[0]) for r in rows)


__all__ = ["SplitVerification", "verify_splits"]
