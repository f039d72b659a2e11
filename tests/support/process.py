"""Ports and server processes for tests: free ports, a silent listener, start, wait, stop."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable
from typing import Protocol, TypeVar


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (another process may take it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def silent_listener(backlog: int = 64) -> socket.socket:
    """A socket on 127.0.0.1 that completes TCP handshakes and never answers; close it after.

    Nothing calls accept(), so connections wait in the backlog: a server that hangs.
    """
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(backlog)
    return listener


class _Server(Protocol):
    def stop(self) -> None: ...


Server = TypeVar("Server", bound=_Server)


def start_on_free_port(
    start: Callable[[int], Server], ready: Callable[[Server], bool], attempts: int = 3
) -> Server | None:
    """`start(port)` on a fresh free port until `ready(server)`, at most `attempts` times.

    A port free a moment ago can be taken before the server binds it, so one failed start
    is no verdict. A server that does not get ready is stopped; None when none did.
    """
    for _attempt in range(attempts):
        server = start(free_port())
        if ready(server):
            return server
        server.stop()
    return None


def stop(process: subprocess.Popen[bytes], grace: float = 5.0) -> None:
    """SIGTERM, then SIGKILL if the process is still there after `grace` seconds."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=grace)


def wait_ready(process: subprocess.Popen[bytes], probe: Callable[[], bool], seconds: float) -> bool:
    """Poll `probe` until it is true (ready), the process exits or `seconds` pass."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        if probe():
            return True
        time.sleep(0.05)
    return False
