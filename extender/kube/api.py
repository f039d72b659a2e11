"""The Kubernetes API as archfit calls it: REST paths and JSON over one urllib3 pool.

Every call names its path (`/api/v1/namespaces/{ns}/pods/{name}`), its query in the API's
own camelCase, and its timeout; the answer is JSON (parsed by orjson, or left as bytes for a
msgspec decoder), and a watch is the urllib3 response itself, its body not yet read. No
model classes: the `kubernetes` package's API classes would cost half of the process's
memory for objects archfit never builds. Synchronous, like that client: call it in a thread.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode, urlsplit

import orjson
import urllib3

from extender import __version__
from extender.kube.connection import Connection
from extender.kube.errors import ApiError

RequestTimeout = float | tuple[float, float]
"""Seconds for the whole call, or (connect, read) seconds: what the client's
`_request_timeout` took, with the same meaning."""
Query = Mapping[str, str | int | bool | None]
"""Query parameters in the API's spelling (`labelSelector`, `continue`); None is left out."""

JSON_PATCH = "application/json-patch+json"
"""A list of operations (RFC 6902): what the client sent for a list body."""
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
"""What the client sent for an object body to a built-in type."""

_USER_AGENT = f"archfit/{__version__}"
_POOL_SIZE = (os.cpu_count() or 1) * 5
"""Connections kept per host, as the `kubernetes` client keeps (cpu_count * 5)."""


class KubeApi:
    """One API server's REST API. `retries`: urllib3's, for a connection or read that fails
    (archfit's callers have their own deadlines and retry loops)."""

    def __init__(self, connection: Connection, *, retries: int = 1) -> None:
        self.host = connection.host
        self._credentials = connection.credentials
        self._pool = _pool(connection, retries)

    def close(self) -> None:
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
        """The answer's body as bytes. Raises ApiError for a status other than 2xx, and
        urllib3's errors (HTTPError) or OSError when the server cannot be reached."""
        response = self._send(method, path, query, body, content_type, timeout, stream=False)
        data: bytes = response.data
        return data

    def stream(self, path: str, *, query: Query | None = None, timeout: RequestTimeout) -> Any:
        """A GET whose body is left unread (a watch): the urllib3 response, to `stream()`
        and then `release_conn()`. Raises ApiError as `request` does."""
        return self._send("GET", path, query, None, "", timeout, stream=True)

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
        headers = {"Accept": "application/json", "User-Agent": _USER_AGENT}
        authorization = self._credentials.authorization() if self._credentials else None
        if authorization:
            headers["Authorization"] = authorization
        encoded = None
        if body is not None:
            headers["Content-Type"] = content_type
            encoded = orjson.dumps(body)
        response = self._pool.request(
            method,
            self.host + path + _query_string(query),
            body=encoded,
            headers=headers,
            timeout=_timeout(timeout),
            preload_content=not stream,
        )
        if not 200 <= response.status < 300:
            data = response.data  # read in full, so the connection goes back clean
            response.release_conn()
            raise ApiError(response.status, response.reason or "", data, dict(response.headers))
        return response


def _query_string(query: Query | None) -> str:
    if not query:
        return ""
    pairs = [
        (key, ("true" if value else "false") if isinstance(value, bool) else str(value))
        for key, value in query.items()
        if value is not None
    ]
    return "?" + urlencode(pairs) if pairs else ""


def _timeout(timeout: RequestTimeout) -> urllib3.Timeout:
    if isinstance(timeout, tuple):
        return urllib3.Timeout(connect=timeout[0], read=timeout[1])
    return urllib3.Timeout(total=timeout)


def _pool(connection: Connection, retries: int) -> urllib3.PoolManager:
    options: dict[str, Any] = {
        "retries": retries,
        "maxsize": _POOL_SIZE,
        "cert_reqs": ssl.CERT_REQUIRED if connection.verify else ssl.CERT_NONE,
    }
    if connection.host.startswith("https"):
        options |= _tls_options(connection)
    proxy = _proxy(connection)
    if not proxy:
        return urllib3.PoolManager(**options)
    if urlsplit(proxy).scheme.lower() in ("socks4", "socks4a", "socks5", "socks5h"):
        from urllib3.contrib.socks import SOCKSProxyManager

        return SOCKSProxyManager(proxy, **options)
    return urllib3.ProxyManager(proxy, **options)


def _tls_options(connection: Connection) -> dict[str, Any]:
    """Whom to trust and who we are: files stay paths (read again by each new connection, as
    the client did), PEM data goes into one SSL context."""
    options: dict[str, Any] = {}
    if connection.tls_server_name:
        options["server_hostname"] = connection.tls_server_name
    if connection.ca_file:
        options["ca_certs"] = connection.ca_file
    if connection.ca_data:
        options["ca_cert_data"] = connection.ca_data
    if connection.cert_data or connection.key_data:
        options["ssl_context"] = _context_with_key(connection)
    else:
        if connection.cert_file:
            options["cert_file"] = connection.cert_file
        if connection.key_file:
            options["key_file"] = connection.key_file
    return options


def _context_with_key(connection: Connection) -> ssl.SSLContext:
    """An SSL context holding a client certificate given as data. OpenSSL loads a key only
    from a file: it is written to a private temporary folder and removed once loaded."""
    cert_reqs = ssl.CERT_REQUIRED if connection.verify else ssl.CERT_NONE
    context = urllib3.util.ssl_.create_urllib3_context(cert_reqs=cert_reqs)
    if connection.verify and not (connection.ca_file or connection.ca_data):
        context.load_default_certs()
    with tempfile.TemporaryDirectory(prefix="archfit-") as folder:
        cert = _written(folder, "tls.crt", connection.cert_data) or connection.cert_file
        key = _written(folder, "tls.key", connection.key_data) or connection.key_file
        context.load_cert_chain(cert, key or None)
    return context


def _written(folder: str, name: str, data: bytes) -> str:
    """`data` in a file of `folder` only its owner reads, or "" when there is no data."""
    if not data:
        return ""
    path = os.path.join(folder, name)
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
        out.write(data)
    return path


def _proxy(connection: Connection) -> str:
    """The kubeconfig's proxy-url, else the environment's (HTTPS_PROXY, ALL_PROXY...), unless
    NO_PROXY names the API server: what the `kubernetes` client does."""
    scheme = urlsplit(connection.host).scheme
    proxy = connection.proxy or _environ(f"{scheme}_proxy") or _environ("all_proxy")
    if not proxy or _bypassed(connection.host, _environ("no_proxy")):
        return ""
    return proxy


def _environ(name: str) -> str:
    return os.environ.get(name.lower()) or os.environ.get(name.upper()) or ""


def _bypassed(url: str, no_proxy: str) -> bool:
    """Whether NO_PROXY (`*`, hosts, .domains, host:port, CIDRs) names `url`'s host."""
    import ipaddress

    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if not host:
        return True
    try:
        address: Any = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        if not entry:
            continue
        if entry == "*":
            return True
        if address is not None:
            try:
                if address in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                pass
        entry = entry.lstrip(".")
        if host == entry or host.endswith("." + entry) or parts.netloc.lower() == entry:
            return True
    return False
