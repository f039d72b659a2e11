"""Which registries are slower than a request can wait for: the extender does not wait on them.

kube-scheduler decides one pod at a time, so every second a filter or prioritize call waits on
a registry, every pod in the queue waits too. Once a request has run out of time waiting on a
registry host, the next unknown image on that host would most likely run out of time too: the
extender then answers it as unknown at once (its failure policy decides) while the lookup goes
on in the background, and the scheduler's next attempt finds the answer cached. A lookup that
ends within a request's budget shows the host answers in time again (docs/operations.md,
"How long the scheduler waits").

Pure bookkeeping over an injected clock: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable

from extender.registry.errors import InvalidReference
from extender.registry.pure.reference import parse
from extender.ttlmap import Clock, TTLMap

SLOW_FOR_SECONDS = 30.0
"""How long a host stays slow after a request last ran out of time on it, unless a lookup
there ends in time first: a host nobody looks up again is waited on again after this."""
_HOSTS = 1024
"""Slow hosts remembered at most: a cluster pulls from a handful."""


def registry_host(image: str) -> str:
    """The registry an image is pulled from (`docker.io`, `ghcr.io`, `127.0.0.1:5000`); ""
    for a reference archfit cannot read (its lookup fails at once, never slowly)."""
    try:
        return parse(image).domain
    except InvalidReference:
        return ""


class SlowRegistries:
    """Registry hosts on which a request recently ran out of time, until a lookup there ends
    within the budget of the request that started it."""

    def __init__(self, clock: Clock, slow_for_seconds: float = SLOW_FOR_SECONDS) -> None:
        self._slow: TTLMap[str, bool] = TTLMap(_HOSTS, clock)
        self._slow_for = slow_for_seconds
        self._clock = clock

    def __bool__(self) -> bool:
        """Whether any host may be slow (a cheap check before reading references)."""
        return len(self._slow) > 0

    def __contains__(self, host: str) -> bool:
        """Whether a request should not wait on `host` now."""
        return bool(host) and self._slow.get(host) is not None

    def ran_out(self, host: str) -> None:
        """A request stopped waiting on a lookup at `host`: its budget was spent."""
        if host:
            self._slow.put(host, True, self._slow_for)

    def timer(self, budget_seconds: float) -> Callable[[str], None]:
        """Started as a lookup starts, called with its host as it ends having asked the
        registry: one that ended within `budget_seconds` shows the host answers in time, one
        that did not keeps it slow."""
        started = self._clock()

        def ended(host: str) -> None:
            if self._clock() - started <= budget_seconds:
                self._slow.pop(host)
            else:
                self.ran_out(host)

        return ended
