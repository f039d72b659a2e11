"""A TCP load balancer on loopback: one address in front of several replicas, as a Service is.

Each new connection goes to the next backend in turn that accepts it; a backend that
refuses (its process is down) is skipped, and with none accepting, the client's
connection is closed. Bytes pass through untouched, so TLS ends at the backend as it
does behind a Service, and a kept connection stays with one backend until either side
closes it (kube-apiserver keeps its webhook connections open). It runs asyncio in its own
thread, so synchronous e2e tests can hold it, and counts where connections went.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import Counter
from collections.abc import Sequence

from tests.support.process import free_port

_CHUNK = 64 * 1024


class Balancer:
    """`with Balancer([port_a, port_b]) as front:` connections to `front.port` reach a backend."""

    def __init__(self, backends: Sequence[int], port: int | None = None) -> None:
        if not backends:
            raise ValueError("a balancer needs at least one backend")
        self.backends = tuple(backends)
        self.port = free_port() if port is None else port
        self.connections: Counter[int] = Counter()
        """Connections handed to each backend port."""
        self.turned_away = 0
        """Connections closed because no backend accepted them."""
        self._next = 0
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._open: set[asyncio.StreamWriter] = set()
        """Both sides of every relayed connection, closed when the balancer stops."""
        self._ready = threading.Event()
        self._thread = threading.Thread(
            target=self._serve, name=f"balancer-{self.port}", daemon=True
        )

    @property
    def address(self) -> str:
        """host:port clients dial."""
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> Balancer:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError(f"the balancer on {self.address} did not start")
        return self

    def __exit__(self, *_: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def _serve(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        relays: set[asyncio.Task[None]] = set()

        async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            relays.add(task)
            try:
                await self._relay(reader, writer)
            finally:
                relays.discard(task)

        server = await asyncio.start_server(accepted, "127.0.0.1", self.port)
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            server.close()
            # Closing every socket ends every relay on its own (a cancelled one would be
            # reported by asyncio's stream callback as an error).
            for side in list(self._open):
                side.close()
            if relays:
                await asyncio.wait(relays, timeout=5)
            await server.wait_closed()

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """The next backend in turn that accepts, or None when every one refuses."""
        count = len(self.backends)
        with self._lock:
            first, self._next = self._next, (self._next + 1) % count
        for step in range(count):
            port = self.backends[(first + step) % count]
            try:
                connection = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                continue
            with self._lock:
                self.connections[port] += 1
            return connection
        return None

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        backend = await self._connect()
        if backend is None:
            with self._lock:
                self.turned_away += 1
            writer.close()
            return
        upstream_reader, upstream_writer = backend
        self._open.update((writer, upstream_writer))
        # Either side closing (a replica killed, the client done) closes both: the client
        # then dials again and gets the next backend that accepts.
        directions = [
            asyncio.create_task(_copy(reader, upstream_writer)),
            asyncio.create_task(_copy(upstream_reader, writer)),
        ]
        try:
            await asyncio.wait(directions, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in directions:
                task.cancel()
            for side in (writer, upstream_writer):
                side.close()
                self._open.discard(side)
            await asyncio.gather(*directions, return_exceptions=True)


async def _copy(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError):
        while chunk := await source.read(_CHUNK):
            sink.write(chunk)
            await sink.drain()
