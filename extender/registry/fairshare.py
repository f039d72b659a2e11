"""Fair shares of the registry connection pool, so slow hosts cannot starve the others.

Each host may hold at most `min(per-host cap, total // (busy hosts + 1))` connections. The
`+ 1` keeps one share free for a host that is not busy yet: eight registries that hang
cannot take every connection from a ninth that answers at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator


class FairShare:
    """Counts connections per host and makes a host wait while it holds its share."""

    def __init__(self, total: int, per_host: int) -> None:
        self._total = total
        self._per_host = per_host
        self._in_use: Counter[str] = Counter()
        self._waiting: Counter[str] = Counter()
        self._changed = asyncio.Condition()

    def share(self) -> int:
        """What one host may hold now."""
        busy = len(self._in_use.keys() | self._waiting.keys())
        return max(1, min(self._per_host, self._total // (busy + 1)))

    @contextlib.asynccontextmanager
    async def slot(self, host: str) -> AsyncIterator[None]:
        """Hold one of `host`'s connections for the duration of the block."""
        async with self._changed:
            self._waiting[host] += 1
            try:
                await self._changed.wait_for(lambda: self._may_take(host))
            finally:
                self._drop(self._waiting, host)
                self._changed.notify_all()  # one busy host fewer: the others' share may grow
            self._in_use[host] += 1
        try:
            yield
        finally:
            async with self._changed:
                self._drop(self._in_use, host)
                self._changed.notify_all()

    def _may_take(self, host: str) -> bool:
        return self._in_use[host] < self.share() and self._in_use.total() < self._total

    @staticmethod
    def _drop(counter: Counter[str], host: str) -> None:
        counter[host] -= 1
        if counter[host] <= 0:
            del counter[host]
