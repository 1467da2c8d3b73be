"""Publication state rules: every legal and illegal transition, and the helper predicates."""

from __future__ import annotations

import itertools

import pytest

from dsv_platform.core.errors import IllegalTransitionError
from dsv_platform.core.publication.states import (
    TRANSITIONS,
    RealizationState,
    alias_targetable,
    check_transition,
    is_collectable,
    is_readable,
    is_terminal,
)

S = RealizationState

LEGAL = {
    (S.STAGING, S.SEALED), (S.STAGING, S.FAILED), (S.STAGING, S.ABANDONED),
    (S.SEALED, S.PUBLISHED), (S.SEALED, S.FAILED), (S.SEALED, S.ABANDONED), (S.SEALED, S.QUARANTINED),
    (S.PUBLISHED, S.ELIGIBLE), (S.PUBLISHED, S.QUARANTINED), (S.PUBLISHED, S.REDACTED), (S.PUBLISHED, S.EXPIRED),
    (S.ELIGIBLE, S.PUBLISHED), (S.ELIGIBLE, S.QUARANTINED), (S.ELIGIBLE, S.REDACTED), (S.ELIGIBLE, S.EXPIRED),
    (S.QUARANTINED, S.PUBLISHED), (S.QUARANTINED, S.REDACTED), (S.QUARANTINED, S.EXPIRED),
    (S.FAILED, S.EXPIRED), (S.ABANDONED, S.EXPIRED),
}  # fmt: skip
ALL_PAIRS = list(itertools.product(S, S))


def test_states_table_matches_the_protocol() -> None:
    table = {(old, new) for old, nxt in TRANSITIONS.items() for new in nxt}
    assert table == LEGAL
    assert set(TRANSITIONS) == set(S)


@pytest.mark.parametrize(("old", "new"), sorted(LEGAL, key=lambda p: (p[0].value, p[1].value)), ids=lambda s: s.value)
def test_states_legal_transition_passes(old: RealizationState, new: RealizationState) -> None:
    check_transition(old, new)


@pytest.mark.parametrize(("old", "new"), [p for p in ALL_PAIRS if p not in LEGAL], ids=lambda s: s.value)
def test_states_illegal_transition_raises_naming_both(old: RealizationState, new: RealizationState) -> None:
    with pytest.raises(IllegalTransitionError) as info:
        check_transition(old, new)
    assert f"{old.value} -> {new.value}" in str(info.value)


def test_states_terminal_states_have_no_exit() -> None:
    assert {s for s in S if is_terminal(s)} == {S.REDACTED, S.EXPIRED}
    for state in (S.REDACTED, S.EXPIRED):
        with pytest.raises(IllegalTransitionError, match="terminal"):
            check_transition(state, S.PUBLISHED)


def test_states_no_transition_to_itself() -> None:
    for state in S:
        with pytest.raises(IllegalTransitionError):
            check_transition(state, state)


def test_states_predicates() -> None:
    assert {s for s in S if is_readable(s)} == {S.PUBLISHED, S.ELIGIBLE}
    assert {s for s in S if alias_targetable(s)} == {S.PUBLISHED, S.ELIGIBLE}
    assert {s for s in S if is_collectable(s)} == {S.FAILED, S.ABANDONED}


def test_states_every_state_reaches_a_terminal_state() -> None:
    for start in S:
        seen, frontier = {start}, [start]
        while frontier:
            for nxt in TRANSITIONS[frontier.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    frontier.append(nxt)
        assert seen & {S.REDACTED, S.EXPIRED}, start
