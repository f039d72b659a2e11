"""Resolving a pod's images to platforms within the request's deadline.

The registry-backed resolver lives in `extender.registry`; this module only
declares what it must provide and bounds how long a request waits for it.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

from extender.placement import Resolved, Unknown
from extender.platforms import Platform
from extender.pods import PullSecretsRef

LOOKUP_GRACE_MIN_SECONDS = 1.0
"""Past its deadline a request's lookups get its deadline again (at least this long), only to
have the answer cached for the scheduler's next attempt; not a 10 s request timeout."""

lookup_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "lookup_deadline", default=None
)
"""The `time.monotonic()` instant by which the current lookup's registry requests must end;
None outside a request (inspect, audit): then only registry.requestTimeoutSeconds applies."""


def lookup_seconds_left() -> float | None:
    """Seconds left in the current lookup's budget, or None when it has none."""
    deadline = lookup_deadline.get()
    return None if deadline is None else deadline - time.monotonic()


class PlatformResolver(Protocol):
    """Answers which platforms an image provides.

    Raises any exception when it cannot tell; the caller then treats the
    image as unknown under the failure policy, never as unsupported.
    """

    async def platforms(self, image: str, pull: PullSecretsRef) -> frozenset[Platform]: ...


class FunctionResolver:
    """Adapts a plain async function to PlatformResolver (tests, embedding)."""

    def __init__(
        self, func: Callable[[str, PullSecretsRef], Awaitable[frozenset[Platform]]]
    ) -> None:
        self._func = func

    async def platforms(self, image: str, pull: PullSecretsRef) -> frozenset[Platform]:
        return await self._func(image, pull)


class Resolution:
    """Runs lookups, keeping unfinished ones alive after a request's deadline.

    A lookup that outlives its request keeps running so that the scheduler's
    next attempt finds the answer cached; the set below holds a reference so
    the task is not garbage-collected mid-flight.
    """

    def __init__(self, resolver: PlatformResolver) -> None:
        self.resolver = resolver
        self._background: set[asyncio.Task[frozenset[Platform]]] = set()

    async def resolve(
        self, images: Iterable[str], pull: PullSecretsRef, deadline: float
    ) -> dict[str, Resolved]:
        """Resolve every image concurrently; what is unfinished after `deadline` s is Unknown.

        The lookups (and what they start) may run for `deadline` plus a grace of the same
        length, at least LOOKUP_GRACE_MIN_SECONDS.
        """
        deadline = max(deadline, 0.0)
        budget = time.monotonic() + deadline + max(deadline, LOOKUP_GRACE_MIN_SECONDS)
        token = lookup_deadline.set(budget)
        try:  # tasks copy the context as it is now, budget included
            tasks = {
                image: asyncio.ensure_future(self.resolver.platforms(image, pull))
                for image in images
            }
        finally:
            lookup_deadline.reset(token)
        if not tasks:
            return {}
        _, pending = await asyncio.wait(tasks.values(), timeout=max(deadline, 0.0))
        results: dict[str, Resolved] = {}
        for image, task in tasks.items():
            if task in pending:
                self._background.add(task)
                task.add_done_callback(self._forget)
                results[image] = Unknown(f"lookup still running after {deadline:g}s")
            elif task.cancelled():
                results[image] = Unknown("lookup cancelled")
            elif (error := task.exception()) is not None:
                results[image] = Unknown(describe_failure(error))
            else:
                results[image] = task.result()
        return results

    def _forget(self, task: asyncio.Task[frozenset[Platform]]) -> None:
        self._background.discard(task)
        if not task.cancelled():
            task.exception()  # mark retrieved: its error was already reported as Unknown

    async def aclose(self) -> None:
        """Cancel lookups still running in the background (at shutdown)."""
        for task in list(self._background):
            task.cancel()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)


def describe_failure(error: BaseException) -> str:
    """Why a lookup failed, short enough for a log line, an event or a report cell."""
    text = str(error) or type(error).__name__
    # Registry error bodies can be long; the reason ends up in logs and events.
    return text if len(text) <= 200 else text[:197] + "..."
