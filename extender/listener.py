"""archfit's own listeners: a connection cap, a header read timeout, a body read timeout.

aiohttp times out idle keep-alive connections, but not a new connection that never
finishes its first request's headers, nor a body that trickles in: a thousand slow
clients would hold a thousand connections open for ever (slowloris). The guard wraps
each connection aiohttp makes, so nothing of aiohttp's own protocol is changed.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import Callable
from typing import Any

import structlog
from aiohttp import http_exceptions, web

from extender.metrics import Metrics
from extender.once import OncePerCause

log = structlog.get_logger("archfit")

_END_OF_HEADERS = b"\r\n\r\n"


class BodyTimeout(Exception):
    """The request body did not arrive within server.bodyTimeoutSeconds."""


async def read_body(request: web.Request, seconds: float) -> bytes:
    """The whole request body, or BodyTimeout if it takes longer than `seconds`."""
    if request.content.is_eof():
        # The whole body came with the headers (most extender calls): reading it cannot
        # wait, so it needs no timer.
        return await request.read()
    try:
        async with asyncio.timeout(seconds):
            return await request.read()
    except TimeoutError as error:
        raise BodyTimeout from error


async def answer_and_close(request: web.Request, response: web.Response) -> web.Response:
    """Send `response`, then close the connection: the rest of a body that never came is
    not waited for (aiohttp would linger to read it)."""
    response.force_close()
    await response.prepare(request)
    await response.write_eof()
    if request.transport is not None:
        request.transport.close()
    return response


def client_problem(metrics: Metrics, warnings: OncePerCause, cause: str, **fields: Any) -> None:
    """Count a client's (or a configuration's) problem, and log it once per cause."""
    metrics.client_problems.labels(cause).inc()
    held_back = warnings.admit(f"{cause}:{fields.get('problem', '')}")
    if held_back is not None:
        log.warning(cause, held_back=held_back, **fields)


class ConnectionGuard:
    """Makes the protocol of each accepted connection, enforcing the cap and header timeout."""

    def __init__(
        self,
        header_timeout: float,
        max_connections: int,
        metrics: Metrics,
        warnings: OncePerCause,
    ) -> None:
        self.header_timeout = header_timeout
        self.max_connections = max_connections
        self.open = 0
        self._metrics = metrics
        self._warnings = warnings

    def factory(
        self, make_handler: Callable[[], asyncio.Protocol]
    ) -> Callable[[], asyncio.Protocol]:
        return lambda: _GuardedConnection(self, make_handler)

    def problem(self, cause: str) -> None:
        client_problem(self._metrics, self._warnings, cause)


class _GuardedConnection(asyncio.Protocol):
    """Passes everything to aiohttp's handler; closes a connection that is over the cap or
    has not finished its first request's headers in time (later requests on a kept-alive
    connection fall under aiohttp's keepalive_timeout)."""

    def __init__(self, guard: ConnectionGuard, make_handler: Callable[[], asyncio.Protocol]):
        self._guard = guard
        self._make_handler = make_handler
        self._handler: asyncio.Protocol | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._tail = b""
        self._transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        if self._guard.open >= self._guard.max_connections:
            self._guard.problem("connection_limit")
            transport.abort()  # type: ignore[attr-defined]
            return
        self._guard.open += 1
        self._handler = self._make_handler()
        self._timer = asyncio.get_running_loop().call_later(
            self._guard.header_timeout, self._headers_late
        )
        self._handler.connection_made(transport)

    def _headers_late(self) -> None:
        self._timer = None
        self._guard.problem("header_timeout")
        if self._transport is not None:
            self._transport.abort()  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        if self._timer is not None:
            seen = self._tail + data
            if _END_OF_HEADERS in seen:
                self._timer.cancel()
                self._timer = None
            else:
                self._tail = seen[-3:]
        if self._handler is not None:
            self._handler.data_received(data)

    def eof_received(self) -> bool | None:
        return self._handler.eof_received() if self._handler is not None else None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._handler is not None:
            self._guard.open -= 1
            self._handler.connection_lost(exc)
            self._handler = None

    def pause_writing(self) -> None:
        if self._handler is not None:
            self._handler.pause_writing()

    def resume_writing(self) -> None:
        if self._handler is not None:
            self._handler.resume_writing()


class GuardedSite(web.BaseSite):
    """A TCP (or TLS) site whose connections go through a ConnectionGuard."""

    __slots__ = ("_guard", "_host", "_port")

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        guard: ConnectionGuard,
        ssl_context: Any = None,
    ) -> None:
        super().__init__(runner, ssl_context=ssl_context, backlog=1024)
        self._host, self._port, self._guard = host, port, guard

    @property
    def name(self) -> str:
        scheme = "https" if self._ssl_context else "http"
        return f"{scheme}://{self._host}:{self._port}"

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None  # runner.setup() made it
        self._server = await asyncio.get_running_loop().create_server(
            self._guard.factory(server),
            self._host,
            self._port,
            ssl=self._ssl_context,
            backlog=self._backlog,
            reuse_address=True,
            family=socket.AF_INET6 if ":" in self._host else socket.AF_INET,
            # A TLS handshake is part of what a client must finish in time.
            ssl_handshake_timeout=self._guard.header_timeout if self._ssl_context else None,
        )


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
        self._metrics.client_problems.labels(cause).inc()
        held_back = self._warnings.admit(f"{cause}:{problem}")
        if held_back is None:
            return False
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.msg, record.args = cause, ()
        record.exc_info, record.exc_text = None, None
        record.problem, record.held_back = problem, held_back
        return True
