"""A throwaway `redis-server` on 127.0.0.1 with no persistence."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.support.prerequisites import require_binary
from tests.support.process import start_on_free_port, wait_ready
from tests.support.process import stop as stop_process

REDIS_BINARY = "/usr/bin/redis-server"
_START_TIMEOUT = 10.0


@dataclass
class RedisProcess:
    """One redis-server process; `url` is what CacheSettings.url takes."""

    port: int
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        """`redis://127.0.0.1:<port>/0`."""
        return f"redis://127.0.0.1:{self.port}/0"

    @classmethod
    def start(cls, workdir: Path) -> RedisProcess:
        """Start redis-server on a free port and wait until it answers PING."""
        binary = require_binary(REDIS_BINARY, "redis-server")
        workdir.mkdir(parents=True, exist_ok=True)
        log = workdir / "redis.log"

        def launch(port: int) -> RedisProcess:
            process = subprocess.Popen(
                [
                    binary,
                    "--port", str(port),
                    "--bind", "127.0.0.1",
                    "--save", "",
                    "--appendonly", "no",
                    "--dir", str(workdir),
                    "--logfile", str(log),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )  # fmt: skip
            return cls(port, process)

        redis = start_on_free_port(launch, RedisProcess._wait_ready)
        if redis is None:
            raise RuntimeError(f"redis-server did not start; see {log}")
        return redis

    def _wait_ready(self) -> bool:
        return wait_ready(self.process, self._answers_ping, _START_TIMEOUT)

    def _answers_ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def flush(self) -> None:
        """Drop every key, so each test starts from an empty shared cache."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock:
            sock.sendall(b"FLUSHALL\r\n")
            sock.recv(16)

    def pause(self) -> None:
        """SIGSTOP the server: it still accepts connections (the kernel does) but never answers."""
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT the server, if it still runs."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGCONT)

    def unaccepted_connections(self) -> int:
        """Connections waiting in the listen queue: while paused, every connection made to it.

        The kernel completes handshakes for a stopped server and queues them (closed or not)
        until it accepts them, so this counts connections made since `pause`.
        """
        return listen_queue(self.port)

    def stop(self) -> None:
        """Terminate the process and wait for it."""
        stop_process(self.process)


def listen_queue(port: int) -> int:
    """The accept queue length of the loopback listener on `port` (/proc/net/tcp rx_queue)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as lines:
                next(lines)
                for line in lines:
                    fields = line.split()
                    local_port = int(fields[1].rsplit(":", 1)[1], 16)
                    if local_port == port and fields[3] == "0A":
                        return int(fields[4].split(":")[1], 16)
        except FileNotFoundError:
            continue
    return 0
