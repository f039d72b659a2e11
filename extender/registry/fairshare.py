"""Fair shares of the registry connection pool, so slow hosts cannot starve the others.

Each host may hold at most `min(per-host cap, total // (busy hosts + 1))` connections. The
`+ 1` keeps one share free for a host that is not busy yet: eight registries that hang
cannot take every connection from a ninth that answers at once.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from types import TracebackType


class FairShare:
    """Counts connections per host and makes a host wait while it holds its share."""

    def __init__(self, total: int, per_host: int) -> None:
        self._total = total
        self._per_host = per_host
        self._in_use: Counter[str] = Counter()
        self._waiting: Counter[str] = Counter()
        self._changed = asyncio.Condition()
        self._queued = 0
        """Takers and givers inside (or waiting for) the condition's lock. While there are
        none, taking a free share or giving one back happens at once, as it would under the
        lock: nothing waits to be let in first, nor to be told, and every registry
        request takes and gives one."""

    def share(self) -> int:
        """What one host may hold now."""
        busy = len(self._in_use.keys() | self._waiting.keys())
        return max(1, min(self._per_host, self._total // (busy + 1)))

    def slot(self, host: str) -> Slot:
        """Hold one of `host`'s connections for the duration of the `async with` block."""
        return Slot(self, host)

    async def take(self, host: str) -> None:
        """Wait for one of `host`'s connections, then hold it."""
        if not self._queued:
            # As under the lock, the host counting as busy while it asks; with nobody queued
            # nobody waits, so the busy hosts are those holding connections, and this one.
            in_use = self._in_use
            held = in_use[host]
            busy = len(in_use) + (0 if held else 1)
            share = max(1, min(self._per_host, self._total // (busy + 1)))
            if held < share and in_use.total() < self._total:
                in_use[host] = held + 1
                return
        self._queued += 1
        try:
            async with self._changed:
                self._waiting[host] += 1
                try:
                    await self._changed.wait_for(lambda: self._may_take(host))
                finally:
                    self._drop(self._waiting, host)
                    self._changed.notify_all()  # one busy host fewer: the others' share may grow
                self._in_use[host] += 1
        finally:
            self._queued -= 1

    async def give(self, host: str) -> None:
        """Give back a connection `take` held."""
        if not self._queued:
            self._drop(self._in_use, host)  # nobody waits to be told
            return
        self._queued += 1
        try:
            async with self._changed:
                self._drop(self._in_use, host)
                self._changed.notify_all()
        finally:
            self._queued -= 1

    def _may_take(self, host: str) -> bool:
        return self._in_use[host] < self.share() and self._in_use.total() < self._total

    @staticmethod
    def _drop(counter: Counter[str], host: str) -> None:
        counter[host] -= 1
        if counter[host] <= 0:
            del counter[host]


class Slot:
    """`FairShare.slot`: takes one of a host's connections on entry, gives it back on exit."""

    __slots__ = ("_fair", "_host")

    def __init__(self, fair: FairShare, host: str) -> None:
        self._fair = fair
        self._host = host

    async def __aenter__(self) -> None:
        await self._fair.take(self._host)

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self._fair.give(self._host)
