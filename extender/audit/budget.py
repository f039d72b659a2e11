"""Registries' pull limits during an audit: what they said is left, and what the audit spends.

Docker Hub answers `ratelimit-remaining: 76;w=21600` (pulls left in a window of seconds);
the registry transport records it per API host (`archfit_registry_ratelimit_remaining`).
The audit reads that figure before each lookup and sends none that would go past it: such
an image is reported unknown, with why, instead of costing a 429 (and a wait) per image.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterator, Mapping

Remaining = Callable[[str], int | None]
"""Pulls a registry API host last said are left; None when it never said."""


class PullBudget:
    """Refuses a lookup on a host when its lookups in flight would use up what is left."""

    def __init__(self, remaining: Remaining) -> None:
        self._remaining = remaining
        self._in_flight: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()
        """Lookups not sent, by host."""

    @contextlib.contextmanager
    def spend(self, host: str) -> Iterator[str | None]:
        """Inside: None when the lookup may go to `host`, else why it may not."""
        left = self._remaining(host)
        # A lookup costs at most one pull where pulls are counted (Docker Hub counts the
        # manifest GET; HEAD and blobs are free); lookups still running may spend theirs.
        if left is not None and left <= self._in_flight[host]:
            self.refused[host] += 1
            yield (
                f"{host} rate limit: {left} pulls left (ratelimit-remaining) and "
                f"{self._in_flight[host]} lookups running; not looked up"
            )
            return
        self._in_flight[host] += 1
        try:
            yield None
        finally:
            self._in_flight[host] -= 1


def shortfalls(needed: Mapping[str, int], remaining: Remaining) -> dict[str, tuple[int, int]]:
    """Host → (pulls needed, pulls left) where the audit needs more than the host allows."""
    found = {}
    for host, count in needed.items():
        left = remaining(host)
        if left is not None and count > left:
            found[host] = (count, left)
    return found


def warning(host: str, needed: int, left: int) -> str:
    """The line an audit prints before it starts the lookups that would run out."""
    return (
        f"{host} allows {left} more pulls now (ratelimit-remaining) and this audit needs up "
        f"to {needed} (one per distinct image not looked up yet): about {needed - left} "
        "images will be reported unknown. Give archfit credentials for it "
        "(registry.dockerConfigPath), use a mirror (registry.hosts), or audit fewer clusters "
        "or namespaces at a time."
    )
