"""structlog setup: JSON lines (orjson) in production, a console renderer on a terminal."""

from __future__ import annotations

import json
import logging
import math
import random
import sys
import time
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any, Literal, TextIO

import orjson
import structlog

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


_configured_level = logging.DEBUG
"""The level `configure` set; debug until it runs (structlog's default writes every line)."""


def enabled(level: int) -> bool:
    """Whether lines at `level` are written: a line that would be dropped need not be built.
    (structlog's own `is_enabled_for` is newer than the structlog archfit supports.)"""
    return level >= _configured_level


def reset() -> None:
    """Back to structlog's defaults, every line written (tests that ran the CLI call it)."""
    global _configured_level
    structlog.reset_defaults()
    _configured_level = logging.DEBUG


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
        merge_request_context,
        structlog.processors.add_log_level,
        UtcTimestamp(),
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
                structlog.processors.JSONRenderer(serializer=_json_bytes),
            ],
            wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
            logger_factory=structlog.BytesLoggerFactory(file=out.buffer),
            cache_logger_on_first_use=True,
        )
    _route_stdlib(out, _LEVELS[level], console, shared)
    global _configured_level
    _configured_level = _LEVELS[level]


def _route_stdlib(
    out: TextIO, level: int, console: bool, shared: list[structlog.typing.Processor]
) -> None:
    """aiohttp and kubernetes log through the standard library: render their records the
    same way (one JSON line each, a traceback as a field), at warning and above."""
    renderer: structlog.typing.Processor = (
        structlog.dev.ConsoleRenderer()
        if console
        else structlog.processors.JSONRenderer(serializer=_json_text)
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[
            *shared,
            structlog.stdlib.add_logger_name,
            structlog.stdlib.ExtraAdder(),
        ],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            *([] if console else [structlog.processors.format_exc_info]),
            renderer,
        ],
    )
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(max(level, logging.WARNING))


class UtcTimestamp:
    """A structlog processor: `timestamp` as structlog's TimeStamper(fmt="iso", utc=True)
    writes it (`2026-11-24T13:19:22.092491Z`, no fraction at a whole second), with the date
    and time of day formatted once per second. `datetime.isoformat` with a zone costs more
    than the rest of a request's log line (docs/benchmarks.md, call_profile)."""

    __slots__ = ("_clock", "_prefix", "_second")

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._second = -1
        self._prefix = ""

    def __call__(
        self, logger: object, method: str, event_dict: structlog.typing.EventDict
    ) -> structlog.typing.EventDict:
        now = self._clock()
        second = math.floor(now)
        micro = round((now - second) * 1_000_000)  # half to even, as datetime rounds
        if micro == 1_000_000:
            second, micro = second + 1, 0
        if second != self._second:
            self._second = second
            self._prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        event_dict["timestamp"] = f"{self._prefix}.{micro:06d}Z" if micro else f"{self._prefix}Z"
        return event_dict


def _json_text(value: object, **_: object) -> str:
    return _json_bytes(value).decode()


def _json_bytes(value: object, **_: object) -> bytes:
    """One log line: orjson, or the standard library (\\u escapes) for text orjson cannot
    write, such as a lone surrogate from a pod's image name."""
    try:
        return orjson.dumps(value, default=str)
    except TypeError:
        return json.dumps(value, default=str).encode()


_NO_FIELDS: Mapping[str, Any] = MappingProxyType({})
_request_context: ContextVar[Mapping[str, Any]] = ContextVar("archfit_request", default=_NO_FIELDS)
"""The fields every line of the current request carries (`bind_request`, `bind`): one
variable for all of them. structlog's contextvars keep one per field, and merging them
copies and walks the whole context on every line, clearing them walks it again.
A mapping bound here is never changed, only replaced: a task started mid-request keeps the
fields of its start, as a copied context does."""


def bind_request(request_id: str | None, verb: str) -> None:
    """Start one request's log context (extender verbs and admission alike): forget what the
    last request bound, then bind its id (the caller's X-Request-Id, or a new one) and verb."""
    _request_context.set({"request_id": request_id or new_request_id(), "verb": verb})


def bind(**fields: Any) -> None:
    """Add `fields` to the current request's log context (the pod, its namespace...): every
    line written in this context from now on carries them (structlog.contextvars is not
    merged: bind here)."""
    _request_context.set({**_request_context.get(), **fields})


def merge_request_context(
    logger: object, method: str, event_dict: structlog.typing.EventDict
) -> structlog.typing.EventDict:
    """A structlog processor: the request's fields (`bind_request`, `bind`) on each line,
    after its own; a field the line names itself is its own."""
    for key, value in _request_context.get().items():
        event_dict.setdefault(key, value)
    return event_dict


def new_request_id() -> str:
    """16 hex digits to find one request's lines: unique enough, and cheaper than uuid4's
    system randomness on every call."""
    return f"{random.getrandbits(64):016x}"
