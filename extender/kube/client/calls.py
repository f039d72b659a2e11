"""Blocking Kubernetes API calls run from the event loop in daemon threads: the one way the
adapters of extender/kube/ run one (`blocking`, or `DaemonCalls` with a cap and a wait).

asyncio.to_thread would use the default executor, whose threads asyncio.run joins at exit: a
call stuck on a silent API server (or in urllib3's retries) would then hold up shutdown. A
daemon thread is left behind instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_MAX_THREADS = 16


class DaemonCalls:
    """At most `max_threads` calls outstanding, each awaited for 1.5 times `timeout_seconds` (a
    call is bounded by its own KubeApi timeout; urllib3 may retry once)."""

    def __init__(self, timeout_seconds: float, max_threads: int = _MAX_THREADS) -> None:
        self.timeout = timeout_seconds
        self._max = max_threads
        self._lock = threading.Lock()
        self._live = 0

    async def run(self, call: Callable[[], T]) -> T:
        """`call()`'s answer or exception; RuntimeError when too many calls are outstanding,
        TimeoutError past the wait."""
        with self._lock:
            if self._live >= self._max:
                raise RuntimeError("too many Kubernetes API calls outstanding")
            self._live += 1
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()

        def run() -> None:
            try:
                outcome: tuple[Any, BaseException | None] = (call(), None)
            except BaseException as error:  # handed to the awaiting side, whatever it is
                outcome = (None, error)
            finally:
                with self._lock:
                    self._live -= 1
            # RuntimeError: the loop is gone (shutdown), so nobody is waiting any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_settle, future, *outcome)

        threading.Thread(target=run, name="archfit-api-call", daemon=True).start()
        return await asyncio.wait_for(future, self.timeout * 1.5)


async def blocking(call: Callable[..., T], *args: Any) -> T:
    """`call(*args)` in a daemon thread: its answer or exception. Bounded by the call's own
    timeouts (every KubeApi call has one)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def run() -> None:
        try:
            outcome: tuple[Any, BaseException | None] = (call(*args), None)
        except BaseException as error:  # handed to the awaiting side, whatever it is
            outcome = (None, error)
        # RuntimeError: the loop is gone (shutdown), so nobody is waiting any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_settle, future, *outcome)

    threading.Thread(target=run, name="archfit-api-call", daemon=True).start()
    return await future


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)
