"""Text archfit shows people (scheduler reasons, admission warnings, log fields, reports):
made printable and cut short, in one way everywhere."""

from __future__ import annotations

import datetime

MAX_IMAGE_IN_REASON = 120
"""kube-scheduler cuts the event message at 1024 bytes and groups identical reasons; an image
name longer than this is cut so the clause stays short."""

MAX_LOGGED_ERROR = 300
"""An upstream error's text (an API server's, a registry's, a file's) in a log field: room for
the message, not for a whole body."""

MAX_API_MESSAGE = 500
"""The API server's own message about a refused write, which names every field it refused."""

MAX_ERROR_IN_REASON = 160
"""An upstream error's text inside archfit's own error, which reaches scheduling reasons,
admission warnings and audit reports: short, so that what archfit says around it shows."""

ELLIPSIS = "..."
"""What ends a cut text (three ASCII dots: log fields, events and CSV cells stay ASCII-safe)."""


def cut(text: str, limit: int) -> str:
    """`text` itself when it has at most `limit` characters, else its start ending in
    `...`, `limit` characters in all."""
    return text if len(text) <= limit else text[: limit - len(ELLIPSIS)] + ELLIPSIS


def error_text(error: BaseException, limit: int = MAX_LOGGED_ERROR) -> str:
    """An error's message cut to `limit` characters (`cut`): for a log field, or inside
    another message."""
    return cut(str(error), limit)


def printable(text: str, replacement: str) -> str:
    """`text` with every unprintable character (control characters, line breaks, bidi
    overrides) replaced by `replacement`."""
    return "".join(ch if ch.isprintable() else replacement for ch in text)


def short_image(image: str, limit: int = MAX_IMAGE_IN_REASON) -> str:
    """The image name made printable and cut to `limit` characters, for reasons and warnings."""
    return cut(printable(image, "?"), limit)


def utc_text(seconds: float) -> str:
    """Unix seconds as an RFC 3339 UTC time to the second (`2026-07-01T12:00:00Z`)."""
    return f"{datetime.datetime.fromtimestamp(seconds, datetime.UTC):%Y-%m-%dT%H:%M:%SZ}"
