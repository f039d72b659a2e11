"""How archfit reaches one API server: where, whom it trusts, who it is; and the in-cluster one.

A `Connection` is plain data that `extender.kube.api.KubeApi` turns into a urllib3 pool. It
comes from the pod's service account (`in_cluster`), from a kubeconfig read natively
(`extender.kube.kubeconfig`), or, for the kinds of user only the `kubernetes` package can
authenticate (exec plugins, auth providers), from its Configuration (`from_configuration`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from extender.kube.errors import KubeConfigError

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
"""Where kubelet mounts a pod's service-account token, CA and namespace."""
TOKEN_REREAD_SECONDS = 60.0
"""How long a token read from a file is used before the file is read again, as client-go's
cached file token source does: kubelet rotates projected tokens well before they expire."""


class Credentials(Protocol):
    """Who archfit is to the API server: the Authorization header of the next request."""

    def authorization(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class BearerToken:
    """A token written in the kubeconfig."""

    token: str

    def authorization(self) -> str | None:
        return f"Bearer {self.token}"


class TokenFile:
    """A token read from a file, and read again every TOKEN_REREAD_SECONDS or as soon as the
    file changes (kubelet swaps a projected token by renaming a new file in)."""

    def __init__(
        self,
        path: Path,
        *,
        reread_seconds: float = TOKEN_REREAD_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self._reread = reread_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._token = ""
        self._read_at = -reread_seconds
        self._stamp: tuple[int, int] | None = None
        """The file's (inode, mtime) when it was read: a renamed-in file differs."""

    def authorization(self) -> str | None:
        with self._lock:
            now = self._clock()
            stamp = self._file_stamp()
            if now - self._read_at >= self._reread or stamp != self._stamp or not self._token:
                # Kept when a read fails: the old token may still be valid, and the API
                # server says so if it is not.
                try:
                    token = self.path.read_text(encoding="utf-8").strip()
                except OSError:
                    token = ""
                if token:
                    self._token, self._read_at, self._stamp = token, now, stamp
        return f"Bearer {self._token}" if self._token else None

    def _file_stamp(self) -> tuple[int, int] | None:
        try:
            found = self.path.stat()
        except OSError:
            return None
        return found.st_ino, found.st_mtime_ns


@dataclass(frozen=True, slots=True)
class Connection:
    """One API server and how to talk to it. Paths are absolute; `*_data` fields hold PEM."""

    host: str
    """`https://host:port` (or http), without a trailing slash."""
    ca_file: str = ""
    """The CA bundle to trust; with neither it nor `ca_data`, the system's CAs."""
    ca_data: str = ""
    cert_file: str = ""
    """The client certificate, when archfit authenticates with one."""
    key_file: str = ""
    cert_data: bytes = b""
    key_data: bytes = b""
    verify: bool = True
    """False for a kubeconfig's insecure-skip-tls-verify."""
    tls_server_name: str = ""
    """The name to verify the server's certificate against (and send as SNI), if not the host's."""
    proxy: str = ""
    """An HTTP(S) or SOCKS proxy URL, or "" to connect directly."""
    credentials: Credentials | None = None
    """The Authorization header; None with a client certificate alone."""


def in_cluster(environ: Any = os.environ, account: Path = SERVICE_ACCOUNT_DIR) -> Connection:
    """The pod's service account: the API server at KUBERNETES_SERVICE_HOST/PORT, its CA, and
    the token kubelet keeps fresh. Raises KubeConfigError with the `kubernetes` package's
    words for what is missing."""
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT")
    if host is None or port is None:
        raise KubeConfigError("Service host/port is not set.")
    if not host or not port:
        raise KubeConfigError("Service host/port is set but empty.")
    token, ca = account / "token", account / "ca.crt"
    if not token.is_file():
        raise KubeConfigError("Service token file does not exist.")
    if not ca.is_file():
        raise KubeConfigError("Service certification file does not exists.")
    if not ca.read_bytes().strip():
        raise KubeConfigError("Cert file exists but empty.")
    credentials = TokenFile(token)
    if credentials.authorization() is None:
        raise KubeConfigError("Token file exists but empty.")
    # An IPv6 service address is bracketed in the URL.
    authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return Connection(host=f"https://{authority}", ca_file=str(ca), credentials=credentials)


class ConfigurationCredentials:
    """The Authorization header a `kubernetes.client.Configuration` gives: asking it runs its
    refresh hook, so an exec plugin's or auth provider's token is renewed as it expires."""

    def __init__(self, configuration: Any) -> None:
        self._configuration = configuration
        self._lock = threading.Lock()

    def authorization(self) -> str | None:
        with self._lock:  # the refresh hook may run a plugin: once at a time
            settings = self._configuration.auth_settings()
        for setting in settings.values():
            if setting.get("in") == "header" and setting.get("key", "").lower() == "authorization":
                value = setting.get("value")
                return str(value) if value else None
        return None


def from_configuration(configuration: Any) -> Connection:
    """A Connection from a `kubernetes.client.Configuration` that its config loader filled
    (public attributes only, which the client has kept from v29 on)."""
    return Connection(
        host=str(configuration.host).rstrip("/"),
        ca_file=configuration.ssl_ca_cert or "",
        ca_data=getattr(configuration, "ca_cert_data", None) or "",
        cert_file=configuration.cert_file or "",
        key_file=configuration.key_file or "",
        verify=bool(configuration.verify_ssl),
        tls_server_name=getattr(configuration, "tls_server_name", None) or "",
        proxy=getattr(configuration, "proxy", None) or "",
        credentials=ConfigurationCredentials(configuration),
    )
