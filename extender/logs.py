"""structlog setup: JSON lines (orjson) in production, a console renderer on a terminal."""

from __future__ import annotations

import logging
import sys
from typing import Literal, TextIO

import orjson
import structlog

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


def configure(
    level: Literal["debug", "info", "warning", "error"] = "info",
    fmt: Literal["auto", "json", "console"] = "auto",
    stream: TextIO | None = None,
) -> None:
    """Configure structlog process-wide; called once by the CLI, never by the app factory.

    `stream` defaults to stdout (the service); commands whose stdout is their report log
    to stderr instead.
    """
    out = stream or sys.stdout
    console = fmt == "console" or (fmt == "auto" and out.isatty())
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if console:
        structlog.configure(
            processors=[*shared, structlog.dev.ConsoleRenderer()],
            wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
            logger_factory=structlog.PrintLoggerFactory(file=out),
            cache_logger_on_first_use=True,
        )
    else:
        structlog.configure(
            processors=[
                *shared,
                structlog.processors.format_exc_info,
                structlog.processors.JSONRenderer(serializer=orjson.dumps),
            ],
            wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
            logger_factory=structlog.BytesLoggerFactory(file=out.buffer),
            cache_logger_on_first_use=True,
        )
    # aiohttp and kubernetes log through the standard library; keep their noise
    # at warning and route it to stderr as plain lines.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(name)s %(message)s")
