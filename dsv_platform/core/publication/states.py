"""Publication state rules for realizations (docs/architecture.md, "Publication is a transaction").

Pure rules: which state may follow which. The registry applies them inside
its transactions and records every change as an event; nothing here touches
storage.

Details: docs/publication.md
"""

from __future__ import annotations

import enum

from dsv_platform.core.errors import IllegalTransitionError


class RealizationState(enum.Enum):
    STAGING = "STAGING"
    SEALED = "SEALED"
    PUBLISHED = "PUBLISHED"
    ELIGIBLE = "ELIGIBLE"
    FAILED = "FAILED"
    ABANDONED = "ABANDONED"
    QUARANTINED = "QUARANTINED"
    REDACTED = "REDACTED"
    EXPIRED = "EXPIRED"


S = RealizationState

TRANSITIONS: dict[RealizationState, frozenset[RealizationState]] = {
    S.STAGING: frozenset({S.SEALED, S.FAILED, S.ABANDONED}),
    S.SEALED: frozenset({S.PUBLISHED, S.FAILED, S.ABANDONED, S.QUARANTINED}),
    S.PUBLISHED: frozenset({S.ELIGIBLE, S.QUARANTINED, S.REDACTED, S.EXPIRED}),
    S.ELIGIBLE: frozenset({S.PUBLISHED, S.QUARANTINED, S.REDACTED, S.EXPIRED}),
    S.QUARANTINED: frozenset({S.PUBLISHED, S.REDACTED, S.EXPIRED}),
    S.FAILED: frozenset({S.EXPIRED}),
    S.ABANDONED: frozenset({S.EXPIRED}),
    S.REDACTED: frozenset(),
    S.EXPIRED: frozenset(),
}

READABLE: frozenset[RealizationState] = frozenset({S.PUBLISHED, S.ELIGIBLE})
COLLECTABLE: frozenset[RealizationState] = frozenset({S.FAILED, S.ABANDONED})
TERMINAL: frozenset[RealizationState] = frozenset(s for s, nxt in TRANSITIONS.items() if not nxt)


class ConcurrentTransitionError(IllegalTransitionError):
    """The realization's state changed between reading it and updating it; re-read and decide again."""


def is_legal(old: RealizationState, new: RealizationState) -> bool:
    return new in TRANSITIONS[old]


def check_transition(old: RealizationState, new: RealizationState) -> None:
    """Raise :class:`IllegalTransitionError` naming both states unless ``old -> new`` is legal."""
    if not is_legal(old, new):
        allowed = ", ".join(sorted(s.value for s in TRANSITIONS[old])) or "none: terminal state"
        raise IllegalTransitionError(f"illegal realization transition {old.value} -> {new.value} (allowed from {old.value}: {allowed})")


def is_collectable(state: RealizationState) -> bool:
    """Failed and abandoned attempts: garbage collection may expire them."""
    return state in COLLECTABLE


def is_readable(state: RealizationState) -> bool:
    """Readers may load realizations in these states."""
    return state in READABLE


def alias_targetable(state: RealizationState) -> bool:
    """An alias may move only to a realization in one of these states."""
    return state in READABLE


def is_terminal(state: RealizationState) -> bool:
    return state in TERMINAL
