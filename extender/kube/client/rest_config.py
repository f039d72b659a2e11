"""What the client needs to reach one API server, as client-go's `rest.Config` holds it: where,
whom it trusts, who it is and whom it acts as; and the pod's own (`in_cluster`).

Plain data: `extender.kube.client.transport` turns it into what goes on the wire.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from extender.kube.client.errors import KubeConfigError
from extender.urls import GoURL, URLError, join_host_port, parse

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
"""Where kubelet mounts a pod's service-account token, CA and namespace."""
PROXY_SCHEMES = ("http", "https", "socks5")
"""The schemes a kubeconfig's proxy-url may have (clientcmd's parseProxyURL)."""


@dataclass(frozen=True, slots=True)
class ExecEnv:
    name: str
    value: str


@dataclass(frozen=True, slots=True)
class ExecConfig:
    """A client-go credential plugin (a kubeconfig user's `exec`)."""

    command: str
    args: tuple[str, ...] = ()
    env: tuple[ExecEnv, ...] = ()
    api_version: str = ""
    install_hint: str = ""
    provide_cluster_info: bool = False
    interactive_mode: str = ""
    config: Any = None
    """The cluster's `client.authentication.k8s.io/exec` extension, for provideClusterInfo."""


@dataclass(frozen=True, slots=True)
class AuthProvider:
    """A kubeconfig user's `auth-provider`: its name and its config."""

    name: str
    config: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Impersonation:
    """Whom the client acts as (kubectl --as): the Impersonate-* headers."""

    user: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RestConfig:
    """One API server and how to talk to it (client-go's rest.Config, the fields archfit
    uses). Paths are absolute; `*_data` fields hold PEM."""

    host: str
    """The server as written (`https://host:port[/prefix]`); see `server_url`."""
    ca_file: str = ""
    ca_data: bytes = b""
    insecure: bool = False
    server_name: str = ""
    """The name to verify the server's certificate against (and send as SNI)."""
    cert_file: str = ""
    cert_data: bytes = b""
    key_file: str = ""
    key_data: bytes = b""
    bearer_token: str = ""
    bearer_token_file: str = ""
    """Read again as it rotates; it wins over `bearer_token` once read."""
    username: str = ""
    password: str = ""
    impersonation: Impersonation | None = None
    auth_provider: AuthProvider | None = None
    exec: ExecConfig | None = None
    proxy: GoURL | None = None
    """The kubeconfig's proxy-url; None: the environment's (HTTPS_PROXY...)."""
    disable_compression: bool = False

    @property
    def has_ca(self) -> bool:
        return bool(self.ca_file or self.ca_data)

    @property
    def has_cert(self) -> bool:
        return bool(self.cert_file or self.cert_data)


def server_url(config: RestConfig) -> GoURL:
    """The URL requests go to (rest.DefaultServerUrlFor): a host without a scheme is http,
    or https when the config has a CA, a client certificate or skips verification."""
    host = config.host or "localhost"
    try:
        found: GoURL | None = parse(host)
    except URLError:
        found = None
    if found is None or not found.scheme or not found.host:
        tls = config.has_ca or config.has_cert or config.insecure
        try:
            found = parse(("https://" if tls else "http://") + host)
        except URLError as error:
            raise KubeConfigError(f"host must be a URL or a host:port pair: {error}") from error
        if found.path not in ("", "/"):
            raise KubeConfigError(f"host must be a URL or a host:port pair: {host!r}")
    return found


def is_transport_tls(config: RestConfig) -> bool:
    """Whether requests go over TLS (rest.IsConfigTransportTLS): only then does the config
    carry the user's credentials."""
    try:
        return server_url(config).scheme == "https"
    except KubeConfigError:
        return False


def parse_proxy_url(text: str) -> GoURL:
    """A kubeconfig's proxy-url (clientcmd's parseProxyURL). Raises ValueError."""
    try:
        found = parse(text)
    except URLError as error:
        raise ValueError(f"could not parse: {text}") from error
    if found.scheme not in PROXY_SCHEMES:
        raise ValueError(f'unsupported scheme "{found.scheme}", must be http, https, or socks5')
    return found


def in_cluster(environ: Mapping[str, str], account: Path = SERVICE_ACCOUNT_DIR) -> RestConfig:
    """The pod's service account (rest.InClusterConfig): the API server at
    KUBERNETES_SERVICE_HOST and _PORT, its CA, and the token kubelet keeps fresh."""
    host, port = (
        environ.get("KUBERNETES_SERVICE_HOST", ""),
        environ.get("KUBERNETES_SERVICE_PORT", ""),
    )
    if not host or not port:
        raise KubeConfigError(
            "unable to load in-cluster configuration, KUBERNETES_SERVICE_HOST and "
            "KUBERNETES_SERVICE_PORT must be defined"
        )
    token_file = account / "token"
    try:
        token = token_file.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError as error:
        raise KubeConfigError(f"open {token_file}: {error.strerror}") from error
    ca_file = account / "ca.crt"
    try:
        ca = ca_file.read_bytes()
    except OSError as error:
        raise KubeConfigError(f"the service account's CA {ca_file}: {error.strerror}") from error
    # client-go logs an unusable CA and trusts the system's instead: archfit refuses
    # (docs/kubeconfig.md), and the transport refuses one that holds no certificate.
    if not ca.strip():
        raise KubeConfigError(f"the service account's CA {ca_file} is empty")
    return RestConfig(
        host="https://" + join_host_port(host, port),
        ca_file=str(ca_file),
        bearer_token=token,
        bearer_token_file=str(token_file),
    )


def in_cluster_namespace(environ: Mapping[str, str], account: Path = SERVICE_ACCOUNT_DIR) -> str:
    """The pod's namespace as clientcmd gives it in-cluster: POD_NAMESPACE, else the service
    account's namespace file, else `default`."""
    if environ.get("POD_NAMESPACE"):
        return environ["POD_NAMESPACE"]
    try:
        found = (account / "namespace").read_text(encoding="utf-8").strip()
    except OSError:
        found = ""
    return found or "default"


def system_environ() -> Mapping[str, str]:
    """The process's environment (what client-go reads with os.Getenv)."""
    return os.environ
