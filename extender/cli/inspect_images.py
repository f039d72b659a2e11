"""`archfit inspect IMAGE...`: what the resolver sees for each image, as a table or JSON.

Uses the same registry settings and credential chain as the extender: the mounted docker
config and the kubelet credential provider plugins (a pod's pull secrets need a pod).
With a shared Redis cache an answer may be a tag's last good digest while its registry
fails (`cache.staleIfErrorSeconds`); both outputs say so. With `--verify` each index entry
is checked against its image config (extender.registry.verify): a disagreement is shown,
the config is believed, and the exit status is 1.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, TextIO

import orjson
from rich.text import Text

from extender.config.registry_settings import CacheSettings, RegistrySettings
from extender.core.platforms import Platform
from extender.registry.errors import RegistryError, snippet
from extender.registry.resolver import ImageResolution, RegistryResolver, build_resolver
from extender.registry.verify import Verification
from extender.resolution.evidence_book import EvidenceBook
from extender.resolution.learned_resolver import LearnedResolver
from extender.tables import Column, fitted, print_table

_VERIFY_HEADER = "INDEX CHECK"
_SHORT_DIGEST = 19  # "sha256:" and 12 hex digits, as `docker images` shows them

Found = tuple[ImageResolution, Verification | None]
"""An image's resolution and, with --verify, what checking its index found."""


async def run_inspect(
    images: list[str],
    registry: RegistrySettings,
    cache: CacheSettings,
    as_json: bool,
    out: TextIO,
    *,
    verify: bool = False,
) -> int:
    """Resolve every image concurrently and print the outcome; 1 if any failed (or, with
    `verify`, any index disagrees with its configs), else 0."""
    # learned evidence (extender.resolution.evidence_book): shared through Redis
    book = EvidenceBook(cache)
    await book.sync()
    registry_resolver = await build_resolver(registry, cache)
    resolver = LearnedResolver(registry_resolver, book)
    try:
        outcomes = await asyncio.gather(
            *(_look(resolver, registry_resolver, image, verify) for image in images),
            return_exceptions=True,
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
        _table(rows, out, book.failing, verify)
    failed = any(
        isinstance(outcome, BaseException) or (outcome[1] and outcome[1].disagreements)
        for _, outcome in rows
    )
    return 1 if failed else 0


async def _look(
    resolver: LearnedResolver, registry_resolver: RegistryResolver, image: str, verify: bool
) -> Found:
    if not verify:
        return await resolver.resolve(image), None
    return await registry_resolver.verify(image)


def _platforms(found: Found) -> list[str]:
    resolution, verification = found
    platforms = resolution.platforms
    if verification is not None:
        platforms = verification.believed(platforms)
    return [str(platform) for platform in sorted(platforms)]


def _verified(verification: Verification) -> dict[str, Any]:
    return {
        "disagreements": len(verification.disagreements),
        "entries": [
            {
                "digest": check.digest,
                "index": str(check.claimed),
                "config": str(check.believed),
                "agrees": not check.problem,
                "problem": check.problem or None,
            }
            for check in verification.checks
        ],
    }


def _check_cell(resolution: ImageResolution, verification: Verification) -> str:
    """The table's INDEX CHECK cell: each disagreement in plain words, else what was checked."""
    wrong = verification.disagreements
    if wrong:
        return "; ".join(f"DISAGREES: {c.problem} ({c.digest[:_SHORT_DIGEST]}...)" for c in wrong)
    if not verification.checks:
        return "single manifest: its platform is its config's" if not resolution.artifact else "-"
    return f"ok: {len(verification.checks)} entries match their configs"


def _describe_error(error: BaseException) -> dict[str, str]:
    kind = type(error).__name__ if isinstance(error, RegistryError) else "Error"
    return {"type": kind, "message": str(error) or type(error).__name__}


def _json(
    rows: Sequence[tuple[str, Found | BaseException]],
    failing: Callable[[str], frozenset[Platform]],
) -> str:
    documents: list[dict[str, Any]] = []
    for image, outcome in rows:
        if isinstance(outcome, BaseException):
            documents.append({"image": image, "error": _describe_error(outcome)})
            continue
        resolution, verification = outcome
        document = {
            "image": image,
            "reference": str(resolution.reference),
            "digest": resolution.digest,
            "mediaType": resolution.media_type,
            "platforms": _platforms(outcome),
            "artifact": resolution.artifact,
            "stale": _stale(resolution),
            "doesNotRunOn": sorted(str(p) for p in failing(resolution.digest)),
        }
        if verification is not None:
            document["verified"] = _verified(verification)
        documents.append(document)
    return orjson.dumps(documents, option=orjson.OPT_INDENT_2).decode() + "\n"


def _stale(resolution: ImageResolution) -> dict[str, Any] | None:
    """Why the answer is the tag's last good digest, or None for the registry's own answer."""
    stale = resolution.stale
    if stale is None:
        return None
    return {"ageSeconds": round(stale.age_seconds), "error": stale.error}


# The digest is never cut nor broken, so it can be copied; the platforms wrap.
_COLUMNS = (
    Column("IMAGE"),
    Column("DIGEST"),
    Column("PLATFORMS", shortest=24, wrap=True),
)
_VERIFY_COLUMN = Column(_VERIFY_HEADER, shortest=24, wrap=True)


def _table(
    rows: Sequence[tuple[str, Found | BaseException]],
    out: TextIO,
    failing: Callable[[str], frozenset[Platform]],
    verify: bool = False,
) -> None:
    columns = (*_COLUMNS, _VERIFY_COLUMN) if verify else _COLUMNS
    texts: list[list[Text]] = []
    for raw, outcome in rows:
        image = snippet(raw, 120)  # user input: one row per image, nothing unprintable
        cells: tuple[str, ...]
        if isinstance(outcome, BaseException):
            error = _describe_error(outcome)
            cells = (image, "-", f"ERROR {error['type']}: {snippet(error['message'], 300)}")
            cells += ("-",) if verify else ()
            texts.append([Text(cell) for cell in cells])
            continue
        resolution, verification = outcome
        if resolution.artifact:
            cells = (image, resolution.digest, "(artifact: not a runnable image)")
        else:
            platforms = ", ".join(_platforms(outcome)) or "(no usable platform entries)"
            if resolution.stale is not None:
                stale = resolution.stale
                platforms += (
                    f" (STALE: last good answer, {round(stale.age_seconds)}s old;"
                    f" registry failed: {snippet(stale.error, 300)})"
                )
            if learned := failing(resolution.digest):
                platforms += f" (LEARNED: does not run on {', '.join(sorted(map(str, learned)))})"
            cells = (image, resolution.digest, platforms)
        if verification is not None:
            cells += (_check_cell(resolution, verification),)
        texts.append([Text(cell) for cell in cells])  # Text: "[x]" in a name is not markup
    print_table(lambda width: fitted(columns, texts, width, rule=False), out)
