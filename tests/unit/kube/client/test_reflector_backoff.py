"""The list-watch's back-off (extender.kube.client.watching.ReflectorBackoff), step by step
on a clock the test moves: client-go's reflector's, tools/cache/reflector.go."""

from __future__ import annotations

from extender.kube.client.watching import (
    BACKOFF_CAP_SECONDS,
    BACKOFF_RESET_SECONDS,
    ReflectorBackoff,
)
from tests.support.clock import FakeClock


def test_delays_double_from_0_8_seconds_to_the_30_second_cap():
    """0.8, 1.6, 3.2, 6.4, 12.8, 25.6, then 30 every time."""
    backoff = ReflectorBackoff(clock=FakeClock(), jitter=lambda: 0.0)
    assert [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0] == [
        round(backoff.delay(), 6) for _ in range(8)
    ]


def test_jitter_adds_up_to_as_much_again():
    """wait.Jitter(d, 1.0): d plus up to d more; past the cap, 30 to 60 s."""
    backoff = ReflectorBackoff(clock=FakeClock(), jitter=lambda: 0.999)
    delays = [backoff.delay() for _ in range(8)]
    assert (1.6, 2 * BACKOFF_CAP_SECONDS) == (round(delays[0], 2), round(delays[-1]))


def test_the_steps_start_again_only_after_two_quiet_minutes():
    """DelayWithReset(2 min): within two minutes of the last reset the delays keep growing,
    whatever happened between them (a list that succeeded); after, they start over."""
    clock = FakeClock()
    backoff = ReflectorBackoff(clock=clock, jitter=lambda: 0.0)
    first = [backoff.delay() for _ in range(3)]
    clock.advance(BACKOFF_RESET_SECONDS - 1)
    later = backoff.delay()
    clock.advance(2)
    assert ([0.8, 1.6, 3.2], 6.4, 0.8) == (
        [round(d, 6) for d in first],
        round(later, 6),
        round(backoff.delay(), 6),
    )
