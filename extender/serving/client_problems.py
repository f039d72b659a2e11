"""Clients' problems (and configurations'): each counted, and logged once per cause.

A flood of bad requests, slow connections or malformed HTTP is one warning a minute per
cause, with a `held_back` count; `archfit_client_problems_total` counts every one. The
requests' (extender.serving.error_answers), the connections' (extender.serving.listener)
and aiohttp's own log lines (`ClientNoise`) go through here.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Any

import structlog
from aiohttp import http_exceptions

from extender.metrics import Metrics
from extender.once import OncePerCause

log = structlog.get_logger("archfit")


def client_problem(metrics: Metrics, warnings: OncePerCause, cause: str, **fields: Any) -> None:
    """Count a client's (or a configuration's) problem, and log it once per cause."""
    held_back = _counted(metrics, warnings, cause, fields.get("problem", ""))
    if held_back is not None:
        log.warning(cause, held_back=held_back, **fields)


def _counted(metrics: Metrics, warnings: OncePerCause, cause: str, problem: str) -> int | None:
    """Count one problem; how many were held back since its cause was last logged, or None
    when this one is held back too."""
    metrics.client_problems.labels(cause).inc()
    return warnings.log_now(f"{cause}:{problem}")


class ClientNoise(logging.Filter):
    """Turns aiohttp's tracebacks for malformed HTTP and lost clients into throttled, counted
    warnings; anything else (archfit's own defect) passes as it is."""

    def __init__(self, metrics: Metrics, warnings: OncePerCause) -> None:
        super().__init__()
        self._metrics = metrics
        self._warnings = warnings

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, http_exceptions.HttpProcessingError):
            cause = "malformed_http"
        elif isinstance(error, ConnectionError | ssl.SSLError | asyncio.IncompleteReadError):
            cause = "disconnected"
        else:
            return True
        problem = f"{type(error).__name__}: {error}".splitlines()[0][:200]
        held_back = _counted(self._metrics, self._warnings, cause, problem)
        if held_back is None:
            return False
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.msg, record.args = cause, ()
        record.exc_info, record.exc_text = None, None
        record.problem, record.held_back = problem, held_back
        return True
