"""The one retry function: exponential backoff with full jitter, only for the errors the caller names retryable."""

import pytest

from dsv_platform.core.publication.retry import backoff_delay, retry


class Lost(Exception):
    pass


def test_the_delay_doubles_up_to_the_cap_and_jitter_spreads_it_from_zero():
    assert [backoff_delay(n, base=0.05, cap=0.3, rng=lambda: 1.0) for n in range(1, 6)] == [0.05, 0.1, 0.2, 0.3, 0.3]
    assert backoff_delay(4, rng=lambda: 0.0) == 0.0
    spread = {round(backoff_delay(3), 6) for _ in range(50)}
    assert len(spread) > 10 and all(0 <= d <= 0.2 for d in spread)  # racing writers do not wake together


def test_a_lost_race_is_tried_again_after_a_jittered_wait_until_it_wins():
    waits, seen, reloaded = [], [], []

    def attempt(n):
        seen.append(n)
        if n < 3:
            raise Lost(f"lost {n}")
        return "won"

    lost = lambda e: isinstance(e, Lost)  # noqa: E731
    result = retry(attempt, attempts=5, again=lost, exhausted=RuntimeError, on_retry=lambda n, e: reloaded.append(n), sleep=waits.append)
    assert result == "won" and seen == [1, 2, 3] and reloaded == [1, 2]
    assert len(waits) == 2 and 0 <= waits[0] <= 0.05 and 0 <= waits[1] <= 0.1


def test_an_error_that_is_not_a_lost_race_propagates_at_once():
    seen = []

    def attempt(n):
        seen.append(n)
        raise ValueError("a verdict")

    with pytest.raises(ValueError, match="a verdict"):
        retry(attempt, attempts=5, again=lambda e: isinstance(e, Lost), exhausted=RuntimeError, sleep=lambda s: None)
    assert seen == [1]


def test_every_attempt_lost_raises_the_callers_error_from_the_last():
    def attempt(n):
        raise Lost(f"lost {n}")

    with pytest.raises(RuntimeError, match="gave up") as info:
        retry(attempt, attempts=3, again=lambda e: isinstance(e, Lost), exhausted=lambda e: RuntimeError("gave up"), sleep=lambda s: None)
    assert str(info.value.__cause__) == "lost 3"
    with pytest.raises(ValueError):
        retry(attempt, attempts=0, again=lambda e: True, exhausted=RuntimeError)
