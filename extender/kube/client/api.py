"""The Kubernetes API as archfit calls it: REST paths and JSON over one urllib3 pool.

Every call names its path (`/api/v1/namespaces/{ns}/pods/{name}`), its query in the API's
own camelCase, and its timeout; the answer is JSON (parsed by orjson, or left as bytes for a
msgspec decoder), and a watch is the urllib3 response itself, its body not yet read. No
model classes. What each request carries (URL, TLS, proxy, credentials) is the transport's
(`extender.kube.client.transport`). Synchronous: `extender.kube.client.calls` runs it off
the event loop.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

import orjson
import urllib3

from extender import __version__
from extender.kube.client.errors import ApiError, CredentialUnavailable, KubeConfigError
from extender.kube.client.rest_config import RestConfig
from extender.kube.client.transport import ServerTransport

RequestTimeout = float | tuple[float, float]
"""Seconds for the whole call, or (connect, read) seconds."""
Query = Mapping[str, str | int | bool | None]
"""Query parameters in the API's spelling (`labelSelector`, `continue`); None is left out."""

UNREACHABLE = (urllib3.exceptions.HTTPError, OSError, CredentialUnavailable)
"""What a call raises when the server was not reached, or the request could not be sent
(its credentials could not be had); an answer other than 2xx is an ApiError."""
JSON_PATCH = "application/json-patch+json"
"""A list of operations (RFC 6902)."""
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"

_USER_AGENT = f"archfit/{__version__}"
_POOL_SIZE = (os.cpu_count() or 1) * 5
"""Connections kept per host, as the `kubernetes` client keeps (cpu_count * 5)."""


class KubeApi:
    """One API server's REST API. `retries`: urllib3's, for a connection or read that fails
    (archfit's callers have their own deadlines and retry loops)."""

    def __init__(self, transport: ServerTransport, *, retries: int = 1) -> None:
        self.transport = transport
        self.host = str(transport.server.without_user())
        self._retries = retries
        self._lock = threading.Lock()
        self._generation = -1
        self._pool: urllib3.PoolManager | None = None
        """Made at the first request: a credential plugin runs then, not when built."""
        proxy = transport.proxy
        if proxy is not None and proxy.scheme == "socks5":
            _socks_manager()  # a SOCKS5 proxy without PySocks is refused now, not at the first call

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.clear()

    def __enter__(self) -> KubeApi:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def get(self, path: str, *, query: Query | None = None, timeout: RequestTimeout) -> Any:
        return orjson.loads(self.request("GET", path, query=query, timeout=timeout))

    def post(
        self, path: str, body: Any, *, query: Query | None = None, timeout: RequestTimeout
    ) -> Any:
        return orjson.loads(self.request("POST", path, query=query, body=body, timeout=timeout))

    def put(
        self, path: str, body: Any, *, query: Query | None = None, timeout: RequestTimeout
    ) -> Any:
        return orjson.loads(self.request("PUT", path, query=query, body=body, timeout=timeout))

    def patch(self, path: str, body: Any, *, content_type: str, timeout: RequestTimeout) -> Any:
        """`content_type` says which patch: JSON_PATCH, MERGE_PATCH or STRATEGIC_MERGE_PATCH."""
        answer = self.request("PATCH", path, body=body, content_type=content_type, timeout=timeout)
        return orjson.loads(answer)

    def delete(self, path: str, *, query: Query | None = None, timeout: RequestTimeout) -> Any:
        return orjson.loads(self.request("DELETE", path, query=query, timeout=timeout))

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: RequestTimeout,
    ) -> bytes:
        """The answer's body as bytes. Raises ApiError for a status other than 2xx, and one of
        UNREACHABLE when the server cannot be reached or the credentials cannot be had."""
        response = self._send(method, path, query, body, content_type, timeout, stream=False)
        data: bytes = response.data
        return data

    def stream(self, path: str, *, query: Query | None = None, timeout: RequestTimeout) -> Any:
        """A GET whose body is left unread (a watch): the urllib3 response, to `stream()`
        and then `release_conn()`. Raises as `request` does."""
        return self._send("GET", path, query, None, "", timeout, stream=True)

    def _current_pool(self) -> urllib3.PoolManager:
        """The pool, started afresh when the TLS changed (a rotated CA file, a plugin's new
        client certificate): connections made with the old one are dropped."""
        tls = self.transport.tls
        context = tls.context() if tls is not None else None
        with self._lock:
            if self._pool is None or (tls is not None and tls.generation != self._generation):
                old, self._pool = self._pool, self._new_pool(context)
                if old is not None:
                    old.clear()
            return self._pool

    def _new_pool(self, context: Any) -> urllib3.PoolManager:
        options: dict[str, Any] = {"retries": self._retries, "maxsize": _POOL_SIZE}
        tls = self.transport.tls
        if tls is not None:
            self._generation = tls.generation
            options["ssl_context"] = context
            settings = tls.settings
            if settings.server_name:
                options["server_hostname"] = settings.server_name
            if settings.insecure:
                options["cert_reqs"] = "CERT_NONE"
                options["assert_hostname"] = False
        proxy = self.transport.proxy
        if proxy is None:
            return urllib3.PoolManager(**options)
        if proxy.username is not None:
            basic = f"{proxy.username}:{proxy.password or ''}"
            options["proxy_headers"] = urllib3.make_headers(proxy_basic_auth=basic)
        address = str(proxy.without_user())
        if proxy.scheme == "socks5":
            options.pop("proxy_headers", None)
            # Go's SOCKS5 dialer sends the host name for the proxy to resolve: socks5h.
            socks: urllib3.PoolManager = _socks_manager()(
                "socks5h" + address[len("socks5") :],
                username=proxy.username,
                password=proxy.password,
                **options,
            )
            return socks
        return urllib3.ProxyManager(address, **options)

    def _send(
        self,
        method: str,
        path: str,
        query: Query | None,
        body: Any,
        content_type: str,
        timeout: RequestTimeout,
        *,
        stream: bool,
    ) -> Any:
        headers = urllib3.HTTPHeaderDict({"Accept": "application/json", "User-Agent": _USER_AGENT})
        credentials, used = self.transport.headers()
        for name, value in credentials:
            headers.add(name, value)
        encoded = None
        if body is not None:
            headers["Content-Type"] = content_type
            encoded = orjson.dumps(body)
        response = self._current_pool().request(
            method,
            self.transport.url(path, _query_string(query)),
            body=encoded,
            headers=headers,
            timeout=_timeout(timeout),
            preload_content=not stream,
        )
        if not 200 <= response.status < 300:
            data = response.data  # read in full, so the connection goes back clean
            response.release_conn()
            if response.status == 401:
                self.transport.unauthorized(used)
            raise ApiError(response.status, response.reason or "", data, dict(response.headers))
        return response


def connect(
    config: RestConfig, environ: Mapping[str, str] | None = None, *, retries: int = 1
) -> KubeApi:
    """A client for `config`, with the proxies of `environ` (the process's when None).
    Raises KubeConfigError for what client-go refuses when it builds its transport."""
    return KubeApi(
        ServerTransport(config, os.environ if environ is None else environ), retries=retries
    )


def _socks_manager() -> Any:
    """urllib3's SOCKS pool manager (it needs PySocks, loaded only for a SOCKS proxy)."""
    try:
        from urllib3.contrib.socks import SOCKSProxyManager
    except ImportError as error:
        raise KubeConfigError(
            f"a SOCKS5 proxy needs PySocks, which is not installed: {error}"
        ) from error
    return SOCKSProxyManager


def _query_string(query: Query | None) -> str:
    if not query:
        return ""
    pairs = [
        (key, ("true" if value else "false") if isinstance(value, bool) else str(value))
        for key, value in query.items()
        if value is not None
    ]
    return urlencode(pairs)


def _timeout(timeout: RequestTimeout) -> urllib3.Timeout:
    if isinstance(timeout, tuple):
        return urllib3.Timeout(connect=timeout[0], read=timeout[1])
    return urllib3.Timeout(total=timeout)
