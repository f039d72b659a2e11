"""Controllable clocks for code that takes `clock=time.monotonic` (or a Lease's UTC clock):
tests move time, not sleep."""

from __future__ import annotations

import datetime
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


@dataclass
class FakeUtcClock:
    """UTC wall-clock time (a Lease's clock) that only moves when the test calls `advance`."""

    now: datetime.datetime = datetime.datetime(2026, 11, 22, 2, 0, tzinfo=datetime.UTC)

    def __call__(self) -> datetime.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move time forward."""
        self.now += datetime.timedelta(seconds=seconds)
