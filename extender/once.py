"""Warnings about the same cause, logged once per interval: a flood of bad requests is one line.

A client that sends a million malformed bodies, or a scheduler that keeps sending NodeNames
to an archfit without a node index, must not fill the logs; the metric counts every one.
"""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from collections.abc import Callable

_NUMBERS = re.compile(r"\d+")


class OncePerCause:
    """Says whether a warning for `cause` should be logged now, and how many were held back."""

    def __init__(
        self,
        interval: float = 60.0,
        max_causes: int = 1_024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._interval = interval
        self._max_causes = max_causes
        self._clock = clock
        self._seen: OrderedDict[str, tuple[float, int]] = OrderedDict()
        """cause -> (when it was last logged, how many were held back since)."""

    def log_now(self, cause: str) -> int | None:
        """None when this warning should be held back; else how many were held back before it.

        Numbers in `cause` (positions, counts) are ignored, so "column 7" and "column 9"
        are one cause.
        """
        key = _NUMBERS.sub("N", cause)[:200]
        now = self._clock()
        last = self._seen.get(key)
        if last is not None and now - last[0] < self._interval:
            self._seen[key] = (last[0], last[1] + 1)
            return None
        self._seen[key] = (now, 0)
        self._seen.move_to_end(key)
        while len(self._seen) > self._max_causes:
            self._seen.popitem(last=False)
        return 0 if last is None else last[1]
