"""The deadline of the request a lookup serves, whether it may be answered by a remembered
failure, whether it may ask the registry at all, and whether it asked one: set by
`extender.resolution` around its lookups, read (and, for the last, marked) by the registry client
and cache.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable

request_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "request_deadline", default=None
)
"""The `time.monotonic()` instant at which the request a lookup serves stops waiting for it;
None outside a request (inspect, audit). The registry layer bounds its requests by it."""

skip_remembered_failures: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "skip_remembered_failures", default=False
)
"""True for a lookup that must not be answered by a remembered failure (`cache.failureTtlSeconds`):
a held pod's retry, so it sees a registry's recovery at once. It still shares an in-flight
fetch and still answers from remembered successes. Set by `Resolution.resolve(...,
fresh_failures=True)`, or around a direct `PlatformResolver` call."""


cached_only: contextvars.ContextVar[bool] = contextvars.ContextVar("cached_only", default=False)
"""True for a lookup that may be answered only by the cache's tiers (memory, then Redis): where
they miss, the cache raises `NotCached` instead of asking the registry. Set by the shared
table's tier (extender.resolution.shared_tier), which answers such a miss itself."""


def request_seconds_left() -> float | None:
    """Seconds until the current lookup's request stops waiting (negative: past), or None."""
    deadline = request_deadline.get()
    return None if deadline is None else deadline - time.monotonic()


class LookupTrip:
    """Whether one lookup had to ask a registry (it missed every cache tier), and whom to
    tell when it does: a lookup answered from a cache says nothing of how fast the registry
    answers, and costs a request no wait."""

    __slots__ = ("asked_registry", "on_asked")

    def __init__(self, on_asked: Callable[[], None] | None = None) -> None:
        self.asked_registry = False
        self.on_asked = on_asked
        """Told once, as the lookup goes to its registry."""


lookup_trip: contextvars.ContextVar[LookupTrip | None] = contextvars.ContextVar(
    "lookup_trip", default=None
)
"""The current lookup's LookupTrip, set by `Resolution` in each lookup's own task; None
outside one."""


def note_registry_asked() -> None:
    """The current lookup missed the cache and goes to its registry."""
    trip = lookup_trip.get()
    if trip is not None and not trip.asked_registry:
        trip.asked_registry = True
        if trip.on_asked is not None:
            trip.on_asked()
