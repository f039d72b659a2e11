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
from asyncio import sslproto
from collections.abc import Callable
from typing import Any

import structlog
from aiohttp import http_exceptions, web

from extender.config.settings import ServerSettings
from extender.errors import ClientError
from extender.metrics import Metrics
from extender.once import OncePerCause

log = structlog.get_logger("archfit")

_END_OF_HEADERS = b"\r\n\r\n"


class BodyTimeout(ClientError):
    """The request body did not arrive within server.bodyTimeoutSeconds."""


async def read_body(request: web.Request, seconds: float) -> bytes:
    """The whole request body, or BodyTimeout if it takes longer than `seconds`."""
    if request.content.is_eof():
        # The whole body came with the headers (most extender calls): reading it cannot
        # wait, so it needs no timer.
        return await _read(request)
    try:
        async with asyncio.timeout(seconds):
            return await _read(request)
    except TimeoutError as error:
        raise BodyTimeout from error


async def _read(request: web.Request) -> bytes:
    """request.read(), with its limit and 413, but the chunks joined once: its bytearray
    grows by copies and is copied again into bytes, each time into fresh pages, which
    costs 1.3 ms of a 1.2 MB full-Node body against 0.04 ms for one join."""
    content, limit = request.content, request.client_max_size
    raise_limits = getattr(content, "set_read_chunk_size", None)  # aiohttp >= 3.12 only
    if limit and raise_limits is not None:
        raise_limits(limit)  # as request.read() does: fewer, larger chunks
    chunks: list[bytes] = []
    size = 0
    while chunk := await content.readany():
        size += len(chunk)
        if limit and size > limit:
            raise web.HTTPRequestEntityTooLarge(limit, size)
        chunks.append(chunk)
    return b"".join(chunks)


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
    held_back = warnings.log_now(f"{cause}:{fields.get('problem', '')}")
    if held_back is not None:
        log.warning(cause, held_back=held_back, **fields)


class ConnectionGuard:
    """Makes the protocol of each accepted connection, enforcing the caps and timeouts.

    Connections are counted at accept, before any TLS handshake: a socket that never sends
    a ClientHello holds a slot, never TLS buffers (asyncio's TLS protocol allocates 256 KiB
    as it is made, so it is made only once the client's first bytes arrive). Past a cap,
    the oldest *idle* connection (no request in progress) makes way for the new one, so
    connections held open without a request cannot lock kube-scheduler or kube-apiserver out.
    """

    def __init__(
        self,
        server: ServerSettings,
        metrics: Metrics,
        warnings: OncePerCause,
    ) -> None:
        self.header_timeout = server.header_timeout_seconds
        self.handshake_timeout = server.handshake_timeout_seconds
        self.max_connections = server.max_connections
        self.max_per_client = server.max_idle_per_client
        self._metrics = metrics
        self._warnings = warnings
        # Insertion order is age order: the first idle one found is the oldest.
        self._all: dict[_GuardedConnection, None] = {}
        self._by_client: dict[str, dict[_GuardedConnection, None]] = {}

    @property
    def open(self) -> int:
        """Connections held now, handshakes in progress included."""
        return len(self._all)

    def factory(
        self, make_handler: Callable[[], asyncio.Protocol], tls: ssl.SSLContext | None = None
    ) -> Callable[[], asyncio.Protocol]:
        return lambda: _GuardedConnection(self, make_handler, tls)

    def problem(self, cause: str) -> None:
        client_problem(self._metrics, self._warnings, cause)

    def admit(self, conn: _GuardedConnection) -> bool:
        """Count `conn` in, closing an idle one to make room; False if no room is left."""
        mine = self._by_client.get(conn.client, {})
        if len(mine) >= self.max_per_client:
            # When every one of them is busy, the global cap below still bounds the client.
            self._close_oldest_idle(mine)
        if len(self._all) >= self.max_connections and not self._close_oldest_idle(self._all):
            self.problem("connection_limit")
            return False
        self._all[conn] = None
        self._by_client.setdefault(conn.client, {})[conn] = None
        return True

    def release(self, conn: _GuardedConnection) -> None:
        if conn not in self._all:
            return
        del self._all[conn]
        mine = self._by_client[conn.client]
        del mine[conn]
        if not mine:
            del self._by_client[conn.client]

    def _close_oldest_idle(self, connections: dict[_GuardedConnection, None]) -> bool:
        for conn in connections:
            if conn.idle:
                self.problem("idle_connection_closed")
                conn.close()  # released at once, so the count has room
                return True
        return False


class _GuardedConnection(asyncio.Protocol):
    """Passes everything to aiohttp's handler; closes a connection that is over the cap, has
    not finished its TLS handshake or its first request's headers in time (later requests on
    a kept-alive connection fall under aiohttp's keepalive_timeout).

    On a TLS listener it is first the protocol of the plain socket, then, once the client's
    first bytes arrive, the application protocol under asyncio's TLS protocol.
    """

    def __init__(
        self,
        guard: ConnectionGuard,
        make_handler: Callable[[], asyncio.Protocol],
        tls: ssl.SSLContext | None,
    ):
        self._guard = guard
        self._make_handler = make_handler
        self._tls = tls
        self._handler: asyncio.Protocol | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._handshake_timer: asyncio.TimerHandle | None = None
        self._tail = b""
        self._transport: asyncio.BaseTransport | None = None
        """The socket's own transport (under TLS too): closing it ends the connection."""
        self._counted = False
        self._upgraded = False
        self.client = ""

    @property
    def idle(self) -> bool:
        """No request in progress: waiting for a handshake, headers, or the next request."""
        if self._handler is None:
            return True
        # aiohttp's RequestHandler has no public flag for this; when it lacks the
        # attribute the connection counts as busy, so nothing is ever closed mid-request.
        return not getattr(self._handler, "_request_in_progress", True)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.abort()  # type: ignore[attr-defined]
        self._release()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if self._upgraded:
            # The TLS handshake is done: `transport` carries the plain text.
            self._cancel_handshake_timer()
            self._start_handler(transport)
            return
        self._transport = transport
        peer = transport.get_extra_info("peername")
        self.client = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        if not self._guard.admit(self):
            transport.abort()  # type: ignore[attr-defined]
            return
        self._counted = True
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self._guard.header_timeout, self._late, "header_timeout")
        if self._tls is None:
            self._start_handler(transport)
        else:
            self._handshake_timer = loop.call_later(
                self._guard.handshake_timeout, self._late, "handshake_timeout"
            )

    def _start_handler(self, transport: asyncio.BaseTransport) -> None:
        self._handler = self._make_handler()
        self._handler.connection_made(transport)

    def _start_tls(self, first: bytes) -> None:
        """Put asyncio's TLS protocol between the socket and this one, and feed it `first`."""
        assert self._tls is not None
        assert self._transport is not None
        loop = asyncio.get_running_loop()
        handshake: asyncio.Future[None] = loop.create_future()
        handshake.add_done_callback(self._handshake_done)
        self._upgraded = True
        tls = _TlsProtocol(
            loop,
            self,
            self._tls,
            handshake,
            server_side=True,
            ssl_handshake_timeout=self._guard.handshake_timeout,  # type: ignore[arg-type]  # seconds, float or int
        )
        self._transport.set_protocol(tls)
        tls.connection_made(self._transport)
        view = memoryview(first)
        while view:
            buffer = tls.get_buffer(len(view))
            size = min(len(view), len(buffer))
            buffer[:size] = view[:size]
            tls.buffer_updated(size)
            view = view[size:]

    def _handshake_done(self, handshake: asyncio.Future[None]) -> None:
        if handshake.cancelled() or handshake.exception() is not None:
            # A failed handshake never reaches connection_made/connection_lost.
            self._cancel_handshake_timer()
            self._release()

    def _late(self, cause: str) -> None:
        self._guard.problem(cause)
        self.close()

    def _cancel_handshake_timer(self) -> None:
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
            self._handshake_timer = None

    def data_received(self, data: bytes) -> None:
        if self._tls is not None and not self._upgraded:
            if self._counted:
                self._start_tls(data)
            return
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
        self._release()
        if self._handler is not None:
            self._handler.connection_lost(exc)
            self._handler = None

    def _release(self) -> None:
        for timer in (self._timer, self._handshake_timer):
            if timer is not None:
                timer.cancel()
        self._timer = self._handshake_timer = None
        if self._counted:
            self._counted = False
            self._guard.release(self)

    def pause_writing(self) -> None:
        if self._handler is not None:
            self._handler.pause_writing()

    def resume_writing(self) -> None:
        if self._handler is not None:
            self._handler.resume_writing()


class _TlsProtocol(sslproto.SSLProtocol):
    """asyncio's TLS protocol with a 64 KiB read buffer instead of 256 KiB: a TLS record
    holds at most 16 KiB, and the buffer is allocated for every connection."""

    max_size = 16 * 1024


def handler_options(server: ServerSettings) -> dict[str, Any]:
    """What aiohttp's request handlers need from the settings (web.AppRunner keywords)."""
    return {"keepalive_timeout": server.keepalive_timeout_seconds}


class GuardedSite(web.BaseSite):
    """A TCP (or TLS) site whose connections go through a ConnectionGuard."""

    __slots__ = ("_guard", "_host", "_port")

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        guard: ConnectionGuard,
        ssl_context: ssl.SSLContext | None = None,
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
        # No ssl= here: the guard counts a connection at accept and starts TLS itself.
        self._server = await asyncio.get_running_loop().create_server(
            self._guard.factory(server, self._ssl_context),
            self._host,
            self._port,
            backlog=self._backlog,
            reuse_address=True,
            family=socket.AF_INET6 if ":" in self._host else socket.AF_INET,
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
        held_back = self._warnings.log_now(f"{cause}:{problem}")
        if held_back is None:
            return False
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.msg, record.args = cause, ()
        record.exc_info, record.exc_text = None, None
        record.problem, record.held_back = problem, held_back
        return True
