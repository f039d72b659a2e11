"""Child processes for the e2e control plane: start, wait until ready, always stop.

Every process logs to a file; when it fails to become ready, the error carries the
tail of that log so a failing CI run says why.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

#: No single wait in the e2e suite may take longer than this.
MAX_WAIT_SECONDS = 60.0


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: get SIGKILL when the test process dies, even by SIGKILL."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class ProcessFailed(RuntimeError):
    """A child process exited early or never became ready."""


class Process:
    """One child process with its log file; stop() is safe to call any number of times."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str | os.PathLike[str]],
        log_dir: Path,
        env: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        self.argv = [os.fspath(a) for a in argv]
        self.log_path = log_dir / f"{name}.log"
        self._env = env
        self._popen: subprocess.Popen[bytes] | None = None

    def start(self) -> Process:
        """Start the process, appending to its log file."""
        log = self.log_path.open("ab")
        try:
            self._popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                # A Python child that crashes (a segfault in a C extension) prints every
                # thread's stack into its log, where the failure message points.
                env={
                    **(self._env if self._env is not None else os.environ),
                    "PYTHONFAULTHANDLER": "1",
                },
                # Its own process group, so stop() reaches any children too.
                start_new_session=True,
                # Teardown kills it; this covers a test run that is itself killed.
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        finally:
            log.close()
        return self

    @property
    def pid(self) -> int | None:
        """The process id, or None before start()."""
        return self._popen.pid if self._popen else None

    def running(self) -> bool:
        """Whether the process was started and has not exited."""
        return self._popen is not None and self._popen.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the process's log."""
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def wait_ready(self, probe: Callable[[], bool], timeout: float = MAX_WAIT_SECONDS) -> None:
        """Poll probe until it is true; fail with the log tail if the process dies or hangs."""

        def ready() -> bool:
            if not self.running():
                raise ProcessFailed(f"{self.name} exited early")
            return probe()

        deadline = time.monotonic() + timeout
        while True:
            try:
                if ready():
                    return
            except ProcessFailed:
                self.stop()
                raise ProcessFailed(
                    f"{self.name} exited with {self._popen and self._popen.returncode}; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                ) from None
            except Exception:  # noqa: S110 - not ready yet; the timeout reports it
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise ProcessFailed(
                    f"{self.name} not ready after {timeout:.0f}s; log {self.log_path}:\n"
                    f"{self.log_tail()}"
                )
            time.sleep(0.2)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the process group, then SIGKILL it if it lingers."""
        popen = self._popen
        if popen is None or popen.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(popen.pid, signal.SIGTERM)
        try:
            popen.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(popen.pid, signal.SIGKILL)
            popen.wait(timeout)


def http_ok(url: str, context: ssl.SSLContext | None = None, timeout: float = 2.0) -> bool:
    """Whether GET url answers 200."""
    try:
        with urllib.request.urlopen(url, context=context, timeout=timeout) as response:  # noqa: S310
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def self_signed_ok(port: int, path: str) -> Callable[[], bool]:
    """Whether a control-plane component on loopback answers 200 at `path`: its serving
    certificate is self-signed, and only its readiness is checked, so it is not verified."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return lambda: http_ok(f"https://127.0.0.1:{port}{path}", context)
