"""What every request to one API server carries, as client-go's transport decides it: the
URL, the TLS, the proxy, and the headers that say who the client is and whom it acts as.

- **URL**: the server's scheme, host and path prefix (`rest_config.server_url`), then the
  request's path; the server's own query and fragment are not sent.
- **Authorization**, first that applies: the server URL's `user:password@` (Go's HTTP client
  sends it as Basic); a bearer token, the token file's when it is readable (read again
  TOKEN_FILE_SECONDS after the last read, the last good token kept if a read fails); Basic
  from username and password; a credential plugin's token (tls.py takes its certificate);
  an auth provider's token. A plugin is not run for a user with a token, a password or a
  client certificate, as client-go does not run it.
- **Impersonate-User, -Uid, -Group, -Extra-<key>** from the user's `as`, `as-uid`,
  `as-groups` and `as-user-extra`.
- **Proxy**: the kubeconfig's proxy-url whatever NO_PROXY says; else the environment's by
  Go's rules (extender.http_proxy), and when the transport has TLS settings of its own,
  client-go's extra NO_PROXY CIDR check (leading zeros allowed) first.
"""

from __future__ import annotations

import base64
import posixpath
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from extender.http_proxy import ProxyConfig, sloppy_cidrs
from extender.kube.client import auth_providers
from extender.kube.client.errors import CredentialUnavailable, KubeConfigError
from extender.kube.client.exec_plugin import (
    ExecCredentials,
    ExecPlugin,
    cluster_info,
    stdin_is_terminal,
)
from extender.kube.client.rest_config import Impersonation, RestConfig, server_url
from extender.kube.client.tls import TLSSettings, TrustedContext
from extender.urls import GoURL

TOKEN_FILE_SECONDS = 50.0
"""How long a token read from a file is used before the file is read again: client-go's
cached file token source keeps one for a minute, less its 10 s leeway. kubelet rotates
projected tokens well before they expire."""
_LEGAL_HEADER_KEY = frozenset(
    b"!#$&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
)


class TokenFile:
    """A bearer token read from a file and read again as it rotates (client-go's cached file
    token source): a token is kept TOKEN_FILE_SECONDS; a failed read keeps the last one."""

    def __init__(self, path: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self._clock = clock
        self._lock = threading.Lock()
        self._token = ""
        self._read_at = 0.0

    def token(self) -> str:
        """The token; raises CredentialUnavailable when no read has ever succeeded."""
        with self._lock:
            now = self._clock()
            if self._token and now - self._read_at < TOKEN_FILE_SECONDS:
                return self._token
            try:
                token = Path(self.path).read_text(encoding="utf-8", errors="surrogateescape")
            except OSError as error:
                failed = f'failed to read token file "{self.path}": {error.strerror}'
            else:
                token = token.strip()
                if token:
                    self._token, self._read_at = token, now
                    return token
                failed = f'read empty token from file "{self.path}"'
            if self._token:
                return self._token  # the old token may still be valid; the server says if not
            raise CredentialUnavailable(failed)


def _basic(username: str, password: str) -> str:
    pair = f"{username}:{password}".encode("utf-8", "surrogateescape")
    return "Basic " + base64.b64encode(pair).decode()


def _header_key(key: str) -> str:
    """An Impersonate-Extra key: bytes not legal in a header name, and `%`, %-escaped."""
    return "".join(chr(c) if c in _LEGAL_HEADER_KEY else f"%{c:02X}" for c in key.encode("utf-8"))


def impersonation_headers(who: Impersonation | None) -> list[tuple[str, str]]:
    if who is None:
        return []
    found = [("Impersonate-User", who.user)]
    if who.uid:
        found.append(("Impersonate-Uid", who.uid))
    found += [("Impersonate-Group", group) for group in who.groups]
    for key, values in who.extra.items():
        found += [(f"Impersonate-Extra-{_header_key(key)}", value) for value in values]
    return found


class ServerTransport:
    """One server's URL, TLS, proxy and credentials. Built at once, so what client-go refuses
    when it builds its transport is refused here (KubeConfigError)."""

    def __init__(
        self,
        config: RestConfig,
        environ: Mapping[str, str],
        *,
        clock: Callable[[], float] = time.monotonic,
        is_terminal: Callable[[], bool] = stdin_is_terminal,
    ) -> None:
        self.config = config
        self.server = server_url(config)
        self._token_file = TokenFile(config.bearer_token_file, clock=clock) if (
            config.bearer_token_file) else None  # fmt: skip
        has_token = bool(config.bearer_token or config.bearer_token_file)
        has_cert_auth = bool((config.cert_file or config.cert_data)
                             and (config.key_file or config.key_data))  # fmt: skip
        if config.username and has_token:
            raise KubeConfigError("username/password or bearer token may be set, but not both")
        self._plugin: ExecPlugin | None = None
        if config.exec is not None and config.auth_provider is not None:
            raise KubeConfigError("execProvider and authProvider cannot be used in combination")
        if config.exec is not None:
            plugin = ExecPlugin(config.exec, self._exec_cluster(config), environ,
                                is_terminal=is_terminal)  # fmt: skip
            if not (has_token or config.username or has_cert_auth):
                self._plugin = plugin
        self._provider = (
            auth_providers.token_source(config.auth_provider) if config.auth_provider else None
        )
        self.tls: TrustedContext | None = None
        has_tls_settings = bool(config.has_ca or has_cert_auth or self._plugin is not None
                                or config.insecure or config.server_name)  # fmt: skip
        if self.server.scheme == "https":
            self.tls = TrustedContext(
                TLSSettings(
                    insecure=config.insecure,
                    server_name=config.server_name,
                    ca_file=config.ca_file,
                    ca_data=config.ca_data,
                    cert_file=config.cert_file,
                    cert_data=config.cert_data,
                    key_file=config.key_file,
                    key_data=config.key_data,
                ),
                plugin_pair=self._plugin_pair if self._plugin is not None else None,
                clock=clock,
            )
        elif config.has_ca and config.insecure:
            raise KubeConfigError(
                "specifying a root certificates file with the insecure flag is not allowed"
            )
        self.proxy = self._choose_proxy(config, environ, has_tls_settings)
        if self._token_file is not None and not config.bearer_token:
            self._token_file.token()  # client-go reads it now when there is no token besides

    def _exec_cluster(self, config: RestConfig) -> dict[str, object] | None:
        if config.exec is None or not config.exec.provide_cluster_info:
            return None
        ca = config.ca_data
        if not ca and config.ca_file:
            try:
                ca = Path(config.ca_file).read_bytes()
            except OSError as error:
                raise KubeConfigError(
                    f"failed to load CA bundle for execProvider: open {config.ca_file}: "
                    f"{error.strerror}"
                ) from error
        return cluster_info(
            config.host,
            server_name=config.server_name,
            insecure=config.insecure,
            ca_data=ca,
            proxy_url=str(config.proxy) if config.proxy is not None else "",
            disable_compression=config.disable_compression,
            config=config.exec.config,
        )

    def _choose_proxy(
        self, config: RestConfig, environ: Mapping[str, str], has_tls_settings: bool
    ) -> GoURL | None:
        if config.proxy is not None:
            return config.proxy
        if has_tls_settings:
            import ipaddress

            try:
                address = ipaddress.ip_address(self.server.hostname)
            except ValueError:
                address = None
            if address is not None and any(
                address in network for network in sloppy_cidrs(environ)
                if network.version == address.version
            ):  # fmt: skip
                return None
        try:
            return ProxyConfig.from_environment(environ).rules().proxy_for(self.server)
        except ValueError as error:
            raise KubeConfigError(str(error)) from error

    def _plugin_pair(self) -> tuple[bytes, bytes]:
        assert self._plugin is not None
        found = self._plugin.credentials()
        return found.cert_pem, found.key_pem

    def url(self, path: str, query: str = "") -> str:
        """The URL of a request for `path` with its `query` (encoded): the path joined to the
        server's prefix as Go's path.Join joins them."""
        joined = posixpath.normpath(posixpath.join("/", self.server.path, path.lstrip("/")))
        target = GoURL(
            scheme=self.server.scheme,
            host=self.server.host,
            path="/" + joined.lstrip("/"),
            raw_query=query,
        )
        return str(target)

    def headers(self) -> tuple[list[tuple[str, str]], ExecCredentials | None]:
        """The credential and impersonation headers of the next request, and the plugin's
        answer it used (to pass to `unauthorized`). Raises CredentialUnavailable when they cannot
        be had: the request must not be sent."""
        headers: list[tuple[str, str]] = []
        used: ExecCredentials | None = None
        config = self.config
        if self.server.username is not None:
            authorization = _basic(self.server.username, self.server.password or "")
        elif config.bearer_token or self._token_file is not None:
            token = config.bearer_token
            if self._token_file is not None:  # its token wins once read
                try:
                    token = self._token_file.token()
                except CredentialUnavailable:
                    if not token:
                        raise
            authorization = f"Bearer {token}"
        elif config.username:
            authorization = _basic(config.username, config.password)
        elif self._plugin is not None:
            try:
                used = self._plugin.credentials()
            except CredentialUnavailable as error:
                raise CredentialUnavailable(f"getting credentials: {error}") from error
            authorization = f"Bearer {used.token}" if used.token else ""
        elif self._provider is not None:
            authorization = f"Bearer {self._provider.token()}"
        else:
            authorization = ""
        if authorization:
            headers.append(("Authorization", authorization))
        headers += impersonation_headers(config.impersonation)
        return headers, used

    def unauthorized(self, used: ExecCredentials | None) -> None:
        """The server answered 401 to credentials from the plugin: it runs again."""
        if used is not None and self._plugin is not None:
            self._plugin.unauthorized(used)
