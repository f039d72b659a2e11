"""Which egress proxy, if any, a registry URL goes through: Go's httpproxy rules, as containerd.

HTTPS_PROXY serves https URLs and HTTP_PROXY plain-http ones; NO_PROXY lists hosts reached
directly: `*`, IPs, CIDRs (matched against literal IPs only), `host[:port]` (the host and
its subdomains) and `.domain` or `*.domain` (subdomains only). `localhost` and loopback IPs
never use a proxy. Pure, apart from reading the environment it is handed.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass

import yarl

from extender.registry.settings import ProxySettings

_DEFAULT_PORTS = {"http": 80, "https": 443}
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def proxy_url(text: str) -> yarl.URL:
    """A proxy setting as a URL; like Go, a value without a scheme means http://."""
    return yarl.URL(text if "://" in text else f"http://{text}")


@dataclass(frozen=True, slots=True)
class _Domain:
    suffix: str
    """`.example.com`"""
    port: int | None
    bare_too: bool
    """Whether `example.com` itself matches, not only its subdomains."""


@dataclass(frozen=True, slots=True)
class NoProxy:
    """A parsed NO_PROXY value."""

    everything: bool = False
    networks: tuple[IPNetwork, ...] = ()
    addresses: tuple[tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int | None], ...] = ()
    domains: tuple[_Domain, ...] = ()

    @classmethod
    def parse(cls, text: str) -> NoProxy:
        networks: list[IPNetwork] = []
        addresses: list[tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int | None]] = []
        domains: list[_Domain] = []
        for raw in text.split(","):
            entry = raw.strip().lower()
            if not entry:
                continue
            if entry == "*":
                return cls(everything=True)
            if "/" in entry:
                try:
                    networks.append(ipaddress.ip_network(entry, strict=False))
                    continue
                except ValueError:
                    pass  # not a CIDR: Go then reads it as a host name, and so do we
            host, port = _split_host_port(entry)
            try:
                addresses.append((ipaddress.ip_address(host.strip("[]")), port))
                continue
            except ValueError:
                pass
            host = host.removeprefix("*")
            bare_too = not host.startswith(".")
            domains.append(_Domain("." + host.lstrip("."), port, bare_too))
        return cls(False, tuple(networks), tuple(addresses), tuple(domains))

    def bypasses(self, host: str, port: int) -> bool:
        """Whether a request to host:port goes direct."""
        host = host.lower().strip("[]").rstrip(".")
        if host == "localhost":
            return True
        try:
            ip = ipaddress.ip_address(host.split("%", 1)[0])
        except ValueError:
            ip = None
        if ip is not None and ip.is_loopback:
            return True
        if self.everything:
            return True
        if ip is not None:
            if any(ip.version == net.version and ip in net for net in self.networks):
                return True
            return any(ip == a and p in (None, port) for a, p in self.addresses)
        return any(
            (host.endswith(d.suffix) or (d.bare_too and host == d.suffix[1:]))
            and d.port in (None, port)
            for d in self.domains
        )


@dataclass(frozen=True, slots=True)
class ProxyRoutes:
    """The proxies in force and the hosts that bypass them."""

    https: yarl.URL | None = None
    http: yarl.URL | None = None
    no_proxy: NoProxy = NoProxy()

    def __bool__(self) -> bool:
        return self.https is not None or self.http is not None

    def for_url(self, url: yarl.URL) -> yarl.URL | None:
        """The proxy for `url`, or None to connect directly."""
        proxy = self.https if url.scheme == "https" else self.http
        if proxy is None or not url.host:
            return None
        port = url.port or _DEFAULT_PORTS.get(url.scheme, 0)
        return None if self.no_proxy.bypasses(url.host, port) else proxy


def routes(settings: ProxySettings, environ: Mapping[str, str]) -> ProxyRoutes:
    """The proxies of the settings; with `fromEnvironment`, the environment fills the gaps."""

    def pick(value: str, *names: str) -> str:
        if value or not settings.from_environment:
            return value
        return next((environ[n] for n in names if environ.get(n)), "")

    https = pick(settings.https_proxy, "HTTPS_PROXY", "https_proxy")
    http = pick(settings.http_proxy, "HTTP_PROXY", "http_proxy")
    no_proxy = pick(settings.no_proxy, "NO_PROXY", "no_proxy")
    return ProxyRoutes(
        https=proxy_url(https) if https else None,
        http=proxy_url(http) if http else None,
        no_proxy=NoProxy.parse(no_proxy),
    )


def _split_host_port(entry: str) -> tuple[str, int | None]:
    if entry.startswith("["):
        inner, _, rest = entry[1:].partition("]")
        port = rest.removeprefix(":")
        return inner, int(port) if port.isdigit() else None
    host, colon, port = entry.rpartition(":")
    if colon and host and port.isdigit() and host.count(":") == 0:
        return host, int(port)
    return entry, None
