"""The verdict of an artifact's seven steps: the most damning standing failure; a rebuild that reproduced supersedes step 3."""

from __future__ import annotations

import pytest

from dsv_platform.core.reproduction.reproduction import Outcome
from dsv_platform.core.reproduction.reproduction_steps import TITLES, StepStatus, failed, passed, skipped, verdict


def test_verdict_all_passed_is_reproduced() -> None:
    steps = [passed(n, "ok") for n in (1, 2, 3, 4, 5)] + [skipped(6, "nothing to rebuild"), passed(7, "written")]
    assert verdict(steps) is Outcome.REPRODUCED


def test_verdict_rebuild_that_reproduced_supersedes_the_input_failure() -> None:
    steps = [passed(1, ""), passed(2, ""), failed(3, Outcome.EXPIRED, "x expired"), passed(4, ""), skipped(5, "see 6"), passed(6, "matched"), passed(7, "")]
    assert verdict(steps) is Outcome.REPRODUCED_AFTER_REBUILD


def test_verdict_failed_rebuild_keeps_the_input_failure() -> None:
    steps = [passed(1, ""), passed(2, ""), failed(3, Outcome.EXPIRED, ""), skipped(4, ""), skipped(5, "")]
    steps += [failed(6, Outcome.EXPIRED, "raw gone"), passed(7, "")]
    assert verdict(steps) is Outcome.EXPIRED


@pytest.mark.parametrize(
    ("number", "outcome"),
    [
        (1, Outcome.NOT_FOUND),
        (2, Outcome.NOT_REPRODUCIBLE_DIRTY),
        (2, Outcome.NOT_REPRODUCIBLE_NO_LOCK),
        (4, Outcome.ENVIRONMENT_DRIFT),
        (5, Outcome.HASH_MISMATCH),
        (5, Outcome.RERUN_FAILED),
    ],
)
def test_verdict_names_the_failed_step(number: int, outcome: Outcome) -> None:
    steps = [failed(n, outcome, "why") if n == number else skipped(n, "no mismatch") if n == 6 else passed(n, "") for n in range(1, 8)]
    assert verdict(steps) is outcome and not outcome.reconstructable


def test_verdict_dirty_outranks_a_mismatch_and_a_step_documents_itself() -> None:
    steps = [passed(1, ""), failed(2, Outcome.NOT_REPRODUCIBLE_DIRTY, "dirty"), failed(5, Outcome.HASH_MISMATCH, "differs")]
    assert verdict(steps) is Outcome.NOT_REPRODUCIBLE_DIRTY
    doc = steps[1].to_document()
    assert doc == {"step": 2, "title": TITLES[2], "status": "failed", "summary": "dirty", "failure": "NOT_REPRODUCIBLE_DIRTY", "detail": {}}
    assert skipped(6, "why").status is StepStatus.SKIPPED


def test_verdict_of_nothing_run_is_not_reproduced() -> None:
    assert verdict([]) is Outcome.NOT_FOUND
    assert not verdict([passed(1, ""), passed(2, ""), passed(3, ""), skipped(5, "?"), passed(7, "")]).reconstructable
