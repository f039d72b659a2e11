"""A real CNCF distribution registry process on 127.0.0.1, and what it saw.

Start one with `RegistryProcess.start(workdir)`; optionally behind htpasswd Basic auth
or Bearer tokens from `tests.support.tokens`, and over TLS. Requests are counted from its
JSON log.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.prerequisites import require_binary
from tests.support.process import start_on_free_port, wait_ready
from tests.support.process import stop as stop_process
from tests.support.tls import ServingCert

REGISTRY_BINARY = os.environ.get("DOCKER_REGISTRY_BINARY", "/usr/bin/docker-registry")
"""Debian's docker-registry; DOCKER_REGISTRY_BINARY names another CNCF distribution build."""
_START_TIMEOUT = 15.0
_SYNC_TIMEOUT = 5.0
_SYNC_PATH = "/v2/?archfit-sync="


@dataclass(frozen=True)
class TokenAuthConfig:
    """What the registry needs to verify Bearer tokens (see tests.support.tokens)."""

    realm: str
    service: str
    issuer: str
    root_cert_bundle: Path


@dataclass(frozen=True)
class LoggedRequest:
    """One request as the registry logged it."""

    method: str
    path: str
    status: int


@dataclass
class RegistryProcess:
    """One `docker-registry` process with filesystem storage under `workdir`."""

    host: str
    """`127.0.0.1:<port>`, the registry part of image references."""
    workdir: Path
    process: subprocess.Popen[bytes]
    log_path: Path
    basic_auth: tuple[str, str] | None = None
    """The htpasswd user, when the registry requires Basic auth."""
    tls: ServingCert | None = None
    """Its serving certificate, when it speaks HTTPS."""
    _log_offset: int = field(default=0, repr=False)

    @property
    def url(self) -> str:
        """The base URL, `http://127.0.0.1:<port>` (https with `tls`)."""
        return f"{'https' if self.tls else 'http'}://{self.host}"

    def client_context(self) -> ssl.SSLContext | None:
        """A client SSLContext that trusts its certificate; None over plain HTTP."""
        if self.tls is None:
            return None
        return ssl.create_default_context(cafile=str(self.tls.ca_bundle))

    @classmethod
    def start(
        cls,
        workdir: Path,
        *,
        htpasswd: tuple[str, str] | None = None,
        token: TokenAuthConfig | None = None,
        tls: ServingCert | None = None,
    ) -> RegistryProcess:
        """Start a registry on a free port and wait until it answers /v2/."""
        binary = require_binary(REGISTRY_BINARY, "docker-registry")
        workdir.mkdir(parents=True, exist_ok=True)
        config, log_path = workdir / "config.yml", workdir / "registry.log"

        def launch(port: int) -> RegistryProcess:
            config.write_text(_config(workdir, port, htpasswd, token, tls))
            with log_path.open("wb") as log:
                process = subprocess.Popen(
                    [binary, "serve", str(config)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                )
            return cls(f"127.0.0.1:{port}", workdir, process, log_path, htpasswd, tls)

        registry = start_on_free_port(launch, RegistryProcess._wait_ready)
        if registry is None:
            log_tail = log_path.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"docker-registry did not start; its log ends:\n{log_tail}")
        return registry

    def _wait_ready(self) -> bool:
        return wait_ready(self.process, self._answers, _START_TIMEOUT)

    def _answers(self) -> bool:
        try:
            urllib.request.urlopen(  # noqa: S310
                f"{self.url}/v2/", timeout=1, context=self.client_context()
            ).close()
        except urllib.error.HTTPError:
            return True  # 401 from an auth-protected registry means it is up
        except OSError:
            return False
        return True

    def stop(self) -> None:
        """Terminate the process and wait for it."""
        stop_process(self.process)

    # -- counting what the registry saw -------------------------------------------------

    def mark(self) -> int:
        """A position in the log; `requests_since(mark)` returns what came after it."""
        self._sync()
        return self.log_path.stat().st_size

    def requests_since(self, mark: int) -> list[LoggedRequest]:
        """Every request the registry answered after `mark`, sync probes excluded."""
        seen = []
        for line in self._lines_since(mark):
            entry = _parse(line)
            if entry is not None and not entry.path.startswith(_SYNC_PATH):
                seen.append(entry)
        return seen

    def authorized_since(self, mark: int) -> list[tuple[str, str]]:
        """(method, path) of every request after `mark` that passed htpasswd or token auth."""
        found = []
        for line in self._lines_since(mark):
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and entry.get("msg") == "authorized request":
                found.append(
                    (str(entry.get("http.request.method")), str(entry.get("http.request.uri")))
                )
        return found

    def _lines_since(self, mark: int) -> list[bytes]:
        self._sync()
        with self.log_path.open("rb") as log:
            log.seek(mark)
            return log.read().splitlines()

    def count_since(self, mark: int) -> Counter[tuple[str, str]]:
        """Requests after `mark` by (method, kind), kind being manifests, blobs, or base."""
        return Counter((r.method, _kind(r.path)) for r in self.requests_since(mark))

    def _sync(self) -> None:
        # The registry writes a log line after answering, so a probe we send after our own
        # requests and then see in the log means the earlier lines are written too.
        marker = uuid.uuid4().hex
        try:
            urllib.request.urlopen(  # noqa: S310
                f"{self.url}{_SYNC_PATH}{marker}", timeout=2, context=self.client_context()
            ).close()
        except urllib.error.HTTPError as error:
            error.close()
        deadline = time.monotonic() + _SYNC_TIMEOUT
        needle = marker.encode()
        while time.monotonic() < deadline:
            if needle in self.log_path.read_bytes():
                time.sleep(0.02)  # lines of concurrent earlier requests land in the same burst
                return
            time.sleep(0.01)
        raise RuntimeError("registry log did not show the sync probe")


def _kind(path: str) -> str:
    if "/manifests/" in path:
        return "manifests"
    if "/blobs/" in path:
        return "blobs"
    return "base"


def _parse(line: bytes) -> LoggedRequest | None:
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    if not isinstance(entry, dict):
        return None
    message = str(entry.get("msg", ""))
    if message.startswith("response completed"):
        status = int(entry.get("http.response.status", 0))
    elif message.startswith("error authorizing context"):
        status = 401  # refused before a handler ran, so no "response completed" line
    else:
        return None
    return LoggedRequest(
        method=str(entry.get("http.request.method", "")),
        path=str(entry.get("http.request.uri", "")),
        status=status,
    )


def _config(
    workdir: Path,
    port: int,
    htpasswd: tuple[str, str] | None,
    token: TokenAuthConfig | None,
    tls: ServingCert | None,
) -> str:
    storage = workdir / "storage"
    storage.mkdir(exist_ok=True)
    auth = ""
    if htpasswd is not None:
        path = workdir / "htpasswd"
        path.write_text(_htpasswd_line(*htpasswd))
        auth = f"auth:\n  htpasswd:\n    realm: archfit-test\n    path: {path}\n"
    elif token is not None:
        auth = (
            "auth:\n  token:\n"
            f"    realm: {token.realm}\n"
            f"    service: {token.service}\n"
            f"    issuer: {token.issuer}\n"
            f"    rootcertbundle: {token.root_cert_bundle}\n"
        )
    served = "" if tls is None else f"  tls:\n    certificate: {tls.cert}\n    key: {tls.key}\n"
    return (
        "version: 0.1\n"
        "log:\n  level: info\n  formatter: json\n  accesslog:\n    disabled: true\n"
        f"storage:\n  filesystem:\n    rootdirectory: {storage}\n"
        "  delete:\n    enabled: true\n"
        "  cache:\n    blobdescriptor: inmemory\n"
        f"http:\n  addr: 127.0.0.1:{port}\n  secret: archfit-test-{uuid.uuid4().hex}\n"
        f"{served}{auth}"
    )


def _htpasswd_line(user: str, password: str) -> str:
    # distribution accepts bcrypt only; apache2-utils' htpasswd makes one.
    binary = require_binary("/usr/bin/htpasswd", "apache2-utils")
    result = subprocess.run(
        [binary, "-nbB", user, password], capture_output=True, check=True, timeout=30
    )
    return result.stdout.decode().strip() + "\n"
