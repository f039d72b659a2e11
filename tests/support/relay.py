"""A TCP relay on loopback that a test can stall: a network path that stops carrying bytes.

While stalled it reads and drops what either side sends, so a request through it (TLS
included: the relay never looks inside) hangs until the client's own timeout, as it
would behind a partitioned network. Runs in the test's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib

_CHUNK = 65536


class StallingRelay:
    """Relays 127.0.0.1:<port> to upstream host:port until `stalled` is set."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self._upstream = (upstream_host, upstream_port)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._pumps: set[asyncio.Task[None]] = set()
        self.stalled = False
        """While True, bytes are read and dropped in both directions."""
        self.port = 0
        self.connections = 0
        """Connections accepted so far: how many a client opened through the relay."""

    async def start(self) -> StallingRelay:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        """Stop listening and cut every relayed connection."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        for pump in list(self._pumps):
            pump.cancel()
        await asyncio.gather(*self._pumps, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        except OSError:
            writer.close()
            return
        self._writers |= {writer, up_writer}
        for source, sink in ((reader, up_writer), (up_reader, writer)):
            pump = asyncio.create_task(self._pump(source, sink))
            self._pumps.add(pump)
            pump.add_done_callback(self._pumps.discard)

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while chunk := await source.read(_CHUNK):
                if not self.stalled:
                    sink.write(chunk)
                    await sink.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(sink)
            sink.close()
            with contextlib.suppress(OSError):
                await sink.wait_closed()
