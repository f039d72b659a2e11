"""`archfit inspect IMAGE...`: what the resolver sees for each image, as a table or JSON.

Uses the same registry settings and credential chain as the extender: the mounted docker
config and the kubelet credential provider plugins (a pod's pull secrets need a pod).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, TextIO

import orjson

from extender.registry.errors import RegistryError, snippet
from extender.registry.resolver import ImageResolution, build_resolver
from extender.registry.settings import CacheSettings, RegistrySettings

_HEADERS = ("IMAGE", "DIGEST", "PLATFORMS")


async def run_inspect(
    images: list[str],
    registry: RegistrySettings,
    cache: CacheSettings,
    as_json: bool,
    out: TextIO,
) -> int:
    """Resolve every image concurrently and print the outcome; 1 if any failed, else 0."""
    resolver = await build_resolver(registry, cache)
    try:
        outcomes = await asyncio.gather(
            *(resolver.resolve(image) for image in images), return_exceptions=True
        )
    finally:
        await resolver.aclose()
    for outcome in outcomes:
        if isinstance(outcome, BaseException) and not isinstance(outcome, Exception):
            raise outcome  # KeyboardInterrupt, cancellation: not an image's problem
    rows = list(zip(images, outcomes, strict=True))
    out.write(_json(rows) if as_json else _table(rows))
    return 1 if any(isinstance(outcome, BaseException) for _, outcome in rows) else 0


def _platforms(resolution: ImageResolution) -> list[str]:
    return [str(platform) for platform in sorted(resolution.platforms)]


def _describe_error(error: BaseException) -> dict[str, str]:
    kind = type(error).__name__ if isinstance(error, RegistryError) else "Error"
    return {"type": kind, "message": str(error) or type(error).__name__}


def _json(rows: Sequence[tuple[str, ImageResolution | BaseException]]) -> str:
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
            }
        )
    return orjson.dumps(documents, option=orjson.OPT_INDENT_2).decode() + "\n"


def _table(rows: Sequence[tuple[str, ImageResolution | BaseException]]) -> str:
    lines: list[tuple[str, str, str]] = [_HEADERS]
    for raw, outcome in rows:
        image = snippet(raw, 120)  # user input: one row per image, nothing unprintable
        if isinstance(outcome, BaseException):
            error = _describe_error(outcome)
            lines.append((image, "-", f"ERROR {error['type']}: {error['message']}"))
            continue
        if outcome.artifact:
            platforms = "(artifact: not a runnable image)"
        else:
            platforms = ", ".join(_platforms(outcome)) or "(no usable platform entries)"
        lines.append((image, outcome.digest, platforms))
    widths = [max(len(line[column]) for line in lines) for column in range(2)]
    return "".join(f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c}\n" for a, b, c in lines)
