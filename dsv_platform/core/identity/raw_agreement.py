"""Raw agreement: the canonical rows one raw batch wrote, compared with that batch's rows derived again from its landed bytes.

A load appends a batch's accepted rows except those equal to their key's version in effect (skipped as unchanged),
so the rows a canonical table holds under ``_batch = B`` are some of B's accepted rows, restricted to the keys it
holds. :func:`compare_batch` takes those canonical rows and the raw batch's accepted rows as a stream (only the rows
whose key the canonical side holds are kept), and compares row counts and the partition hash of each side (the
canonical encoding, sorted by key: order-independent). When they differ it names the columns that differ and how
many rows, never a value. Details: docs/quarantine.md ("raw_agreement").
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.core.contracts.contract import Contract
from dsv_platform.core.errors import ContractViolationError
from dsv_platform.core.identity.canonical import encode_column, encode_rows, line_bytes
from dsv_platform.core.identity.hashing import CHUNK_ROWS, hash_partition, sort_by_key


@dataclass(frozen=True)
class BatchAgreement:
    """One batch of one source: its canonical rows against its raw rows with the same keys.

    ``unmatched``: canonical rows whose key the raw batch does not accept; ``columns``: column -> rows whose
    canonical text differs; ``problem``: why the raw side gives no rows to compare (no landed batch, a raw object
    that is gone or changed), a disagreement; ``unverified``: why it cannot be compared (redacted, unreadable).
    """

    source: str
    batch: str
    canonical_rows: int
    raw_rows: int = 0
    unmatched: int = 0
    columns: dict[str, int] = field(default_factory=dict)
    canonical_hash: str | None = None
    raw_hash: str | None = None
    problem: str | None = None
    unverified: str | None = None

    @property
    def agrees(self) -> bool:
        if self.unverified is not None:
            return True
        return self.problem is None and self.canonical_rows == self.raw_rows and self.canonical_hash == self.raw_hash

    def describe(self) -> str:
        """``source:batch: ...`` naming counts and columns (no values)."""
        where = f"{self.source}:{self.batch}"
        if self.problem is not None:
            return f"{where}: {self.problem} ({self.canonical_rows} canonical rows)"
        parts = [f"{self.canonical_rows} canonical rows, {self.raw_rows} raw rows with their keys"]
        if self.unmatched:
            parts.append(f"{self.unmatched} with a key the raw batch does not have")
        parts += [f"{c} differs in {n} rows" for c, n in sorted(self.columns.items())]
        return f"{where}: " + ", ".join(parts)


def _hash(rows: pa.Table, contract: Contract, source: str) -> str:
    if rows.num_rows == 0:
        return hashlib.sha256(b"").hexdigest()  # no rows: no canonical text
    try:
        if rows.num_rows >= CHUNK_ROWS:
            return hash_partition(rows, contract, source=source).hash
        ordered = rows.take(sort_by_key(rows, contract, source=source))  # hash_partition's bytes, without its threads for one chunk
        return hashlib.sha256(line_bytes(encode_rows(ordered, contract, source=source))).hexdigest()
    except ContractViolationError as exc:  # e.g. a key twice among the canonical rows: no batch writes a key twice
        return f"unhashable: {exc}"


def _column_differences(canonical: pa.Table, raw: pa.Table, contract: Contract) -> dict[str, int]:
    """Per non-key column: the rows (joined on the key) whose canonical text differs between the two sides."""
    key = list(contract.key)
    others = [c for c in contract.column_names if c not in key]
    renamed = raw.rename_columns([c if c in key else f"__raw_{c}" for c in raw.column_names])
    joined = canonical.join(renamed, keys=key, join_type="inner", use_threads=False)
    out = {}
    for name in others:
        column = contract.column(name)
        try:
            mine = encode_column(joined.column(name).combine_chunks(), column, table=joined, key=contract.key)
            theirs = encode_column(joined.column(f"__raw_{name}").combine_chunks(), column, table=joined, key=contract.key)
            differ = int(pc.sum(pc.cast(pc.not_equal(mine, theirs), pa.int64())).as_py() or 0)
        except ContractViolationError:  # a value the encoding refuses (a null where none may be): the column differs
            differ = joined.num_rows
        if differ:
            out[name] = differ
    return out


def _groups(chunks: Iterable[pa.Table], names: list[str], contract: Contract, rows: int) -> Iterator[pa.Table]:
    """``chunks`` (contract columns, cast) concatenated into tables of at least ``rows`` rows (the last one fewer)."""
    pending: list[pa.Table] = []
    held = 0
    for chunk in chunks:
        pending.append(chunk.select(names).cast(contract.arrow_schema))
        held += chunk.num_rows
        if held >= rows:
            yield pa.concat_tables(pending)
            pending, held = [], 0
    if pending:
        yield pa.concat_tables(pending)


def compare_batch(source: str, batch: str, contract: Contract, canonical: pa.Table, raw_chunks: Iterable[pa.Table]) -> BatchAgreement:
    """``canonical``: the rows stored under ``batch`` (contract columns at least); ``raw_chunks``: the batch's accepted rows.

    Memory: the canonical rows, the raw rows that match them (never more), and raw chunks gathered into groups of a
    quarter of the canonical rows: each semi join builds its hash table over every canonical key, so it runs about
    four times per batch, not once per chunk (a 4.3M-row daily batch in 64k-row chunks built it 66 times).
    """
    names, key = list(contract.column_names), list(contract.key)
    canonical = canonical.select(names).cast(contract.arrow_schema)
    keys = canonical.select(key)
    groups = _groups(raw_chunks, names, contract, max(canonical.num_rows // 4, 1))
    matched = [group.join(keys, keys=key, join_type="left semi", use_threads=False) for group in groups]
    raw = pa.concat_tables(matched) if matched else contract.arrow_schema.empty_table()
    result = BatchAgreement(source, batch, canonical.num_rows, raw.num_rows, canonical_hash=_hash(canonical, contract, source),
                            raw_hash=_hash(raw, contract, source))  # fmt: skip
    if result.agrees:
        return result
    unmatched = canonical.num_rows - canonical.join(raw.select(key), keys=key, join_type="left semi", use_threads=False).num_rows
    return BatchAgreement(**{**result.__dict__, "unmatched": unmatched, "columns": _column_differences(canonical, raw, contract)})


__all__ = ["BatchAgreement", "compare_batch"]
