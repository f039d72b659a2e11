"""A circuit breaker: after repeated failures a dependency is skipped for a while.

Open, it costs one clock read per call: no connection attempt and nothing awaited. After
`open_seconds` one probe goes through; its outcome closes the breaker or opens it again.
"""

from __future__ import annotations

import time

from extender.ttlmap import Clock


class CircuitBreaker:
    """Counts consecutive failures; `allow()` says whether to call the dependency now."""

    def __init__(self, failures: int, open_seconds: float, clock: Clock = time.monotonic) -> None:
        self._threshold = failures
        self._open_seconds = open_seconds
        self._clock = clock
        self._failures = 0
        self._open_until: float | None = None
        self._probing = False

    @property
    def is_open(self) -> bool:
        """Whether calls are being skipped (a probe may be running)."""
        return self._open_until is not None

    def allow(self) -> bool:
        """True when a call may go ahead; while open, only one probe after the pause."""
        if self._open_until is None:
            return True
        if self._probing or self._clock() < self._open_until:
            return False
        self._probing = True
        return True

    def succeeded(self) -> None:
        """A call worked: close the breaker."""
        self._failures = 0
        self._open_until = None
        self._probing = False

    def failed(self) -> None:
        """A call failed; enough of them in a row (or a failed probe) open the breaker."""
        self._failures += 1
        if self._probing or self._failures >= self._threshold:
            self._open_until = self._clock() + self._open_seconds
        self._probing = False

    def abandoned(self) -> None:
        """An allowed call did not reach the dependency after all: it proves nothing."""
        self._probing = False
