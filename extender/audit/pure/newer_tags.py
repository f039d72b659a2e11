"""Which newer tags of a blocking image to try for arm64, and what to say about them (pure).

A tag is a version when it reads `[v]MAJOR[.MINOR[.PATCH]][-SUFFIX]`. A newer tag is one of
the same shape (the same `v`, as many numbers, the same suffix, so `1.2-alpine` is compared
with `1.3-alpine` only and `-rc1` never follows a release) with a higher version. Only the
highest few are looked up: the lookups are bounded, and the newest tags matter most.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_VERSION = re.compile(r"(v?)(\d{1,9})(?:\.(\d{1,9}))?(?:\.(\d{1,9}))?(-[0-9A-Za-z][0-9A-Za-z.-]*)?")

LIMIT = 3
"""Newer tags looked up per blocking image: the highest ones."""
PAGE_SIZE = 1000
"""Tags asked for per page of `/v2/<name>/tags/list` (`?n=`)."""
PAGES = 3
"""Pages of the tag list read at most per repository; a longer list is cut (and says so)."""


@dataclass(frozen=True, slots=True, order=True)
class Version:
    """A tag read as a version: the numbers compare, the shape must match."""

    numbers: tuple[int, ...]
    shape: tuple[str, int, str]
    """(`v` or "", how many numbers, suffix): tags of one shape are one release line."""


def version(tag: str) -> Version | None:
    """The tag as a version, or None when it is not one (`latest`, `stable`, a commit)."""
    found = _VERSION.fullmatch(tag)
    if found is None:
        return None
    prefix, *parts, suffix = found.groups()
    numbers = tuple(int(part) for part in parts if part is not None)
    return Version(numbers, (prefix, len(numbers), suffix or ""))


def newer(current: str, tags: Iterable[str], limit: int = LIMIT) -> tuple[str, ...]:
    """The `limit` highest tags of `current`'s shape above it, lowest first."""
    base = version(current)
    if base is None:
        return ()
    found = []
    for tag in set(tags):
        candidate = version(tag)
        if candidate is not None and candidate.shape == base.shape and candidate > base:
            found.append((candidate, tag))
    return tuple(tag for _, tag in sorted(found)[-limit:]) if limit > 0 else ()


@dataclass(frozen=True, slots=True)
class TagHint:
    """What the newer tags of a blocking image say about arm64."""

    image: str
    """The blocking image as the report shows it."""
    arm64_tag: str | None
    """The lowest of the tags checked that runs on linux/arm64; None when none does."""
    checked: tuple[str, ...] = ()
    """The newer tags looked up, lowest first; empty when the tag is not a version or
    nothing newer exists."""
    note: str = ""
    """Why nothing could be said (the tag list could not be read, a lookup failed)."""
    complete: bool = True
    """False when the tag list was cut at its page bound."""

    @property
    def action(self) -> str:
        """The advice in a few words, for a table cell."""
        if self.arm64_tag is not None:
            return f"upgrade to {self.arm64_tag} (runs on arm64)"
        if self.note:
            return f"newer tags unknown: {self.note}"
        if self.checked:
            return f"no arm64 in newer tags {', '.join(self.checked)}: rebuild for arm64"
        return "rebuild for arm64 (no newer version tag)"


def no_version(image: str) -> TagHint:
    """The hint for an image whose tag is no version (or that is pinned by digest)."""
    return TagHint(image, None)
