"""`archfit inspect IMAGE...`: what the resolver sees for each image, as a table or JSON.

Uses the same registry settings and credential chain as the extender: the mounted docker
config and the kubelet credential provider plugins (a pod's pull secrets need a pod).
With a shared Redis cache an answer may be a tag's last good digest while its registry
fails (`cache.staleIfErrorSeconds`); both outputs say so.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, TextIO

import orjson
from rich.table import Table
from rich.text import Text

from extender.evidence import EvidenceBook, LearnedResolver
from extender.platforms import Platform
from extender.registry.errors import RegistryError, snippet
from extender.registry.resolver import ImageResolution, build_resolver
from extender.registry.settings import CacheSettings, RegistrySettings
from extender.tables import print_table

_HEADERS = ("IMAGE", "DIGEST", "PLATFORMS")


async def run_inspect(
    images: list[str],
    registry: RegistrySettings,
    cache: CacheSettings,
    as_json: bool,
    out: TextIO,
) -> int:
    """Resolve every image concurrently and print the outcome; 1 if any failed, else 0."""
    book = EvidenceBook(cache)  # learned evidence (extender.evidence): shared through Redis
    await book.sync()
    resolver = LearnedResolver(await build_resolver(registry, cache), book)
    try:
        outcomes = await asyncio.gather(
            *(resolver.resolve(image) for image in images), return_exceptions=True
        )
    finally:
        await resolver.aclose()
        await book.aclose()
    for outcome in outcomes:
        if isinstance(outcome, BaseException) and not isinstance(outcome, Exception):
            raise outcome  # KeyboardInterrupt, cancellation: not an image's problem
    rows = list(zip(images, outcomes, strict=True))
    if as_json:
        out.write(_json(rows, book.failing))
    else:
        _table(rows, out, book.failing)
    return 1 if any(isinstance(outcome, BaseException) for _, outcome in rows) else 0


def _platforms(resolution: ImageResolution) -> list[str]:
    return [str(platform) for platform in sorted(resolution.platforms)]


def _describe_error(error: BaseException) -> dict[str, str]:
    kind = type(error).__name__ if isinstance(error, RegistryError) else "Error"
    return {"type": kind, "message": str(error) or type(error).__name__}


def _json(
    rows: Sequence[tuple[str, ImageResolution | BaseException]],
    failing: Callable[[str], frozenset[Platform]],
) -> str:
    documents: list[dict[str, Any]] = []
    for image, outcome in rows:
        if isinstance(outcome, BaseException):
            documents.append({"image": image, "error": _describe_error(outcome)})
            continue
        documents.append(
            {
                "image": image,
                "reference": str(outcome.reference),
                "digest": outcome.digest,
                "mediaType": outcome.media_type,
                "platforms": _platforms(outcome),
                "artifact": outcome.artifact,
                "stale": _stale(outcome),
                "doesNotRunOn": sorted(str(p) for p in failing(outcome.digest)),
            }
        )
    return orjson.dumps(documents, option=orjson.OPT_INDENT_2).decode() + "\n"


def _stale(resolution: ImageResolution) -> dict[str, Any] | None:
    """Why the answer is the tag's last good digest, or None for the registry's own answer."""
    stale = resolution.stale
    if stale is None:
        return None
    return {"ageSeconds": round(stale.age_seconds), "error": stale.error}


def _table(
    rows: Sequence[tuple[str, ImageResolution | BaseException]],
    out: TextIO,
    failing: Callable[[str], frozenset[Platform]],
) -> None:
    table = Table(box=None, highlight=False, pad_edge=False)
    for header in _HEADERS:
        table.add_column(header, overflow="fold")
    for raw, outcome in rows:
        image = snippet(raw, 120)  # user input: one row per image, nothing unprintable
        if isinstance(outcome, BaseException):
            error = _describe_error(outcome)
            cells = (image, "-", f"ERROR {error['type']}: {snippet(error['message'], 300)}")
        elif outcome.artifact:
            cells = (image, outcome.digest, "(artifact: not a runnable image)")
        else:
            platforms = ", ".join(_platforms(outcome)) or "(no usable platform entries)"
            if outcome.stale is not None:
                stale = outcome.stale
                platforms += (
                    f" (STALE: last good answer, {round(stale.age_seconds)}s old;"
                    f" registry failed: {snippet(stale.error, 300)})"
                )
            if learned := failing(outcome.digest):
                platforms += f" (LEARNED: does not run on {', '.join(sorted(map(str, learned)))})"
            cells = (image, outcome.digest, platforms)
        table.add_row(*(Text(cell) for cell in cells))  # Text: "[x]" in a name is not markup
    print_table(table, out)
