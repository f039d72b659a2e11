"""Image platforms read from a file for `archfit lint --platforms`: what `archfit inspect -o
json` or `archfit audit -o json` wrote, so lint runs where registries cannot be reached.

Pure: JSON text in, a lookup table out. An entry is found by the image as the manifest writes
it, by its normalised reference (`api:1` is `docker.io/library/api:1`), and, for an entry with
a digest, by `name@digest`: a digest-pinned manifest matches what inspect wrote for its tag.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from extender.audit.pure.report import same_image
from extender.core.platforms import Resolved, Unknown, parse
from extender.errors import InputError
from extender.registry.errors import RegistryError
from extender.registry.pure.reference import parse as parse_reference


class PlatformsFileError(InputError):
    """The file is not what inspect or audit writes; the message says what is wrong."""


@dataclass(frozen=True, slots=True)
class KnownPlatforms:
    """Image → what the file says of it."""

    entries: Mapping[str, Resolved]
    """By `same_image` key."""
    hints: Mapping[str, str] = field(default_factory=dict)
    """By `same_image` key: the newer tag that runs on arm64 (audit's arm64FromTag)."""

    def resolved(self, image: str) -> Resolved:
        found = self.entries.get(same_image(image))
        if found is None:
            return Unknown("not in the platforms file (--platforms)")
        return found

    def hint(self, image: str) -> str | None:
        return self.hints.get(same_image(image))


def read_platforms(text: str | bytes) -> KnownPlatforms:
    """The entries of an inspect (a list) or audit (an object) JSON document."""
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as error:
        raise PlatformsFileError(f"not JSON: {error}") from error
    if isinstance(data, list):
        return KnownPlatforms(_inspected(data))
    if isinstance(data, dict) and isinstance(data.get("imagePlatforms"), list):
        return KnownPlatforms(_inspected(data["imagePlatforms"]), _hints(data.get("blockers")))
    raise PlatformsFileError(
        "neither `archfit inspect -o json` (a list) nor `archfit audit -o json` (an object "
        "with imagePlatforms) output"
    )


def _inspected(items: list[Any]) -> dict[str, Resolved]:
    entries: dict[str, Resolved] = {}
    for index, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("image"), str):
            raise PlatformsFileError(f"entry {index}: not an object with an image")
        found = _resolved(item, index)
        keys = {same_image(item["image"])}
        if isinstance(item.get("reference"), str):
            keys.add(same_image(item["reference"]))
        digest = item.get("digest")
        if isinstance(digest, str) and digest:
            with contextlib.suppress(RegistryError):  # no reference: found by its text only
                keys.add(same_image(f"{parse_reference(item['image']).name}@{digest}"))
        for key in keys:
            entries[key] = found
    return entries


def _resolved(item: Mapping[str, Any], index: int) -> Resolved:
    error = item.get("error")
    if isinstance(error, dict):
        return Unknown(f"the platforms file says it failed: {error.get('message') or error}")
    if isinstance(item.get("unknown"), str):
        return Unknown(f"the platforms file says: {item['unknown']}")
    platforms = item.get("platforms")
    if not isinstance(platforms, list):
        raise PlatformsFileError(f"entry {index} ({item['image']}): no platforms list")
    try:
        return frozenset(parse(str(text)) for text in platforms)
    except ValueError as error:
        raise PlatformsFileError(f"entry {index} ({item['image']}): {error}") from error


def _hints(blockers: object) -> dict[str, str]:
    found: dict[str, str] = {}
    for item in blockers if isinstance(blockers, list) else ():
        if isinstance(item, dict) and isinstance(item.get("arm64FromTag"), str):
            found[same_image(str(item.get("image")))] = item["arm64FromTag"]
    return found
