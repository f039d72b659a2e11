"""Waiting in tests without fixed sleeps: poll a condition with a bound, or let the loop settle.

A fixed sleep is either too short on a loaded machine or wasted on an idle one. Code that
takes `clock=` gets tests.support.clock.FakeClock instead; what is left is waiting for
real processes or other tasks, which these do without a guessed duration.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


def wait_for(
    condition: Callable[[], object], what: str, seconds: float = 60.0, interval: float = 0.2
) -> object:
    """Poll `condition` until it returns something truthy, and return that.

    An exception from `condition` counts as not yet; after `seconds`, TimeoutError names
    `what` and the last exception.
    """
    poll = _Poll(condition, what, seconds)
    while not poll.done():
        time.sleep(interval)
    return poll.result


async def wait_for_async(
    condition: Callable[[], object], what: str, seconds: float = 10.0, interval: float = 0.01
) -> object:
    """`wait_for` inside the event loop: other tasks run while it polls."""
    poll = _Poll(condition, what, seconds)
    while not poll.done():  # noqa: ASYNC110 — nothing signals the condition: poll it
        await asyncio.sleep(interval)
    return poll.result


class _Poll:
    """One bounded poll of `condition`, shared by the sync and async waits."""

    def __init__(self, condition: Callable[[], object], what: str, seconds: float) -> None:
        self.condition, self.what, self.seconds = condition, what, seconds
        self.deadline = time.monotonic() + seconds
        self.last_error: BaseException | None = None
        self.result: object = None

    def done(self) -> bool:
        """True once `condition` is truthy; TimeoutError past the deadline."""
        try:
            self.result = self.condition()
        except Exception as error:
            self.last_error, self.result = error, None
        if self.result:
            return True
        if time.monotonic() > self.deadline:
            raise TimeoutError(_timed_out(self.what, self.seconds, self.last_error))
        return False


async def settle(rounds: int = 50) -> None:
    """Yield to the event loop `rounds` times, so every task that can run runs until it waits.

    No wall clock is involved: a task blocked on a lock or an event stays blocked, a task
    that only needed its turn gets it.
    """
    for _ in range(rounds):
        await asyncio.sleep(0)


def _timed_out(what: str, seconds: float, last_error: BaseException | None) -> str:
    detail = f" (last error: {last_error!r})" if last_error else ""
    return f"timed out after {seconds:g}s waiting for {what}{detail}"
