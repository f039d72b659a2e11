"""Text archfit shows people (scheduler reasons, admission warnings): image names made
printable and cut short."""

from __future__ import annotations

MAX_IMAGE_IN_REASON = 120
"""kube-scheduler cuts the event message at 1024 bytes and groups identical reasons; an image
name longer than this is cut so the clause stays short."""


def short_image(image: str, limit: int = MAX_IMAGE_IN_REASON) -> str:
    """The image name made printable and cut to `limit` characters, for reasons and warnings."""
    printable = "".join(ch if ch.isprintable() else "?" for ch in image)
    if len(printable) <= limit:
        return printable
    return printable[: limit - 3] + "..."
