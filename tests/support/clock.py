"""A controllable clock for code that takes `clock=time.monotonic`: tests move time, not sleep."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class FakeClock:
    """Monotonic seconds that only move when the test calls `advance`."""

    now: float = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move time forward."""
        self.now += seconds
