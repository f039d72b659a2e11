"""HTTP for registry requests: bounded, guarded, counted.

Every request has a size cap, connect and total timeouts (the total cut to the scheduler
call's deadline plus registry.lookupGraceSeconds), and a fair share of the pool per host;
redirects are followed by hand so each hop passes the SSRF guard, and Authorization
never goes to a host other than the one it was meant for.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import aiohttp
import yarl
from multidict import CIMultiDict, CIMultiDictProxy

from extender.config.registry_settings import RegistrySettings
from extender.core.text import MAX_ERROR_IN_REASON, error_text
from extender.metrics import Metrics
from extender.registry import system_cas
from extender.registry.deadline import request_seconds_left
from extender.registry.errors import (
    AddressForbidden,
    RegistryError,
    Timeout,
    TooLarge,
    UnexpectedStatus,
    Unreachable,
)
from extender.registry.fairshare import FairShare
from extender.registry.hosts import TLSOption
from extender.registry.netguard import AddressGuard, GuardedDns
from extender.registry.proxy import routes

if TYPE_CHECKING:
    from prometheus_client import Counter

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
        environ: Mapping[str, str] | None = None,
    ) -> None:
        """Raises ValueError naming the setting when a proxy is not in allowedNetworks."""
        self.settings = settings
        self.guard = guard or AddressGuard(settings.allowed_networks)
        self.proxies = routes(settings.proxy, os.environ if environ is None else environ)
        for proxy in (self.proxies.https, self.proxies.http):
            if proxy is not None and not self.guard.listed(proxy.host or "", proxy.port):
                # The proxy reaches what archfit must not; trusting it is a choice to write down.
                raise ValueError(
                    f"registry.proxy: proxy host {proxy.host!r} must be listed in"
                    " registry.allowedNetworks (by name, address or CIDR)"
                )
        # Targets behind a proxy are resolved here only to be checked: the proxy connects.
        self._target_check = GuardedDns(self.guard)
        self._metrics = metrics
        self._host_labels: set[str] = set()
        self._counted: dict[tuple[str, str, str, str], Counter] = {}
        """(host label, method, kind, status) -> its `registry_requests` child: looked up once,
        not on each request (the labels' check and lock cost more than the count)."""
        self._fair = FairShare(settings.max_connections, settings.max_connections_per_host)
        connector = aiohttp.TCPConnector(
            limit=settings.max_connections,
            limit_per_host=settings.max_connections_per_host,
            resolver=GuardedDns(self.guard),
            ttl_dns_cache=30,
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            # No total here: `_one` bounds each request, its fair-share wait and its body by
            # requestTimeoutSeconds (or less) itself, so a second timer per request would
            # never fire first.
            timeout=aiohttp.ClientTimeout(
                total=None, sock_connect=settings.connect_timeout_seconds
            ),
            headers={"User-Agent": USER_AGENT},
            trust_env=False,  # proxies come from registry.proxy only, chosen per request
            auto_decompress=True,
        )

    async def aclose(self) -> None:
        """Close the session and its connections."""
        await self._session.close()
        await self._target_check.close()

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
        limit = self.settings.request_timeout_seconds
        waiting = request_seconds_left()
        if waiting is not None:
            # Past its request's deadline a lookup only fills the cache; it gets the grace.
            left = waiting + self.settings.lookup_grace_seconds
            if left <= 0:
                self._count(host, method, kind, "timeout")
                raise Timeout(f"{host}: the lookup outlived its request by lookupGraceSeconds")
            limit = min(limit, left)
        try:
            # The wait for a fair share counts against the same limit as the request.
            async with asyncio.timeout(limit), self._fair.slot(host):
                if system_cas.pending():  # `serve` reads them after it is ready
                    await system_cas.loaded()
                proxy = self.proxies.for_url(url) if self.proxies else None
                if proxy is not None:
                    await self._check_proxied_target(url)
                async with self._session.request(
                    method, url, headers=headers, allow_redirects=False, ssl=tls, proxy=proxy
                ) as response:
                    status = str(response.status)
                    self._note_ratelimit(host, response.headers)
                    most = cap if response.status < 300 else self.settings.max_error_bytes
                    body = (
                        b""  # a HEAD answer's Content-Length describes the GET body
                        if method == "HEAD"
                        else await _read(response, most, strict=response.status < 300, host=host)
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
            if url.scheme == "https" and "WRONG_VERSION_NUMBER" in str(error):
                # OpenSSL's words for a plain-HTTP answer to a TLS hello.
                raise Unreachable(
                    f"{host}: answered plain HTTP, not TLS; if it serves no TLS, set "
                    f'registry.hosts."{host}".plainHttp: true'
                ) from error
            raise Unreachable(
                f"{host}: {type(error).__name__}: {error_text(error, MAX_ERROR_IN_REASON)}"
            ) from error
        finally:
            self._count(host, method, kind, status)

    async def _check_proxied_target(self, url: yarl.URL) -> None:
        """The guard's checks for a URL the proxy will connect to: its name and addresses.

        Without a proxy the connector's resolver does this; through one, the target is never
        resolved by us unless we ask. Literal IPs were checked by `check_url` already.
        """
        host = url.host or ""
        port = url.port or (443 if url.scheme == "https" else 80)
        if _is_ip(host) or self.guard.name_allowed(host, port):
            return
        try:
            await self._target_check.resolve(host, port, family=socket.AF_UNSPEC)
        except OSError as error:
            # Where only the proxy resolves outside names, listing them by name is the way.
            raise Unreachable(
                f"{host[:100]}: cannot resolve it to check its address before using the proxy"
                f" ({type(error).__name__}); list it by name in registry.allowedNetworks if only"
                " the proxy can resolve it"
            ) from error

    def _label(self, host: str) -> str:
        if host in self._host_labels:
            return host
        if len(self._host_labels) >= _MAX_HOST_LABELS:
            return "other"
        self._host_labels.add(host)
        return host

    def _count(self, host: str, method: str, kind: str, status: str) -> None:
        if self._metrics is None:
            return
        key = (self._label(host), method, kind, status)
        child = self._counted.get(key)
        if child is None:
            child = self._counted[key] = self._metrics.registry_requests.labels(*key)
        child.inc()

    def _note_ratelimit(self, host: str, headers: CIMultiDictProxy[str]) -> None:
        value = headers.get("ratelimit-remaining")
        if value is None or self._metrics is None:
            return
        # Docker Hub sends `76;w=21600`: pulls left in a window of that many seconds.
        head = value.split(";", 1)[0].strip()
        if head.isdigit():
            self._metrics.registry_ratelimit_remaining.labels(self._label(host)).set(int(head))


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return False
    return True


async def _read(response: aiohttp.ClientResponse, cap: int, *, strict: bool, host: str) -> bytes:
    """Read at most `cap` bytes. With `strict`, a longer body is an error; else it is cut."""
    declared = response.content_length
    if strict and declared is not None and declared > cap:
        raise TooLarge(f"{host}: body of {declared} bytes exceeds the {cap}-byte cap")
    chunks: list[bytes] = []
    size = 0
    content = response.content
    while size <= cap:
        chunk = await content.read(min(65_536, cap + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if content.at_eof():
            break  # all read: a manifest comes whole in one read, and asking again costs more
    if size > cap:
        if strict:
            raise TooLarge(f"{host}: body exceeds the {cap}-byte cap")
        return b"".join(chunks)[:cap]
    return b"".join(chunks)
