"""Approval and protected aliases: the pure rules (docs/publication.md, "Approval and protected aliases").

An approval moves a PUBLISHED realization to ELIGIBLE; a revocation moves it back
to PUBLISHED. Both are realization events with an actor and a non-empty reason.
A protected alias (``platform.yaml`` ``protected_aliases``, default
``[production]``) may move only to an ELIGIBLE realization, and a realization a
protected alias points at cannot be revoked without ``force``.
"""

from __future__ import annotations

from collections.abc import Collection

from dsv_platform.core.errors import ConfigurationError, DsvError, FailureKind, IllegalTransitionError
from dsv_platform.core.publication.states import RealizationState

S = RealizationState
DEFAULT_PROTECTED_ALIASES: tuple[str, ...] = ("production",)
APPROVED = S.ELIGIBLE


class ApprovalStateError(IllegalTransitionError):
    """Approve or revoke asked of a realization in a state that does not allow it; the message names the state."""

    kind = FailureKind.APPROVAL_STATE


class ProtectedAliasError(DsvError):
    """A protected alias would point at a realization that is not ELIGIBLE; the message names the alias, ref and state."""

    kind = FailureKind.PROTECTED_ALIAS


def check_reason(reason: str | None, *, command: str) -> str:
    """The reason, stripped; an empty one is a usage error (every approval and revocation says why)."""
    text = (reason or "").strip()
    if not text:
        raise ConfigurationError(f"{command}: --reason must be a non-empty text saying why")
    if "\n" in text:
        raise ConfigurationError(f"{command}: --reason must be one line")
    return text


def check_approvable(ref: str, state: RealizationState) -> bool:
    """True when ``ref`` must move PUBLISHED -> ELIGIBLE; False when it is ELIGIBLE already (a no-op); else ApprovalStateError."""
    if state is S.ELIGIBLE:
        return False
    if state is not S.PUBLISHED:
        raise ApprovalStateError(f"cannot approve {ref}: it is {state.value}; only a PUBLISHED realization can become ELIGIBLE")
    return True


def check_revocable(ref: str, state: RealizationState) -> bool:
    """True when ``ref`` must move ELIGIBLE -> PUBLISHED; False when it is PUBLISHED (nothing to revoke); else ApprovalStateError."""
    if state is S.PUBLISHED:
        return False
    if state is not S.ELIGIBLE:
        raise ApprovalStateError(f"cannot revoke the approval of {ref}: it is {state.value}, not ELIGIBLE")
    return True


def check_protected_target(alias: str, ref: str, state: RealizationState, protected: Collection[str], *, approve_with: str | None = None) -> None:
    """Refuse pointing the protected ``alias`` at ``ref`` unless it is ELIGIBLE (a model version too: ``approve_with`` its command)."""
    if alias in protected and state is not APPROVED:
        what = "realization" if approve_with is None else "version"
        raise ProtectedAliasError(
            f"alias {alias!r} is protected and may point only to an ELIGIBLE {what}; {ref} is {state.value} "
            f"(approve it first: {approve_with or f'dsv approve {ref} --reason TEXT'})"
        )


def check_revoke_aliases(ref: str, aliases: Collection[str], *, force: bool) -> None:
    """Refuse revoking ``ref`` while protected ``aliases`` point at it, unless ``force``."""
    if aliases and not force:
        names = ", ".join(sorted(aliases))
        raise ProtectedAliasError(
            f"cannot revoke {ref}: protected alias(es) {names} point at it; move them to another ELIGIBLE realization first, "
            "or pass --force to revoke and leave them pointing at a PUBLISHED realization"
        )
