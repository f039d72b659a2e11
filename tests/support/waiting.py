"""Waiting in async tests without fixed sleeps: let the loop settle, or poll with a bound.

A fixed sleep is either too short on a loaded machine or wasted on an idle one. Code that
takes `clock=` gets tests.support.clock.FakeClock instead; what is left is waiting for
other tasks or real processes, which these two do with no guessed duration.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

_POLL_SECONDS = 0.01


async def settle(rounds: int = 50) -> None:
    """Yield to the event loop `rounds` times, so every task that can run runs until it waits.

    No wall clock is involved: a task blocked on a lock or an event stays blocked, a task
    that only needed its turn gets it.
    """
    for _ in range(rounds):
        await asyncio.sleep(0)


async def eventually(condition: Callable[[], object], what: str, seconds: float = 10.0) -> None:
    """Poll `condition` until it is truthy; fail naming `what` after `seconds`."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached within {seconds:g}s")
        await asyncio.sleep(_POLL_SECONDS)
