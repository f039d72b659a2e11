"""A bounded map whose entries expire, with one load in flight per key (single flight).

Every cache in archfit is one of these: tokens and challenges, refused credentials,
credential plugin answers, pull secrets and the resolver's memory tier. Each entry carries
its own time to live, because a token says how long it lives and a failure is kept for
less time than an answer. The map holds at most `max_entries`, and with `max_bytes` at
most that many bytes by the sizes `put` is told; beyond either the least recently used
entry goes, so what a flood of distinct keys can cost is bounded.

`get_or_load` is a load-or-call made asynchronous: concurrent callers for a key share
one load. The load runs as its own task, so a caller that stops waiting (its
request hit its deadline) cancels neither the load nor the other callers, and the answer
is still kept for the next request. Each caller waits on a future of its own that the
load settles in the step it ends in: `asyncio.shield` of the task would tell its caller a
pass of the event loop later, and such passes are much of a cold lookup's CPU.
A failed load is not kept; a caller that wants a failure remembered (negative caching) has
its loader return it as a value, and `ttl_of` gives that value a shorter life.

Nothing here does I/O; the clock is injected, so tests move time instead of sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from functools import partial
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
Clock = Callable[[], float]
"""Monotonic seconds (`time.monotonic`); tests pass a FakeClock."""


class TTLMap(Generic[K, V]):
    """At most `max_entries` values (and `max_bytes`), each kept until its own expiry; LRU
    eviction beyond."""

    def __init__(
        self, max_entries: int, clock: Clock = time.monotonic, *, max_bytes: int | None = None
    ) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._clock = clock
        self._entries: OrderedDict[K, tuple[V, float]] = OrderedDict()
        """key -> (value, the clock reading at which it expires), least recently used first."""
        self._sizes: dict[K, int] = {}
        """key -> the size `put` was told, for the entries that have one."""
        self.bytes = 0
        """The sum of the held entries' sizes."""
        self._loads: dict[K, _Load[V]] = {}

    def __len__(self) -> int:
        """Entries held; an expired one counts until it is met or evicted."""
        return len(self._entries)

    @property
    def loading(self) -> int:
        """Loads in flight."""
        return len(self._loads)

    def get(self, key: K) -> V | None:
        """The live value under `key`, or None (also for a kept None: use get_or_load there)."""
        entry = self._live(key)
        return None if entry is None else entry[0]

    def get_with_ttl(self, key: K) -> tuple[V, float] | None:
        """The live value under `key` and the seconds it has left, or None."""
        entry = self._live(key)
        return None if entry is None else (entry[0], entry[1] - self._clock())

    def put(self, key: K, value: V, ttl: float, size: int = 0) -> None:
        """Keep `value` for `ttl` seconds, counted as `size` bytes against `max_bytes`; a
        `ttl` of zero or less forgets `key` instead. A value larger than `max_bytes` alone
        is not kept."""
        self.pop(key)
        if ttl <= 0 or (self._max_bytes is not None and size > self._max_bytes):
            return
        self._entries[key] = (value, self._clock() + ttl)
        if size:
            self._sizes[key] = size
            self.bytes += size
        entries = self._entries
        while len(entries) > self._max_entries or (
            self._max_bytes is not None and self.bytes > self._max_bytes
        ):
            self._forget(next(iter(entries)))

    def pop(self, key: K) -> None:
        """Forget `key`, if held. A load in flight for it still keeps its answer."""
        if key in self._entries:
            self._forget(key)

    def clear(self) -> None:
        """Forget every entry. Loads in flight still keep their answers."""
        self._entries.clear()
        self._sizes.clear()
        self.bytes = 0

    def _forget(self, key: K) -> None:
        del self._entries[key]
        if self._sizes:
            self.bytes -= self._sizes.pop(key, 0)

    async def get_or_load(
        self, key: K, loader: Callable[[], Awaitable[V]], ttl_of: Callable[[V], float]
    ) -> V:
        """The live value under `key`, else the answer of one shared `loader()` call.

        The first caller's `loader` runs; callers arriving while it runs wait for the same
        answer or exception. The answer is kept for `ttl_of(answer)` seconds (zero: not
        kept); an exception is never kept.
        """
        entry = self._live(key)
        if entry is not None:
            return entry[0]
        load = self._loads.get(key)
        if load is None:
            load = self._loads[key] = _Load()
            load.task = asyncio.ensure_future(self._load(key, load, loader, ttl_of))
            load.task.add_done_callback(partial(self._landed, key, load))
        elif load.task.done():
            # Cancelled before its first step, in this pass of the loop: so is this caller.
            return load.task.result()
        waiter: asyncio.Future[V] = asyncio.get_running_loop().create_future()
        load.waiters.append(waiter)
        try:
            return await waiter
        except asyncio.CancelledError:
            # This caller stopped waiting (or the load was cancelled): the load keeps no
            # future of a caller that is gone, however long it runs.
            with contextlib.suppress(ValueError):
                load.waiters.remove(waiter)
            raise

    async def aclose(self) -> None:
        """Cancel the loads still in flight (at shutdown) and wait for them to end."""
        tasks = [load.task for load in self._loads.values()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def _live(self, key: K) -> tuple[V, float] | None:
        """The entry under `key` unless it has expired (then it is dropped); now most recent."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[1] <= self._clock():
            self._forget(key)
            return None
        self._entries.move_to_end(key)
        return entry

    async def _load(
        self,
        key: K,
        load: _Load[V],
        loader: Callable[[], Awaitable[V]],
        ttl_of: Callable[[V], float],
    ) -> V:
        # The shared task: it keeps the answer even when every caller has stopped waiting.
        # It tells its waiters itself, in the step it ends in, rather than through its
        # done callbacks a pass of the loop later.
        try:
            value = await loader()
            self.put(key, value, ttl_of(value))
        except asyncio.CancelledError:
            self._unlist(key, load)
            _settle(load.waiters, cancelled=True)
            raise
        except Exception as error:
            self._unlist(key, load)
            _settle(load.waiters, error=error)
            raise
        self._unlist(key, load)
        _settle(load.waiters, value)
        return value

    def _unlist(self, key: K, load: _Load[V]) -> None:
        if self._loads.get(key) is load:
            del self._loads[key]

    def _landed(self, key: K, load: _Load[V], task: asyncio.Task[V]) -> None:
        # Also for a load cancelled before its first step, which `_load` never saw.
        self._unlist(key, load)
        if task.cancelled():
            _settle(load.waiters, cancelled=True)
            return
        # Every caller may have gone; mark the exception seen so asyncio does not log it.
        error = task.exception()
        if error is not None:
            _settle(load.waiters, error=error)


class _Load(Generic[V]):
    """One load in flight: its task, and a future for each caller waiting on it."""

    __slots__ = ("task", "waiters")

    task: asyncio.Task[V]

    def __init__(self) -> None:
        self.waiters: list[asyncio.Future[V]] = []


def _settle(
    waiters: list[asyncio.Future[V]],
    value: V | None = None,
    error: BaseException | None = None,
    *,
    cancelled: bool = False,
) -> None:
    """Tell every caller still waiting the load's answer: `value`, else `error`, else its
    cancellation (a value may itself be an exception: a loader may return a failure)."""
    for waiter in waiters:
        if waiter.done():
            continue  # its caller stopped waiting (cancelled), or it was told already
        if cancelled:
            waiter.cancel()
        elif error is not None:
            waiter.set_exception(error)
        else:
            waiter.set_result(value)  # type: ignore[arg-type]
