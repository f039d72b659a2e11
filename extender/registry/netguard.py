"""The SSRF guard: registry requests go only to public addresses, or to allow-listed ones.

Image names come from anyone who can create a pod, so every address is checked: literal
IPs in URLs, every address DNS gives a host name (GuardedDns, in the connector) and every
redirect hop.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable

import yarl
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import ThreadedResolver

from extender.config.registry_settings import split_port
from extender.registry.errors import AddressForbidden

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_MAX_JUDGED_HOSTS = 4096
"""URL hosts whose verdict `AddressGuard.check_url` keeps."""


def is_public(ip: IPAddress) -> bool:
    """Whether `ip` is an ordinary internet address (not loopback, private, link-local ...).

    Addresses that embed an IPv4 address (mapped, 6to4, NAT64) are judged by it.
    """
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return is_public(ip.ipv4_mapped)
        if ip in _NAT64:
            return is_public(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
        if ip.sixtofour is not None and not is_public(ip.sixtofour):
            return False
        if ip.teredo is not None or ip.is_site_local:
            return False
    return ip.is_global and not (
        ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_private
    )


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class AddressGuard:
    """Decides which hosts and addresses registry requests may reach.

    An allow-list entry may name a port (`registry.local:5000`); it then allows that port
    only, so listing one in-cluster registry does not open every other service on its host.
    """

    def __init__(self, allowed: Iterable[str] = ()) -> None:
        self._refusals: dict[tuple[str, int | None], str] = {}
        """(URL host, port) -> why `check_url` refuses it, "" when it does not: the answer
        depends on them and the allow-list only, and working it out (parsing the host as an
        address, then judging it) cost a registry request more than its own checks."""
        self._networks: list[tuple[Network, int | None]] = []
        self._names: list[tuple[str, int | None]] = []
        self._suffixes: list[tuple[str, int | None]] = []
        for entry in allowed:
            host, port = split_port(entry)
            try:
                self._networks.append((ipaddress.ip_network(host, strict=False), port))
            except ValueError:
                name = host.lower().rstrip(".")
                if name.startswith("*."):
                    self._suffixes.append((name[1:], port))
                else:
                    self._names.append((name, port))

    def name_allowed(self, host: str, port: int | None = None) -> bool:
        """Whether a host name is allow-listed (on `port`), so any address it resolves to is fine.

        With `port` None only entries without a port count.
        """
        name = host.lower().rstrip(".")
        return any(
            name == listed and _port_matches(allowed, port) for listed, allowed in self._names
        ) or any(
            name.endswith(suffix) and _port_matches(allowed, port)
            for suffix, allowed in self._suffixes
        )

    def listed(self, host: str, port: int | None = None) -> bool:
        """Whether `host` (a name or a literal IP) is named by the allow-list itself.

        Stricter than passing the guard: a public address passes but is not listed.
        """
        try:
            ip = ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
        except ValueError:
            return self.name_allowed(host, port)
        return self._in_networks(ip, port)

    def address_allowed(self, ip: IPAddress, port: int | None = None) -> bool:
        """Whether a connection to `ip` (on `port`) is allowed."""
        if is_public(ip):
            return True
        if self._in_networks(ip, port):
            return True
        return (
            isinstance(ip, ipaddress.IPv6Address)
            and ip.ipv4_mapped is not None
            and self._in_networks(ip.ipv4_mapped, port)
        )

    def _in_networks(self, ip: IPAddress, port: int | None) -> bool:
        return any(
            ip.version == net.version and ip in net and _port_matches(allowed, port)
            for net, allowed in self._networks
        )

    def check_url(self, url: yarl.URL) -> None:
        """Refuse URLs that are not http(s) or that name a forbidden literal IP.

        Host names are checked later, on the addresses they resolve to.
        """
        if url.scheme not in ("http", "https") or not url.host:
            raise AddressForbidden(f"refusing URL with scheme {url.scheme!r}: only http(s) is used")
        if url.user is not None or url.password is not None:
            raise AddressForbidden("refusing URL that carries credentials")
        key = (url.host, url.port)
        refusal = self._refusals.get(key)
        if refusal is None:
            if len(self._refusals) >= _MAX_JUDGED_HOSTS:
                self._refusals.clear()  # hosts are user input: a flood starts afresh
            refusal = self._refusals[key] = self._judge(url.host, url.port)
        if refusal:
            raise AddressForbidden(refusal)

    def _judge(self, url_host: str, port: int | None) -> str:
        """Why a URL naming `url_host` on `port` is refused, or "" if it is not (yet: a name
        is checked on the addresses it resolves to)."""
        host = url_host.strip("[]")
        try:
            ip: IPAddress = ipaddress.ip_address(host.split("%", 1)[0])
        except ValueError:
            legacy = _legacy_ipv4(host)
            if legacy is None:
                return ""
            ip = legacy
        if "%" in host or not self.address_allowed(ip, port):
            return f"refusing to contact {host}: not a public address; {ALLOW_HINT}"
        return ""


ALLOW_HINT = (
    "if this registry is yours, list it in registry.allowedNetworks "
    "(ARCHFIT_REGISTRY__ALLOWED_NETWORKS=host,10.0.0.0/8)"
)
"""Every refusal names the setting that lifts it."""


class GuardedDns(AbstractResolver):
    """A host name's addresses from DNS (getaddrinfo; aiohttp's connector calls this its
    resolver), and the name refused if the guard refuses any of its addresses.

    Every address, not just one: through a proxy the proxy resolves the name again and may
    pick the refused one; without one, a name that mixes public and private addresses is
    not a public registry's (DNS rebinding included).
    """

    def __init__(self, guard: AddressGuard, inner: AbstractResolver | None = None) -> None:
        self._guard = guard
        self._inner = inner or ThreadedResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        results = await self._inner.resolve(host, port, family)
        if self._guard.name_allowed(host, port):
            return results
        refused = [r for r in results if not self._guard.address_allowed(_ip(r["host"]), port)]
        if refused:
            raise AddressForbidden(
                f"refusing to contact {host[:100]}: it resolves to non-public address"
                f" {refused[0]['host']}; {ALLOW_HINT}"
            )
        return results

    async def close(self) -> None:
        await self._inner.close()


def _port_matches(allowed: int | None, port: int | None) -> bool:
    """An entry without a port allows every port; one with a port allows only it."""
    return allowed is None or allowed == port


def _legacy_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """What inet_aton, and so getaddrinfo, reads into `2130706433`, `0177.1`, `127.0.0.1.`.

    Some aiohttp versions connect to such hosts without asking the resolver.
    """
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host.removesuffix(".")))
    except (OSError, ValueError):
        return None


def _ip(text: str) -> IPAddress:
    return ipaddress.ip_address(text.split("%", 1)[0])
