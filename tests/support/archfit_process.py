"""`archfit serve` as a real process on loopback, and raw HTTP/1.1 over sockets to it.

Used by the tests that attack the listener itself (timeouts, pipelining, logs) and by
bench/fuzz.py. Only the standard library: the attacks need bytes on the wire that an
HTTP client would refuse to send.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.support.process import free_port, stop, wait_ready
from tests.support.tls import make_serving_cert


@dataclass
class Archfit:
    """A running `archfit serve`: its ports, its process and what it logged."""

    process: subprocess.Popen[bytes]
    port: int
    webhook_port: int
    ca_file: Path | None
    log_path: Path

    def connect(self, timeout: float = 10.0, source: str = "") -> socket.socket:
        """A TCP connection to the extender's port, from loopback address `source` if given."""
        return socket.create_connection(
            ("127.0.0.1", self.port),
            timeout=timeout,
            source_address=(source, 0) if source else None,
        )

    def connect_webhook(self, timeout: float = 10.0) -> socket.socket:
        assert self.ca_file is not None, "started without the webhook"
        context = ssl.create_default_context(cafile=str(self.ca_file))
        raw = socket.create_connection(("127.0.0.1", self.webhook_port), timeout=timeout)
        return context.wrap_socket(raw, server_hostname="127.0.0.1")

    def rss_bytes(self, field: str = "VmRSS") -> int:
        """Resident memory now, or at its peak with field="VmHWM"."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
        raise AssertionError(f"no {field}")

    def log_lines(self) -> list[str]:
        return self.log_path.read_text(errors="replace").splitlines()


@contextlib.contextmanager
def running(
    workdir: Path,
    server: dict[str, object] | None = None,
    *,
    webhook: bool = False,
    webhook_settings: dict[str, object] | None = None,
    serve_args: tuple[str, ...] = (),
    **sections: object,
) -> Iterator[Archfit]:
    """Start `archfit serve` (with `serve_args`) with kubernetes off, JSON logs (stdout and
    stderr into one file) and `server` overrides (`webhook_settings` for the webhook's); stop
    it at the end of the block."""
    port = free_port()
    config: dict[str, object] = {
        "server": {"host": "127.0.0.1", "port": port, "shutdownGraceSeconds": 2, **(server or {})},
        "kubernetes": {"mode": "off"},
        "logging": {"format": "json"},
        **sections,
    }
    webhook_port, ca_file = 0, None
    if webhook:
        cert = make_serving_cert(workdir / "webhook-tls")
        webhook_port, ca_file = free_port(), cert.ca_bundle
        config["webhook"] = {
            "enabled": True,
            "host": "127.0.0.1",
            "port": webhook_port,
            "certFile": str(cert.cert),
            "keyFile": str(cert.key),
            **(webhook_settings or {}),
        }
    path = workdir / "archfit.yaml"
    path.write_text(yaml.safe_dump(config))
    log_path = workdir / "archfit.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "extender", "serve", "--config", str(path), *serve_args],
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    archfit = Archfit(process, port, webhook_port, ca_file, log_path)
    try:
        try:
            wait_listening(port, process)
            if webhook:
                wait_listening(webhook_port, process)
        except AssertionError as error:
            raise AssertionError("\n".join(archfit.log_lines())) from error
        yield archfit
    finally:
        stop(process)


def wait_listening(port: int, process: subprocess.Popen[bytes]) -> None:
    """Wait until `port` accepts connections; fail if `process` exits or 30 s pass."""

    def accepts() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        except OSError:
            return False
        return True

    if not wait_ready(process, accepts, 30):
        raise AssertionError(f"archfit serve did not listen on {port} within 30 s")


def post(path: str, body: bytes, *, extra_headers: str = "") -> bytes:
    """The bytes of one HTTP/1.1 POST with a JSON body."""
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n{extra_headers}\r\n"
    )
    return head.encode() + body


def read_responses(conn: socket.socket, count: int, seconds: float) -> list[tuple[int, bytes]]:
    """Read up to `count` HTTP responses (status, body) within `seconds`; fewer if the
    server closes first."""
    deadline = time.monotonic() + seconds
    buffer, answers = b"", []
    while len(answers) < count and time.monotonic() < deadline:
        while b"\r\n\r\n" in buffer and len(answers) < count:
            head, _, rest = buffer.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
            if len(rest) < length:
                break
            answers.append((int(head.split(b" ", 2)[1]), rest[:length]))
            buffer = rest[length:]
        if len(answers) >= count:
            break
        conn.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = conn.recv(1 << 20)
        except (TimeoutError, ConnectionError):
            break
        if not chunk:
            break
        buffer += chunk
    return answers


def is_closed(conn: socket.socket, seconds: float) -> bool:
    """Whether the server closed `conn` (EOF or reset) within `seconds`; what it answered
    before closing is read past (whether an answer comes first depends on the loop's order
    of accepts and reads: on uvloop it often does)."""
    deadline = time.monotonic() + seconds
    try:
        while (left := deadline - time.monotonic()) > 0:
            conn.settimeout(left)
            if conn.recv(1 << 16) == b"":
                return True
    except TimeoutError:
        return False
    except ConnectionError:
        return True
    return False
