"""The behaviour of other libraries that archfit relies on without a public promise, checked
on each supported version (CI runs these with the lowest pins and the current ones): when an
upgrade changes one, the test names what changed and what of archfit's depends on it.

Each is in docs/architecture.md with the measurement that keeps it.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
from asyncio import sslproto
from pathlib import Path

import pytest

from extender.event_loop import loop_factory
from extender.serving import listener
from tests.support.tls import make_serving_cert

ASYNCIO_READ_BUFFER = 256 * 1024
"""What asyncio's TLS protocol reads into, zero-filled when it is made: the reason the
guard makes its own with a smaller one on asyncio's loop."""


def _read_buffer(protocol_class: type[sslproto.SSLProtocol]) -> int:
    async def made() -> int:
        loop = asyncio.get_running_loop()
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls = protocol_class(
            loop, asyncio.Protocol(), context, loop.create_future(), server_side=True
        )
        size = len(tls.get_buffer(1 << 20))
        tls.connection_lost(None)  # its transport, made with it, is then closed
        return size

    with asyncio.Runner(loop_factory=asyncio.new_event_loop) as runner:
        return runner.run(made())


def test_asyncios_tls_protocol_still_reads_into_a_256_kib_buffer_the_guards_into_16_kib():
    """asyncio.sslproto.SSLProtocol sizes its read buffer by its `max_size`, 256 KiB: the
    guard's subclass (serving/listener.py) sets 16 KiB. If asyncio's default shrinks, the
    subclass can go; if the attribute goes, the guard's connections cost 256 KiB each again."""
    sizes = (_read_buffer(sslproto.SSLProtocol), _read_buffer(listener._TlsProtocol))
    assert (ASYNCIO_READ_BUFFER, 16 * 1024) == sizes, (
        "asyncio's TLS protocol changed how it sizes its read buffer: re-measure "
        "docs/architecture.md's connection memory table and revisit listener._TlsProtocol"
    )


def _tls_client(sock: socket.socket, ca_file: Path, answers: list[bytes]) -> None:
    """Handshake over `sock`, send b"ping", keep what comes back."""
    context = ssl.create_default_context(cafile=str(ca_file))
    with context.wrap_socket(sock, server_hostname="127.0.0.1") as tls:
        tls.settimeout(10)
        tls.sendall(b"ping")
        answers.append(tls.recv(16))


class _Plain(asyncio.Protocol):
    """The plain protocol of the socket until the first bytes come."""

    def __init__(self) -> None:
        self.first: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if not self.first.done():
            self.first.set_result(data)


class _Application(asyncio.Protocol):
    """The application protocol over TLS: keeps the first plain text it reads."""

    def __init__(self) -> None:
        self.read: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        if not self.read.done():
            self.read.set_result(data)


@pytest.mark.parametrize("loop_name", ["asyncio", "uvloop"])
def test_start_tls_puts_its_protocol_in_place_before_its_first_wait(
    loop_name: str, tmp_path: Path
) -> None:
    """The guard's hand-off on uvloop (listener._GuardedConnection._handshake_by_loop): the
    first bytes, already read, are fed to the TLS protocol start_tls puts in the socket's
    place, from a callback queued just before start_tls is called. That needs start_tls to
    swap the protocols before it first waits, and the TLS protocol to take bytes before its
    handshake starts; asyncio's loop is checked too, as the same contract."""
    cert = make_serving_cert(tmp_path)
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert.cert, cert.key)

    async def hand_off() -> tuple[bool, list[bytes]]:
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair()
        answers: list[bytes] = []
        client = threading.Thread(target=_tls_client, args=(theirs, cert.ca_bundle, answers))
        plain = _Plain()
        transport, _ = await loop.connect_accepted_socket(lambda: plain, ours)
        client.start()
        first = await asyncio.wait_for(plain.first, 10)
        transport.pause_reading()
        swapped: list[bool] = []

        def feed() -> None:
            tls = transport.get_protocol()
            swapped.append(tls is not plain)
            if tls is not plain:
                listener._feed(tls, first)  # type: ignore[arg-type]

        application = _Application()
        upgraded: asyncio.Transport | None = None
        # As the guard does: queued, then start_tls called in the same turn (no new task).
        loop.call_soon(feed)
        try:
            async with asyncio.timeout(10):
                upgraded = await loop.start_tls(
                    transport, application, server_context, server_side=True
                )
                if upgraded is not None:
                    upgraded.write(await application.read)
        except TimeoutError:
            pass
        await asyncio.to_thread(client.join, 10)
        (upgraded or transport).close()
        await asyncio.sleep(0)  # the close is done a turn later
        return swapped == [True], answers

    _, new_loop = loop_factory(loop_name)  # type: ignore[arg-type]  # a parametrised name
    with asyncio.Runner(loop_factory=new_loop) as runner:
        swapped, answers = runner.run(hand_off())
    assert (True, [b"ping"]) == (swapped, answers), (
        f"{loop_name}'s start_tls no longer swaps protocols before it first waits, or its TLS "
        "protocol no longer takes bytes before its handshake: the guard's hand-off of a "
        "connection's first bytes (serving/listener.py) needs another way"
    )


# A fresh interpreter: what importing aiohttp does to the CA store, then what reading does.
DEFERRED_IMPORT = """
import json, ssl
from extender.registry import system_cas
system_cas.import_aiohttp()
from aiohttp import connector
contexts = (connector._SSL_CONTEXT_VERIFIED, connector._SSL_CONTEXT_UNVERIFIED)
seen = {"deferred": system_cas.pending()}
seen["restored"] = "set_default_verify_paths" not in vars(ssl.SSLContext)
seen["before"] = [context.cert_store_stats()["x509_ca"] for context in contexts]
system_cas.read_deferred()
seen["after"] = [context.cert_store_stats()["x509_ca"] for context in contexts]
seen["left"] = system_cas.pending()
print(json.dumps(seen))
"""


def test_aiohttp_builds_its_two_default_contexts_at_import_and_serve_reads_them_later(
    tmp_path: Path,
) -> None:
    """registry/system_cas.py defers the CA reads of the two SSL contexts aiohttp.connector
    builds at import (its module globals, read here only to check them): both are deferred,
    hold no CA until read, then the system's (here SSL_CERT_FILE, one CA). If aiohttp stops
    building them at import, system_cas defers nothing and can go; if it builds them another
    way, their reads are no longer deferred and start-up pays for them again."""
    cert = make_serving_cert(tmp_path)
    env = {**os.environ, "SSL_CERT_FILE": str(cert.ca_bundle)}
    done = subprocess.run(
        [sys.executable, "-c", DEFERRED_IMPORT],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert 0 == done.returncode, done.stderr[-2000:]
    expected = {"deferred": 2, "restored": True, "before": [0, 0], "after": [1, 1], "left": 0}
    assert expected == json.loads(done.stdout), (
        "aiohttp's import no longer builds its two default SSL contexts as system_cas "
        "expects: see registry/system_cas.py and docs/architecture.md (Start-up)"
    )
