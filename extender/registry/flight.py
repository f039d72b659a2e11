"""Single flight: concurrent callers for one key share one task.

The task is shielded, so a caller that stops waiting (its request hit its deadline)
does not cancel the fetch that everyone else, and the cache, are waiting for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from functools import partial
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class SingleFlight(Generic[K, V]):
    """At most one running task per key; later callers await the same task."""

    def __init__(self) -> None:
        self._tasks: dict[K, asyncio.Task[V]] = {}

    def __len__(self) -> int:
        return len(self._tasks)

    async def run(self, key: K, factory: Callable[[], Awaitable[V]]) -> V:
        """Return the result of the task for `key`, starting it with `factory` if none runs."""
        task = self._tasks.get(key)
        if task is None:
            task = asyncio.ensure_future(factory())
            self._tasks[key] = task
            task.add_done_callback(partial(self._done, key))
        return await asyncio.shield(task)

    def _done(self, key: K, task: asyncio.Task[V]) -> None:
        if self._tasks.get(key) is task:
            del self._tasks[key]
        if not task.cancelled():
            # Every waiter may have gone; mark the error seen so asyncio does not log it.
            task.exception()

    async def aclose(self) -> None:
        """Cancel every task still running (at shutdown) and wait for them."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
