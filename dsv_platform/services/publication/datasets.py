"""Load a dataset by reference from training code: ``dsv_platform.open_dataset(ref, purpose=...)``.

Access is checked first (grant for the definition and purpose), then the reference resolves once
and the handle stays pinned to that realization; its signed statement is verified before reading
(UNTRUSTED otherwise). Every object is re-hashed as it is read (CORRUPT names the partition).

Details: docs/publication.md, docs/trust.md
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Protocol

from dsv_platform.adapters.objects.object_store import ObjectStore
from dsv_platform.adapters.registry.read_health import ReadMeasure
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.contracts.contract import Contract, parse_contract
from dsv_platform.core.errors import CorruptError, DsvError, ObjectErasedError, ObjectNotFoundError, ObjectVerificationError, RedactedError, ResolutionError
from dsv_platform.core.publication.manifest import Manifest, PartitionEntry
from dsv_platform.core.publication.records import Realization
from dsv_platform.core.publication.refs import DatasetRef, parse_ref
from dsv_platform.services.publication.read_meter import ReadMeter, ReadSink

if TYPE_CHECKING:  # pyarrow, hashing, access and signing (they load the trust service) are imported where used: `dsv resolve --help` needs none
    import pandas as pd
    import pyarrow as pa

    from dsv_platform.bootstrap import Platform
    from dsv_platform.services.trust.access import AccessDecision
    from dsv_platform.services.trust.signing import SignatureStatus


class Closeable(Protocol):
    def close(self) -> None: ...


def load_manifest(registry: Registry, realization: Realization) -> Manifest:
    """The realization's manifest, refusing one whose stored text does not hash to its name."""
    assert realization.manifest_hash is not None
    text = registry.get_manifest(realization.manifest_hash)
    try:
        manifest = Manifest.from_json(text)
    except DsvError as exc:
        raise CorruptError(f"stored manifest {realization.manifest_hash} is unreadable ({exc})", ref=realization.ref) from exc
    if manifest.manifest_hash != realization.manifest_hash:
        raise CorruptError(
            f"stored manifest does not hash to its name {realization.manifest_hash} (got {manifest.manifest_hash})",
            ref=realization.ref,
            detail={"manifest_hash": realization.manifest_hash},
        )
    return manifest


@contextmanager
def _object_errors(store: ObjectStore, ref: str, partition: PartitionEntry) -> Iterator[None]:
    """A failed object read as the typed error naming the partition: erased, not hashing to its name, or missing."""
    where = f"partition {partition.key}: object {partition.object}"
    detail: dict[str, object] = {"partition": partition.key, "object": partition.object}
    try:
        yield
    except ObjectErasedError as exc:
        raise RedactedError(f"{where} was crypto-erased by a privacy deletion", ref=ref, detail=detail) from exc
    except ObjectVerificationError as exc:
        raise CorruptError(f"{where} does not hash to its name", ref=ref, detail=detail) from exc
    except ObjectNotFoundError as exc:
        raise CorruptError(f"{where} is missing from {store.location}", ref=ref, detail=detail) from exc


def read_object(store: ObjectStore, ref: str, partition: PartitionEntry, meter: ReadMeter | None = None, *, columns: Sequence[str] | None = None) -> pa.Table:
    """One partition's Parquet object, verified against its hash as it is read (and counted by ``meter``); ``columns``: only those."""
    if meter is None:
        with _object_errors(store, ref, partition):
            data = store.get(partition.object, verify=True)
    else:
        with meter.object(partition), _object_errors(store, ref, partition):
            data = store.get(partition.object, verify=True)
        meter.arrived(len(data))
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(pa.BufferReader(data), columns=list(columns) if columns is not None else None)
    if meter is not None:
        meter.parsed(table.num_rows)
    return table


def fetch_object(store: ObjectStore, ref: str, partition: PartitionEntry, path: str | os.PathLike[str]) -> None:
    """One object written to ``path`` chunk by chunk (never whole in memory), re-hashed: the errors of :func:`read_object`."""
    with _object_errors(store, ref, partition):
        store.get_file(partition.object, path, verify=True)


@dataclass
class Dataset:
    """A pinned, verified view of one realization."""

    realization: Realization
    manifest: Manifest
    store: ObjectStore
    owner: Closeable | None = field(default=None, repr=False, compare=False)
    """What this handle keeps open (the Platform ``dsv_platform.open_dataset`` built); closed by :meth:`close`."""
    access: AccessDecision | None = None
    """The reader's access (withheld columns, row filter) applied to what :meth:`to_arrow` and :meth:`iter_partitions` return."""
    signature: SignatureStatus | None = None
    health: ReadSink | None = field(default=None, repr=False, compare=False)
    """Where each read's health goes (services/publication/read_meter.py); ``open_dataset``: the registry's ``read_health``."""

    def close(self) -> None:
        if self.owner is not None:
            self.owner.close()
            self.owner = None

    def __enter__(self) -> Dataset:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def ref(self) -> str:
        return self.realization.ref

    @property
    def manifest_hash(self) -> str:
        assert self.realization.manifest_hash is not None
        return self.realization.manifest_hash

    @property
    def content_hash(self) -> str:
        return self.manifest.content_hash

    @cached_property
    def contract(self) -> Contract:
        if self.manifest.contract is None:
            raise DsvError(f"{self.ref}: the manifest records no contract")
        return parse_contract(self.manifest.to_document()["contract"], source=f"manifest {self.manifest_hash}")

    @property
    def partitions(self) -> tuple[PartitionEntry, ...]:
        return self.manifest.partitions

    def _meter(self, kind: str) -> ReadMeter:
        return ReadMeter(kind, self.health, self.ref)

    def iter_partitions(self) -> Iterator[tuple[PartitionEntry, pa.Table]]:
        """Each partition as this reader may see it (restricted columns withheld, row filter applied)."""
        with self._meter("iter_partitions") as meter:
            for entry, table in self._stored_partitions(meter):
                yield entry, table if self.access is None else self.access.apply(table)

    def _stored_partitions(self, meter: ReadMeter | None = None, kind: str = "stored_partitions") -> Iterator[tuple[PartitionEntry, pa.Table]]:
        """The stored partitions, whole, counted as part of ``meter``'s read (None: a read of their own, named ``kind``)."""
        if meter is None:
            with self._meter(kind) as own:
                yield from self._stored_partitions(own)
            return
        for entry in self.manifest.partitions:
            yield entry, read_object(self.store, self.ref, entry, meter)

    @cached_property
    def split_assignment(self) -> pa.Table | None:
        with self._meter("split_assignment") as meter:
            return self._assignment(meter)

    def _assignment(self, meter: ReadMeter) -> pa.Table | None:
        """The split assignment, read once (as part of ``meter``'s read) and kept as :attr:`split_assignment`."""
        if "split_assignment" in self.__dict__:
            return self.__dict__["split_assignment"]
        splits = self.manifest.splits
        table = None
        if splits is not None:
            entry = PartitionEntry(key="splits", hash=splits.assignment_hash, rows=0, object=splits.assignment_object, bytes=0)
            table = read_object(self.store, self.ref, entry, meter)
        self.__dict__["split_assignment"] = table
        return table

    def to_arrow(self, split: str | None = None) -> pa.Table:
        with self._meter("to_arrow") as meter:
            return self._whole(split, meter)

    def _whole(self, split: str | None, meter: ReadMeter) -> pa.Table:
        import pyarrow as pa
        import pyarrow.compute as pc

        tables = [t for _, t in self._stored_partitions(meter)]
        table = pa.concat_tables(tables) if tables else self.contract.arrow_schema.empty_table()
        if split is None:
            return table if self.access is None else self.access.apply(table)
        assignment = self._assignment(meter)
        if assignment is None:
            raise DsvError(f"{self.ref}: this realization has no split assignment; call to_arrow() without split")
        key = [c for c in assignment.column_names if c not in ("split", "bucket") and c in table.column_names]  # not a composite example_id
        chosen = assignment.filter(pc.equal(assignment.column("split"), split)).select(key)
        if chosen.num_rows == 0 and split not in (names := _split_names(assignment)):
            raise DsvError(f"{self.ref}: no split named {split!r}; the realization has {names}")
        table = table.join(chosen, keys=key, join_type="inner").sort_by([(k, "ascending") for k in self.contract.key])
        return table if self.access is None else self.access.apply(table)

    def iter_batches(self, split: str | None = None, columns: Sequence[str] | None = None, batch_size: int = 65_536) -> Iterator[pa.RecordBatch]:
        """Verified record batches, one partition in memory at a time: what a PyTorch ``IterableDataset`` wraps.

        Partitions come in manifest order, rows in their stored (key) order; each object is re-hashed as it is
        read (CORRUPT names the partition). ``split`` keeps that split's examples, ``columns`` only those
        columns (of what this reader may see), and each batch holds at most ``batch_size`` rows.
        """

        if batch_size < 1:
            raise DsvError(f"batch_size must be at least 1, got {batch_size}")
        with self._meter("iter_batches") as meter:
            chosen = self._split_ids(split, meter) if split is not None else None
            visible: list[str] | None = None
            for _, table in self._stored_partitions(meter):
                if chosen is not None:
                    table = self._in_split(table, *chosen)
                if self.access is not None:
                    table = self.access.apply(table)
                if visible is None:
                    visible = self._columns(table.column_names, columns)
                yield from table.select(visible).to_batches(max_chunksize=batch_size)
        if visible is None and columns is not None:  # no partition: still refuse unknown columns
            self._columns(self.contract.column_names, columns)

    def _split_ids(self, split: str, meter: ReadMeter) -> tuple[list[str], pa.Table]:
        """The columns identifying an example in the assignment and the rows of ``split`` (the assignment, read once)."""
        import pyarrow.compute as pc

        assignment = self._assignment(meter)
        if assignment is None:
            raise DsvError(f"{self.ref}: this realization has no split assignment; call iter_batches() without split")
        names = _split_names(assignment)
        if split not in names:
            raise DsvError(f"{self.ref}: no split named {split!r}; the realization has {names}")
        key = [c for c in assignment.column_names if c not in ("split", "bucket")]
        ids = [c for c in self.contract.key if c in key] or key  # the example id (a group column rides along)
        return ids, assignment.filter(pc.equal(assignment.column("split"), split)).select(ids).combine_chunks()

    def _in_split(self, table: pa.Table, ids: list[str], chosen: pa.Table) -> pa.Table:
        import pyarrow.compute as pc

        if len(ids) == 1:  # order-preserving membership test on the example id
            return table.filter(pc.is_in(table.column(ids[0]), value_set=chosen.column(ids[0])))
        kept = table.join(chosen, keys=ids, join_type="left semi")
        return kept.sort_by([(k, "ascending") for k in self.contract.key])

    def _columns(self, readable: Sequence[str], wanted: Sequence[str] | None) -> list[str]:
        if wanted is None:
            return list(readable)
        missing = [c for c in wanted if c not in readable]
        if missing:
            raise DsvError(f"{self.ref}: column(s) {missing} are not readable here (unknown, or withheld from this reader); readable: {list(readable)}")
        return list(wanted)

    def to_pandas(self, split: str | None = None) -> pd.DataFrame:
        return self.to_arrow(split).to_pandas()

    def verify_content(self) -> str:
        """Re-hash every partition canonically; raise CORRUPT naming the partition on mismatch."""
        with self._meter("verify_content") as meter:
            return self._verified(meter)

    def _verified(self, meter: ReadMeter) -> str:
        from dsv_platform.core.identity.hashing import digest_of, hash_partition

        leaves = []
        for entry, table in self._stored_partitions(meter):
            leaf = hash_partition(table, self.contract, key=entry.key)
            if leaf.hash != entry.hash:
                meter.content_mismatch(entry)
                raise CorruptError(
                    f"partition {entry.key}: content hash {leaf.hash} differs from the manifest's {entry.hash}",
                    ref=self.ref,
                    detail={"partition": entry.key, "object": entry.object},
                )
            leaves.append(leaf)
        root = digest_of(leaves, self.contract).content_hash
        if root != self.manifest.content_hash:
            raise CorruptError(f"content hash {root} differs from the manifest's {self.manifest.content_hash}", ref=self.ref)
        return root


def _split_names(assignment: pa.Table) -> list[str]:
    """The split names an assignment holds (distinct values first: no Python object per example)."""
    import pyarrow.compute as pc

    return sorted(pc.unique(assignment.column("split")).to_pylist())


def open_dataset(platform: Platform, ref: str | DatasetRef, *, actor: str | None = None, purpose: str | None = None) -> Dataset:
    """Authorize, resolve ``ref`` once, verify its signature and pin it; every refusal is a typed error.

    ACCESS_DENIED (no consumer grant for the definition and ``purpose``), NOT_FOUND, REDACTED, EXPIRED,
    CORRUPT, UNTRUSTED (signature missing or invalid). Reads go through the encrypting store; a key store
    whose redaction generation differs from the registry's (a restored backup) raises
    RedactionNotReconciledError until reconciled. The consumption record keeps identity and purpose.
    """
    from dsv_platform.services.trust.access import authorize
    from dsv_platform.services.trust.signing import require_trusted

    registry = platform.registry
    who = platform.actor  # the identity that proved its key; ``actor`` is kept for callers, never recorded (docs/trust.md)
    parsed = parse_ref(ref) if isinstance(ref, str) else ref
    detail: dict[str, object] = {"purpose": purpose}
    try:
        access = authorize(platform, parsed.name, parsed.version, purpose=purpose, ref=str(ref))
        detail = access.to_document()
        realization = registry.resolve_ref(parsed, actor=who)
        manifest = load_manifest(registry, realization)
        signature = require_trusted(platform, realization)
    except ResolutionError as exc:
        registry.record_consumption(str(ref), actor=who, realization=None, failure=exc.kind.name, detail=detail)
        raise
    store = platform.store
    store.keys.require_generation(registry.redaction_generation())  # a restored backup must be reconciled before it is read
    registry.record_consumption(str(ref), actor=who, realization=realization, failure=None, detail=detail | {"signature": signature.status})
    health = _health_sink(registry, who, purpose, realization)
    return Dataset(realization=realization, manifest=manifest, store=store, access=access, signature=signature, health=health)


def _health_sink(registry: Registry, consumer: str, purpose: str | None, realization: Realization) -> ReadSink:
    """Each read's health into the registry's ``read_health`` table, as ``consumer`` (the identity that opened it).

    Not from a forked process (a data loader worker handed the parent's handle): the parent's pooled registry
    connections are not its own to write through; the read goes on, unrecorded (logged).
    """
    opened_in = os.getpid()

    def sink(measure: ReadMeasure) -> None:
        if os.getpid() != opened_in:
            raise DsvError(f"the handle was opened in process {opened_in}, not this one: open the dataset in each worker to record its reads")
        registry.record_read(measure, consumer=consumer, purpose=purpose, realization=realization)

    return sink


def open_baseline(platform: Platform, ref: str) -> Dataset:
    """A build's own read of an earlier realization of the definition it builds (the drift and volume baseline).

    It reads as the builder: a ``builder`` grant on the definition (which the build holds) rather than a consumer grant,
    and whole, neither columns withheld nor rows filtered, as the new rows it is compared with. Recorded as a
    consumption with purpose ``baseline``; every other refusal (REDACTED, CORRUPT, UNTRUSTED, ...) as open_dataset.
    """
    from dsv_platform.core.trust.trust import Role
    from dsv_platform.services.trust import trust
    from dsv_platform.services.trust.access import AccessDecision
    from dsv_platform.services.trust.signing import require_trusted

    registry, parsed, who = platform.registry, parse_ref(ref), platform.actor
    definition = f"{parsed.name}:{parsed.version}"
    detail: dict[str, object] = {"purpose": "baseline"}
    try:
        identity = trust.require(platform, Role.BUILDER, definition=definition).identity
        realization = registry.resolve_ref(parsed, actor=who)
        manifest = load_manifest(registry, realization)
        signature = require_trusted(platform, realization)
    except ResolutionError as exc:
        registry.record_consumption(ref, actor=who, realization=None, failure=exc.kind.name, detail=detail)
        raise
    platform.store.keys.require_generation(registry.redaction_generation())
    registry.record_consumption(ref, actor=who, realization=realization, failure=None, detail=detail | {"identity": identity, "signature": signature.status})
    access = AccessDecision(identity, definition, "baseline")
    health = _health_sink(registry, who, "baseline", realization)
    return Dataset(realization=realization, manifest=manifest, store=platform.store, access=access, signature=signature, health=health)
