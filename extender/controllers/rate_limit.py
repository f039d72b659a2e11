"""A rate limit the controllers share: the releaser's patches, the watcher's log reads, Events
and evictions."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class RateLimit:
    """At most `per_second` calls of `wait()` return per second, in order."""

    def __init__(self, per_second: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._interval = 1.0 / per_second
        self._next = 0.0
        self._clock = clock

    async def wait(self) -> None:
        now = self._clock()
        at = max(now, self._next)
        self._next = at + self._interval
        if at > now:
            await asyncio.sleep(at - now)
