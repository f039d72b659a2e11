"""archfit's own listeners: connections capped, slow TLS handshakes and headers cut off.

aiohttp times out idle keep-alive connections, but not a new connection that never
finishes its first request's headers, nor a body that trickles in (a request's body is
timed by extender.serving.request_body): a thousand slow clients would hold a thousand
connections open for ever (slowloris). The guard wraps each connection aiohttp makes, so
nothing of aiohttp's own protocol is changed. Requests are not this module's business.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from asyncio import sslproto
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from extender.config.settings import ServerSettings
from extender.metrics import Metrics
from extender.once import OncePerCause
from extender.serving.client_problems import client_problem

_END_OF_HEADERS = b"\r\n\r\n"
LISTEN_BACKLOG = 1024
"""Connections the kernel queues before accept: a burst of kube-apiserver's is not refused."""


class ConnectionGuard:
    """Makes the protocol of each accepted connection, enforcing the caps and timeouts.

    Connections are counted at accept, before any TLS handshake: a socket that never sends
    a ClientHello holds a slot, never TLS state (a TLS protocol is made only once the
    client's first bytes arrive: ~3 KiB a silent connection, docs/architecture.md). Past a cap,
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
        self._by_transport: dict[asyncio.BaseTransport, _GuardedConnection] = {}
        """The connection behind each transport aiohttp's handlers serve requests on."""

    @property
    def open(self) -> int:
        """Connections held now, handshakes in progress included."""
        return len(self._all)

    def factory(
        self, make_handler: Callable[[], asyncio.Protocol], tls: ssl.SSLContext | None = None
    ) -> Callable[[], asyncio.Protocol]:
        by_loop = tls_by_loop(asyncio.get_running_loop())
        return lambda: _GuardedConnection(self, make_handler, tls, by_loop)

    def problem(self, cause: str) -> None:
        client_problem(self._metrics, self._warnings, cause)

    def install(self, app: web.Application) -> None:
        """Count `app`'s requests in progress per connection (its outermost middleware), so
        a connection is closed to make room only between requests; before the app starts."""
        app.middlewares.insert(0, self.middleware)

    @web.middleware
    async def middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """A request is in progress on its connection until its response is written."""
        transport = request.transport
        connection = None if transport is None else self._by_transport.get(transport)
        if connection is None:  # not a connection of this guard's (a test client's, say)
            return await handler(request)
        connection.requests += 1
        try:
            try:
                response = await handler(request)
            except web.HTTPException as answer:  # aiohttp answers it once it is raised past
                await _write(answer, request)
                raise
            await _write(response, request)
            return response
        finally:
            connection.requests -= 1

    def serving(self, transport: asyncio.BaseTransport, conn: _GuardedConnection) -> None:
        """Note that aiohttp's handler serves `conn`'s requests on `transport`."""
        self._by_transport[transport] = conn

    def installed_in(self, runner: web.BaseRunner) -> bool:
        """Whether the app `runner` serves counts its requests here (`install`)."""
        app = runner.app if isinstance(runner, web.AppRunner) else None
        return app is not None and self.middleware in app.middlewares

    def take_slot(self, conn: _GuardedConnection) -> bool:
        """Count `conn` in, closing an idle one to make room; False if no room is left (the
        slot goes back with `release`)."""
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
        if conn.serving_on is not None:
            self._by_transport.pop(conn.serving_on, None)
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
    first bytes arrive, the application protocol under a TLS protocol: the loop's own
    through `loop.start_tls` on uvloop, asyncio's with a smaller buffer on asyncio's loop
    (`tls_by_loop` says why).
    """

    def __init__(
        self,
        guard: ConnectionGuard,
        make_handler: Callable[[], asyncio.Protocol],
        tls: ssl.SSLContext | None,
        tls_by_loop: bool,
    ):
        self._guard = guard
        self._make_handler = make_handler
        self._tls = tls
        self._tls_by_loop = tls_by_loop
        self._handler: asyncio.Protocol | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._handshake_timer: asyncio.TimerHandle | None = None
        self._handshake: asyncio.Task[None] | None = None
        self._early: list[bytes] = []
        """Plain text the loop's TLS passed on before start_tls returned to us."""
        self._tail = b""
        self._transport: asyncio.BaseTransport | None = None
        """The socket's own transport (under TLS too): closing it ends the connection."""
        self._counted = False
        self._upgraded = False
        self.client = ""
        self.serving_on: asyncio.BaseTransport | None = None
        """The transport aiohttp's handler serves requests on (plain text under TLS)."""
        self.requests = 0
        """Requests in progress, counted by the guard's middleware."""

    @property
    def idle(self) -> bool:
        """No request in progress: waiting for a handshake, headers, or the next request."""
        return self.requests == 0

    def close(self) -> None:
        if self._transport is not None:
            self._transport.abort()  # type: ignore[attr-defined]
        self._release()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if self._upgraded:
            # asyncio's TLS handshake is done: `transport` carries the plain text.
            self._cancel_handshake_timer()
            self._start_handler(transport)
            return
        self._transport = transport
        peer = transport.get_extra_info("peername")
        self.client = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        if not self._guard.take_slot(self):
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
        self.serving_on = transport
        if self._counted:
            self._guard.serving(transport, self)
        self._handler = self._make_handler()
        self._handler.connection_made(transport)

    def _start_loop_tls(self, first: bytes) -> None:
        """Hand the socket to the loop's own TLS (loop.start_tls) with the `first` bytes."""
        assert self._transport is not None
        self._upgraded = True
        # Nothing more is read until start_tls has put its TLS protocol in our place, a turn
        # on: bytes read before that would come to this protocol, out of the handshake.
        self._transport.pause_reading()  # type: ignore[attr-defined]
        self._handshake = asyncio.get_running_loop().create_task(self._handshake_by_loop(first))

    async def _handshake_by_loop(self, first: bytes) -> None:
        """The TLS handshake in the loop's own implementation, then aiohttp's handler."""
        assert self._tls is not None
        assert self._transport is not None
        loop = asyncio.get_running_loop()
        # start_tls swaps the protocol now and starts the handshake a turn later (it reads
        # nothing before): this runs in between and gives the TLS protocol `first`. No public
        # API promises that order: tests/unit/test_library_internals.py checks it per version.
        loop.call_soon(self._feed_loop_tls, first)
        try:
            plain = await loop.start_tls(
                self._transport,  # type: ignore[arg-type]  # a socket's transport
                self,
                self._tls,
                server_side=True,
                # Ours (connection_made) fires first and counts the cause; the loop's backs it.
                ssl_handshake_timeout=self._guard.handshake_timeout,
            )
        except asyncio.CancelledError:
            self._release()
            raise
        except Exception:  # failed, timed out or closed: the socket is gone
            self._release()
            return
        self._cancel_handshake_timer()
        if plain is None or not self._counted:
            # Closed (to make room, or lost) between the handshake and this turn.
            self.close()
            return
        self._start_handler(plain)
        early, self._early = self._early, []
        for data in early:
            self.data_received(data)

    def _feed_loop_tls(self, first: bytes) -> None:
        """Give `first` to the TLS protocol start_tls put in this one's place."""
        assert self._transport is not None
        tls = self._transport.get_protocol()
        if tls is not self and not self._transport.is_closing():  # else start_tls failed
            _feed(tls, first)  # type: ignore[arg-type]  # both loops' TLS protocols are buffered

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
        _feed(tls, first)

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
        if self._handler is None:
            if self._upgraded:
                # Plain text before start_tls has returned to us: uvloop passes on what came
                # with the handshake's last flight only after that, asyncio's start_tls
                # before. Kept for the handler.
                self._early.append(data)
            elif self._tls is not None and self._counted:
                # The client's first bytes: TLS starts now, not at accept (see
                # `tls_by_loop`), so a socket that never sends holds no TLS state.
                if self._tls_by_loop:
                    self._start_loop_tls(data)
                else:
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


def tls_by_loop(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether TLS goes through the loop's own implementation (`loop.start_tls`), or through
    asyncio's TLS protocol with a smaller buffer (`_TlsProtocol`).

    uvloop's TLS is compiled and costs less CPU per request than asyncio's pure-Python one,
    and it only reserves its 256 KiB read buffer (pages are touched as records arrive).
    asyncio's, which start_tls would make on asyncio's own loop, zero-fills its 256 KiB as it
    is made and keeps it for the connection's life: 2,000 clients that send one byte each
    held ~600 MiB (docs/architecture.md, The server), so there the guard makes its own
    with 16 KiB.
    """
    return not isinstance(loop, asyncio.BaseEventLoop)


def _feed(protocol: asyncio.BufferedProtocol, data: bytes) -> None:
    """Give `data` to `protocol` as if it had been read from its socket."""
    view = memoryview(data)
    while view:
        buffer = memoryview(protocol.get_buffer(len(view)))
        size = min(len(view), len(buffer))
        buffer[:size] = view[:size]
        protocol.buffer_updated(size)
        view = view[size:]


class _TlsProtocol(sslproto.SSLProtocol):
    """asyncio's TLS protocol with a 16 KiB read buffer instead of 256 KiB: a TLS record
    holds at most 16 KiB, and the buffer is allocated for every connection. asyncio has no
    public knob for it; tests/unit/test_library_internals.py checks `max_size` per version."""

    max_size = 16 * 1024


async def _write(response: web.StreamResponse, request: web.Request) -> None:
    """Send `response` whole, as aiohttp would once the handler returns; a client gone
    meanwhile is aiohttp's to handle then (its write raises again, and it ends quietly)."""
    try:
        await response.prepare(request)
        await response.write_eof()
    except ConnectionError:
        pass


def handler_options(server: ServerSettings) -> dict[str, Any]:
    """What aiohttp's request handlers need from the settings (web.AppRunner keywords)."""
    return {"keepalive_timeout": server.keepalive_timeout_seconds}


class GuardedSite(web.BaseSite):
    """A TCP (or TLS) site whose connections go through a ConnectionGuard: aiohttp's
    runner starts and stops it with its other sites, and the listener is the site's own."""

    __slots__ = ("_app_runner", "_guard", "_host", "_listening", "_port", "_tls")

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        guard: ConnectionGuard,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        super().__init__(runner, ssl_context=ssl_context)
        self._app_runner, self._host, self._port, self._guard = runner, host, port, guard
        self._tls = ssl_context
        self._listening: asyncio.Server | None = None

    @property
    def name(self) -> str:
        scheme = "https" if self._tls else "http"
        return f"{scheme}://{self._host}:{self._port}"

    async def start(self) -> None:
        server = self._app_runner.server
        assert server is not None  # runner.setup() made it
        if not self._guard.installed_in(self._app_runner):
            # Else every connection would look idle, and one could be closed mid-request.
            raise RuntimeError("the connection guard's middleware is not in the app it guards")
        await super().start()
        # No ssl= here: the guard counts a connection at accept and starts TLS itself.
        self._listening = await asyncio.get_running_loop().create_server(
            self._guard.factory(server, self._tls),
            self._host,
            self._port,
            backlog=LISTEN_BACKLOG,
            reuse_address=True,
            family=socket.AF_INET6 if ":" in self._host else socket.AF_INET,
        )

    async def stop(self) -> None:
        if self._listening is not None:
            self._listening.close()
        await super().stop()
