"""The example id of a dataset's rows: the key column itself, or for a composite key its canonical encoding.

A one-column key identifies an example by its own value (what split assignments always
held). A key of two or more columns identifies it by one string, the column
:data:`EXAMPLE_ID`: the `dsv-canon/1` text of each key column in key order (the row
text's escapes, so no field holds a TAB), joined by TAB, without LF. It is injective.

Details: docs/canonical-encoding.md ("Example ids")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsv_platform.core.contracts.contract import Contract
from dsv_platform.core.errors import ContractViolationError

if TYPE_CHECKING:  # imported where used: loading a configuration (the column's name) needs neither numpy nor pyarrow
    import pyarrow as pa

EXAMPLE_ID = "example_id"
"""The assignment column holding a composite key's example id."""


def example_id_column(contract: Contract) -> str:
    """The column identifying one example of ``contract``: its key column, or :data:`EXAMPLE_ID` for a composite key."""
    return contract.key[0] if len(contract.key) == 1 else EXAMPLE_ID


def assignment_key(contract: Contract) -> tuple[str, ...]:
    """The key columns a split assignment stores beside the example id: none for a one-column key, else every key column."""
    return () if len(contract.key) == 1 else contract.key


def composite_ids(table: pa.Table, contract: Contract, *, source: str | None = None) -> pa.Array:
    """The example id of every row of ``table`` (which holds the key columns), in row order, as strings."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from dsv_platform.core.identity.canonical import encode_column

    missing = [k for k in contract.key if k not in table.column_names]
    if missing:
        raise ContractViolationError(f"missing key column(s) {missing} for the example id", source=source)
    texts = []
    for name in contract.key:
        values = table.column(name)
        if values.null_count:
            raise ContractViolationError("null in a key column; an example id needs every key column", column=name, source=source)
        texts.append(encode_column(values.combine_chunks(), contract.column(name), table=table, key=contract.key, source=source))
    if table.num_rows == 0:
        return pa.array([], pa.string())
    return pc.binary_join_element_wise(*texts, "\t")


def with_example_id(table: pa.Table, contract: Contract, *, source: str | None = None) -> pa.Table:
    """``table`` unchanged for a one-column key, else plus the :data:`EXAMPLE_ID` column (which it may not hold already)."""
    if len(contract.key) == 1:
        return table
    if EXAMPLE_ID in table.column_names:
        raise ContractViolationError(f"the table already has a column {EXAMPLE_ID!r}, the composite key's example id", column=EXAMPLE_ID, source=source)
    return table.append_column(EXAMPLE_ID, composite_ids(table, contract, source=source))


__all__ = ["EXAMPLE_ID", "assignment_key", "composite_ids", "example_id_column", "with_example_id"]
