"""One object per distinct value: what the identity caches above rely on.

Thousands of nodes share a handful of platforms, and thousands of images a handful of
platform sets. Handing out the very same object for equal values keeps memory per item to a
reference, and lets what is built from them (placement's groups, the verbs' decisions) be
kept and found again by `id()`: a copy would not be wrong, only never found again.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

T = TypeVar("T", bound=Hashable)


class Interner(Generic[T]):
    """Hands out the first object seen of each distinct value.

    Bounded by `limit` distinct values, which real clusters stay far below; past it, it
    starts again from nothing, so a stream of invented values costs speed, never memory.
    """

    __slots__ = ("_kept", "_limit")

    def __init__(self, limit: int = 1_024) -> None:
        self._kept: dict[T, T] = {}
        self._limit = limit

    def __call__(self, value: T) -> T:
        kept = self._kept.get(value)
        if kept is not None:
            return kept
        if len(self._kept) >= self._limit:
            self._kept.clear()
        self._kept[value] = value
        return value

    def clear(self) -> None:
        """Forget every value (objects handed out stay valid)."""
        self._kept.clear()
