"""A real forward proxy (Debian's tinyproxy) on 127.0.0.3, and the requests it relayed.

It listens on its own loopback address so a test can allow the proxy's address without
allowing the registry's. Targets must be names, not loopback IPs: Go's proxy rules, which
archfit follows, never proxy `localhost` or loopback IPs; `loopback_name()` finds a name.
"""

from __future__ import annotations

import re
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.support.prerequisites import require_binary, unavailable
from tests.support.process import start_on_free_port, wait_ready
from tests.support.process import stop as stop_process

PROXY_ADDRESS = "127.0.0.3"
#: tests/run.sh maps this to 127.0.0.1 in /etc/hosts when the machine's own name is not.
LOOPBACK_NAME = "archfit-loopback.test"
_REQUEST = re.compile(rb"Request \(file descriptor \d+\): (\S+) (\S+) HTTP/")
_START_TIMEOUT = 10.0


def loopback_name() -> str:
    """A host name other than localhost that resolves only to 127.0.0.1 (the machine's own).

    Fails under CI=true and skips loudly elsewhere when there is none.
    """
    candidates = (socket.gethostname(), socket.getfqdn(), LOOPBACK_NAME)
    names = [n for n in candidates if _only_loopback(n)]
    if not names:
        unavailable(
            "PROXY TESTS", "no host name but localhost resolves to 127.0.0.1: add one to /etc/hosts"
        )
    return names[0]


def _only_loopback(name: str) -> bool:
    try:
        found = {info[4][0] for info in socket.getaddrinfo(name, None, socket.AF_INET)}
    except OSError:
        return False
    return bool(name) and name != "localhost" and found == {"127.0.0.1"}


@dataclass
class TinyProxy:
    """One tinyproxy process in the foreground, logging every request to a file."""

    port: int
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def url(self) -> str:
        """`http://127.0.0.3:<port>`"""
        return f"http://{PROXY_ADDRESS}:{self.port}"

    @classmethod
    def start(cls, workdir: Path) -> TinyProxy:
        """Start tinyproxy on a free port and wait until it accepts connections."""
        binary = require_binary("/usr/bin/tinyproxy", "tinyproxy")
        workdir.mkdir(parents=True, exist_ok=True)
        config, log_path = workdir / "tinyproxy.conf", workdir / "tinyproxy.log"

        def launch(port: int) -> TinyProxy:
            config.write_text(
                "User nobody\nGroup nogroup\n"
                f"Port {port}\nListen {PROXY_ADDRESS}\n"
                "Timeout 30\nMaxClients 50\nLogLevel Connect\n"
                "Allow 127.0.0.0/8\nDisableViaHeader Yes\n"
            )
            with log_path.open("wb") as log:
                process = subprocess.Popen(
                    [binary, "-d", "-c", str(config)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                )
            return cls(port, process, log_path)

        proxy = start_on_free_port(launch, TinyProxy._wait_ready)
        if proxy is None:
            raise RuntimeError(f"tinyproxy did not start: {log_path.read_text(errors='replace')}")
        return proxy

    def _wait_ready(self) -> bool:
        return wait_ready(self.process, self._accepts, _START_TIMEOUT)

    def _accepts(self) -> bool:
        try:
            socket.create_connection((PROXY_ADDRESS, self.port), timeout=1).close()
        except OSError:
            return False
        return True

    def stop(self) -> None:
        """Terminate the process and wait for it."""
        stop_process(self.process)

    def mark(self) -> int:
        """A position in the log; `requests_since(mark)` returns what came after it."""
        return self.log_path.stat().st_size

    def requests_since(self, mark: int) -> list[tuple[str, str]]:
        """(method, URL or host:port) of every request the proxy received after `mark`."""
        with self.log_path.open("rb") as log:
            log.seek(mark)
            text = log.read()
        return [(m.decode(), u.decode()) for m, u in _REQUEST.findall(text)]
