"""JSONPatch (RFC 6902) pieces the webhook and the gate both write into a pod."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def pointer(*parts: str) -> str:
    """An RFC 6901 JSON pointer: `~` is written `~0` and `/` `~1` in each part."""
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


def set_in_metadata(
    metadata: Mapping[str, Any], member: str, key: str, value: str
) -> dict[str, Any]:
    """The op that sets `metadata.<member>[key]` (labels or annotations), creating the map
    when the pod has none: "add" replaces an existing member (RFC 6902 4.1)."""
    if metadata.get(member) is None:
        return {"op": "add", "path": f"/metadata/{member}", "value": {key: value}}
    return {"op": "add", "path": pointer("metadata", member, key), "value": value}
