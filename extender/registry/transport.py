"""HTTP for registry requests: bounded, guarded, counted.

Every request has a size cap, connect and total timeouts and a per-host connection limit;
redirects are followed by hand so each hop passes the SSRF guard, and Authorization
never goes to a host other than the one it was meant for.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass

import aiohttp
import yarl
from multidict import CIMultiDict, CIMultiDictProxy

from extender.metrics import Metrics
from extender.registry.errors import (
    AddressForbidden,
    RegistryError,
    Timeout,
    TooLarge,
    UnexpectedStatus,
    Unreachable,
)
from extender.registry.hosts import TLSOption
from extender.registry.netguard import AddressGuard, GuardedResolver
from extender.registry.settings import RegistrySettings

USER_AGENT = "archfit/0.1 (kube-scheduler extender)"
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_MAX_HOST_LABELS = 200
"""Distinct `host` metric labels; image names are user input, so cardinality is capped."""


@dataclass(frozen=True, slots=True)
class Response:
    """A finished response: status, headers and the (capped) body."""

    status: int
    headers: CIMultiDictProxy[str]
    body: bytes
    url: yarl.URL


class Transport:
    """One aiohttp session for all registries, created inside the running loop."""

    def __init__(
        self,
        settings: RegistrySettings,
        metrics: Metrics | None = None,
        *,
        guard: AddressGuard | None = None,
    ) -> None:
        self.settings = settings
        self.guard = guard or AddressGuard(settings.allowed_networks)
        self._metrics = metrics
        self._host_labels: set[str] = set()
        connector = aiohttp.TCPConnector(
            limit=settings.max_connections,
            limit_per_host=settings.max_connections_per_host,
            resolver=GuardedResolver(self.guard),
            ttl_dns_cache=30,
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(
                total=settings.request_timeout_seconds,
                sock_connect=settings.connect_timeout_seconds,
            ),
            headers={"User-Agent": USER_AGENT},
            trust_env=False,  # never route registry traffic through an env-configured proxy
            auto_decompress=True,
        )

    async def aclose(self) -> None:
        """Close the session and its connections."""
        await self._session.close()

    async def send(
        self,
        method: str,
        url: yarl.URL,
        *,
        kind: str,
        cap: int,
        headers: Mapping[str, str] | None = None,
        tls: TLSOption = True,
    ) -> Response:
        """Send one request, following redirects by hand, and read at most `cap` bytes.

        Non-2xx answers are returned, not raised, with the body cut to the error cap.
        Raises Unreachable, Timeout, TooLarge or AddressForbidden.
        """
        origin = url.origin()
        current = url
        sent = CIMultiDict(headers or {})
        for _hop in range(self.settings.max_redirects + 1):
            self.guard.check_url(current)
            response = await self._one(method, current, sent, kind, cap, tls)
            location = response.headers.get("Location")
            if response.status not in _REDIRECTS or not location:
                return response
            current = current.join(yarl.URL(location))
            if current.origin() != origin:
                # Object storage links carry their own signature; our token is not theirs.
                sent.popall("Authorization", None)
                tls = True
            if response.status == 303:
                method = "GET"
        raise UnexpectedStatus(
            f"{url.host}: more than {self.settings.max_redirects} redirects", status=310
        )

    async def _one(
        self,
        method: str,
        url: yarl.URL,
        headers: CIMultiDict[str],
        kind: str,
        cap: int,
        tls: TLSOption,
    ) -> Response:
        host = url.raw_authority
        status = "error"
        try:
            async with self._session.request(
                method, url, headers=headers, allow_redirects=False, ssl=tls
            ) as response:
                status = str(response.status)
                self._note_ratelimit(host, response.headers)
                limit = cap if response.status < 300 else self.settings.max_error_bytes
                body = (
                    b""  # a HEAD answer's Content-Length describes the GET body
                    if method == "HEAD"
                    else await _read(response, limit, strict=response.status < 300, host=host)
                )
                return Response(response.status, response.headers, body, url)
        except RegistryError:
            raise
        except TimeoutError as error:
            status = "timeout"
            raise Timeout(f"{host}: no answer within the time limit") from error
        except aiohttp.ClientConnectorCertificateError as error:
            raise Unreachable(f"{host}: TLS certificate rejected") from error
        except (aiohttp.ClientError, ssl.SSLError, OSError) as error:
            cause = error.__cause__ if isinstance(error.__cause__, AddressForbidden) else None
            if cause is not None:
                raise cause from None
            raise Unreachable(f"{host}: {type(error).__name__}: {str(error)[:160]}") from error
        finally:
            self._count(host, method, kind, status)

    def _label(self, host: str) -> str:
        if host in self._host_labels:
            return host
        if len(self._host_labels) >= _MAX_HOST_LABELS:
            return "other"
        self._host_labels.add(host)
        return host

    def _count(self, host: str, method: str, kind: str, status: str) -> None:
        if self._metrics is not None:
            self._metrics.registry_requests.labels(self._label(host), method, kind, status).inc()

    def _note_ratelimit(self, host: str, headers: CIMultiDictProxy[str]) -> None:
        value = headers.get("ratelimit-remaining")
        if value is None or self._metrics is None:
            return
        # Docker Hub sends `76;w=21600`: pulls left in a window of that many seconds.
        head = value.split(";", 1)[0].strip()
        if head.isdigit():
            self._metrics.registry_ratelimit_remaining.labels(self._label(host)).set(int(head))


async def _read(response: aiohttp.ClientResponse, cap: int, *, strict: bool, host: str) -> bytes:
    """Read at most `cap` bytes. With `strict`, a longer body is an error; else it is cut."""
    declared = response.content_length
    if strict and declared is not None and declared > cap:
        raise TooLarge(f"{host}: body of {declared} bytes exceeds the {cap}-byte cap")
    chunks: list[bytes] = []
    size = 0
    while size <= cap:
        chunk = await response.content.read(min(65_536, cap + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > cap:
        if strict:
            raise TooLarge(f"{host}: body exceeds the {cap}-byte cap")
        return b"".join(chunks)[:cap]
    return b"".join(chunks)
