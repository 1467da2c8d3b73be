"""Access at resolution: who may read a definition, for which purpose, and what of it they see.

:func:`authorize` refuses (ACCESS_DENIED, exit 7) a reader whose identity holds no ``consumer`` grant for the
definition and purpose (no purpose: only a grant without one covers the read) or that names a purpose the
definition's ``access.purposes`` does not declare. The :class:`AccessDecision` it returns withholds the restricted columns its grants do not
name and applies the definition's row filter to every read. Records keep the filter's shape, never its values.

Details: docs/trust.md ("Access by purpose")
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dsv_platform.core.errors import AccessDeniedError, ConfigurationError
from dsv_platform.core.trust.access import AccessPolicy, RowFilter, access_of
from dsv_platform.core.trust.trust import Role, grant_covers
from dsv_platform.services.trust import trust

if TYPE_CHECKING:
    import pyarrow as pa

    from dsv_platform.bootstrap import Platform


@dataclass(frozen=True)
class AccessDecision:
    """One identity's read of one definition: the purpose, the restricted columns withheld, the row filter applied."""

    identity: str
    definition: str
    purpose: str | None
    withheld: tuple[str, ...] = ()
    row_filter: RowFilter | None = None

    def apply(self, table: pa.Table) -> pa.Table:
        """``table`` as this reader may see it: rows the filter keeps, without the withheld columns."""
        if self.row_filter is not None and self.row_filter.column in table.column_names:
            table = table.filter(_row_mask(table, self.row_filter))
        drop = [c for c in self.withheld if c in table.column_names]
        return table.drop_columns(drop) if drop else table

    def to_document(self) -> dict[str, Any]:
        """What a consumption record keeps: identity, purpose, withheld column names, the filter's shape (no values)."""
        return {
            "identity": self.identity,
            "purpose": self.purpose,
            "withheld_columns": list(self.withheld),
            "row_filter": None if self.row_filter is None else self.row_filter.describe(),
        }


def _row_mask(table: pa.Table, rule: RowFilter) -> pa.ChunkedArray:
    import pyarrow as pa
    import pyarrow.compute as pc

    column = table.column(rule.column)
    try:
        values = pa.array(list(rule.values)).cast(column.type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        raise ConfigurationError(f"access.row_filter: the values {list(rule.values)!r} do not fit column {rule.column!r} of type {column.type}") from exc
    matches = pc.fill_null(pc.is_in(column, value_set=values), False)
    return matches if rule.keeps_matches else pc.invert(matches)


def policy_of(platform: Platform, name: str, version: str) -> AccessPolicy:
    """The access policy the configuration folder declares for ``name:version`` (none declared: an empty policy)."""
    for d in platform.config.datasets:
        if (d.name, d.version) == (name, version):
            return access_of(d.document.get("access"), file=str(d.contract.source or d.ref), columns=d.contract.column_names)
    return AccessPolicy()


def authorize(platform: Platform, name: str, version: str, *, purpose: str | None, ref: str | None = None) -> AccessDecision:
    """The current identity's access to ``name:version`` for ``purpose``, or AccessDeniedError naming identity, definition and purpose."""
    definition = f"{name}:{version}"
    identity = trust.current_identity(platform).name
    policy = policy_of(platform, name, version)
    detail: dict[str, object] = {"identity": identity, "role": Role.CONSUMER.value, "definition": definition, "purpose": purpose}
    if purpose is not None and policy.purposes and purpose not in policy.purposes:
        raise AccessDeniedError(
            f"purpose {purpose!r} is not declared for {definition} (declared: {', '.join(policy.purposes)})", ref=ref or definition, detail=detail
        )
    try:  # no purpose: only a grant without a purpose covers it (a purpose-scoped consumer must say why it reads)
        trust.require(platform, Role.CONSUMER, definition=definition, purpose=purpose, identity=identity)
    except AccessDeniedError as exc:
        hint = (
            "; its grants name a purpose: pass --purpose (open_dataset(..., purpose=...))"
            if purpose is None and _scoped(platform, identity, definition)
            else ""
        )
        raise AccessDeniedError(str(exc).removeprefix("ACCESS_DENIED: ") + hint, ref=ref or definition, detail=detail) from exc
    covering = trust.records(platform).verified_grants(identity, only=lambda g: grant_covers(g, Role.CONSUMER, definition=definition, purpose=purpose))
    seen = {c for g in covering for c in g.columns}
    return AccessDecision(identity, definition, purpose, policy.withheld(sorted(seen)), policy.row_filter)


def _scoped(platform: Platform, identity: str, definition: str) -> bool:
    """Whether ``identity`` holds a consumer grant on ``definition`` for some named purpose."""
    return any(g.purpose is not None and grant_covers(g, Role.CONSUMER, definition=definition, purpose=g.purpose) for g in trust.grants_of(platform, identity))


def authorize_table(platform: Platform, table: str) -> str:
    """The current identity, allowed to read canonical table ``table`` directly (every row and column, no access policy).

    That needs a ``consumer`` grant without a purpose on ``source=<table>`` (or unscoped), or ``operator``; a purpose-scoped
    consumer reads through ``open_dataset`` only. Audited (``table.location``); else AccessDeniedError naming both.
    """
    identity = trust.current_identity(platform).name
    for role, source in ((Role.CONSUMER, table), (Role.OPERATOR, None)):
        try:
            trust.require(platform, role, source=source, identity=identity)
        except AccessDeniedError:
            continue
        trust.audit(platform, "table.location", f"table:{table}", detail={"role": role.value})
        return identity
    detail: dict[str, object] = {"identity": identity, "role": Role.CONSUMER.value, "source": table}
    raise AccessDeniedError(
        f"identity {identity!r} may not read canonical table {table!r} directly: it needs a consumer grant on source={table} "
        "without a purpose, or operator (a purpose-scoped grant reads through open_dataset)",
        ref=f"table:{table}",
        detail=detail,
    )
