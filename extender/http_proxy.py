"""Which proxy an outgoing request goes through: Go's `http.ProxyFromEnvironment` rules
(golang.org/x/net/http/httpproxy), the ones client-go, kubectl and containerd follow.

- HTTPS_PROXY serves https URLs and HTTP_PROXY plain-http ones, the upper-case name first
  (an empty value counts as unset); ALL_PROXY is not read. A value without a scheme means
  `http://`. Under CGI (REQUEST_METHOD set) HTTP_PROXY is refused.
- `localhost` and loopback addresses never go through a proxy.
- NO_PROXY, comma-separated: `*`; a CIDR (matches literal IPs only); an IP with an optional
  port; else a host name with an optional port, which matches itself and its subdomains, or
  only subdomains when written `.example.com` or `*.example.com`. A name never matches an IP.

One rule set for the process: the Kubernetes client and the registry client both ask here.
Pure: the environment is handed in.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field

from extender.urls import GoURL, URLError, parse

_Address = ipaddress.IPv4Address | ipaddress.IPv6Address
_Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_DEFAULT_PORTS = {"http": "80", "https": "443", "socks5": "1080"}


def _first(environ: Mapping[str, str], *names: str) -> str:
    return next((environ[name] for name in names if environ.get(name)), "")


def parse_proxy(text: str) -> GoURL | None:
    """A proxy setting as Go's httpproxy reads it: a URL, or `host:port` meaning
    `http://host:port`; None when empty. Raises ValueError for an address Go refuses."""
    if not text:
        return None
    try:
        found: GoURL | None = parse(text)
        error: URLError | None = None
    except URLError as failed:
        found, error = None, failed
    if found is None or not found.scheme or not found.host:
        try:
            return parse("http://" + text)
        except URLError:
            pass
    if error is not None or found is None:
        raise ValueError(f"invalid proxy address {text!r}: {error}")
    return found


def _ip(text: str) -> _Address | None:
    """Go's net.ParseIP: dotted IPv4 or IPv6, no zone; an IPv4-mapped IPv6 is its IPv4."""
    if "%" in text:
        return None
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _cidr(text: str) -> _Network | None:
    """Go's net.ParseCIDR: an address, `/` and a decimal prefix length."""
    address, slash, bits = text.partition("/")
    if not slash or not bits.isdigit() or _ip(address) is None:
        return None
    try:
        return ipaddress.ip_network(f"{address}/{int(bits)}", strict=False)
    except ValueError:
        return None


def _split_host_port(text: str) -> tuple[str, str] | None:
    """Go's net.SplitHostPort, or None where it fails."""
    if text.startswith("["):
        close = text.find("]")
        if close < 0 or text[close + 1 : close + 2] != ":":
            return None
        host, port = text[1:close], text[close + 2 :]
        return (host, port) if ":" not in port else None
    colon = text.rfind(":")
    if colon < 0 or ":" in text[:colon]:
        return None
    return text[:colon], text[colon + 1 :]


def _ascii(host: str) -> str:
    """A host name in ASCII (IDNA), label by label, as Go's idna.Lookup.ToASCII gives it."""
    if host.isascii():
        return host
    try:
        return ".".join(
            label.encode("idna").decode("ascii") if label else "" for label in host.split(".")
        )
    except UnicodeError:
        return host


@dataclass(frozen=True, slots=True)
class _Domain:
    suffix: str
    port: str
    bare_too: bool


@dataclass(frozen=True, slots=True)
class NoProxy:
    """A parsed NO_PROXY value."""

    everything: bool = False
    networks: tuple[_Network, ...] = ()
    addresses: tuple[tuple[_Address, str], ...] = ()
    domains: tuple[_Domain, ...] = ()

    @classmethod
    def parse(cls, text: str) -> NoProxy:
        networks: list[_Network] = []
        addresses: list[tuple[_Address, str]] = []
        domains: list[_Domain] = []
        for raw in text.split(","):
            entry = raw.strip().lower()
            if not entry:
                continue
            if entry == "*":
                return cls(everything=True)
            network = _cidr(entry)
            if network is not None:
                networks.append(network)
                continue
            split = _split_host_port(entry)
            if split is not None:
                host, port = split
                if not host:
                    continue
                if host.startswith("[") and host.endswith("]"):
                    host = host[1:-1]
            else:
                host, port = entry, ""
            address = _ip(host)
            if address is not None:
                addresses.append((address, port))
                continue
            if not host:
                continue
            host = host.removeprefix("*") if host.startswith("*.") else host
            bare_too = not host.startswith(".")
            domains.append(_Domain(_ascii(host if not bare_too else "." + host), port, bare_too))
        return cls(False, tuple(networks), tuple(addresses), tuple(domains))

    def bypasses(self, host: str, port: str) -> bool:
        """Whether a request to host:port goes direct (httpproxy's useProxy, negated)."""
        if host == "localhost":
            return True
        address = _ip(host.split("%", 1)[0]) if host else None
        if address is not None and address.is_loopback:
            return True
        if self.everything:
            return True
        lowered = host.strip().lower()
        if address is not None:  # a name never matches an address
            return any(
                address in network
                for network in self.networks
                if network.version == address.version
            ) or any(address == ip and (not want or want == port) for ip, want in self.addresses)
        return any(
            (lowered.endswith(d.suffix) or (d.bare_too and lowered == d.suffix[1:]))
            and (not d.port or d.port == port)
            for d in self.domains
        )


@dataclass(frozen=True, slots=True)
class ProxyConfig:
    """httpproxy.Config: the proxies and the hosts that bypass them."""

    https_proxy: str = ""
    http_proxy: str = ""
    no_proxy: str = ""
    cgi: bool = False

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> ProxyConfig:
        return cls(
            https_proxy=_first(environ, "HTTPS_PROXY", "https_proxy"),
            http_proxy=_first(environ, "HTTP_PROXY", "http_proxy"),
            no_proxy=_first(environ, "NO_PROXY", "no_proxy"),
            cgi=bool(environ.get("REQUEST_METHOD")),
        )

    def rules(self) -> ProxyRules:
        def quiet(text: str) -> GoURL | None:
            try:
                return parse_proxy(text)
            except ValueError:
                return None  # httpproxy leaves a proxy it cannot parse unset

        return ProxyRules(quiet(self.https_proxy), quiet(self.http_proxy),
                          NoProxy.parse(self.no_proxy), self.cgi)  # fmt: skip


@dataclass(frozen=True, slots=True)
class ProxyRules:
    """The parsed config: `proxy_for(url)` is httpproxy's ProxyFunc."""

    https: GoURL | None = None
    http: GoURL | None = None
    no_proxy: NoProxy = field(default_factory=NoProxy)
    cgi: bool = False

    def proxy_for(self, url: GoURL) -> GoURL | None:
        """The proxy for `url`, or None to connect directly. Raises ValueError for a plain
        http URL under CGI with HTTP_PROXY set."""
        if url.scheme == "https":
            proxy = self.https
        elif url.scheme == "http":
            proxy = self.http
            if proxy is not None and self.cgi:
                raise ValueError(
                    "refusing to use HTTP_PROXY value in CGI environment; see "
                    "golang.org/s/cgihttpproxy"
                )
        else:
            proxy = None
        if proxy is None:
            return None
        host = _ascii(url.hostname)
        port = url.port or _DEFAULT_PORTS.get(url.scheme, "")
        return None if self.no_proxy.bypasses(host, port) else proxy


def sloppy_cidrs(environ: Mapping[str, str]) -> tuple[_Network, ...]:
    """The CIDRs of NO_PROXY (else no_proxy) as client-go's NewProxierWithNoProxyCIDR reads
    them around the environment's rules: entries taken as they are (no spaces trimmed), an
    IPv4 octet's leading zeros allowed."""
    found = []
    for entry in (environ.get("NO_PROXY") or environ.get("no_proxy") or "").split(","):
        address, slash, bits = entry.partition("/")
        if not slash or not bits.isdigit():
            continue
        octets = address.split(".")
        if len(octets) == 4 and all(o.isdigit() and int(o) <= 255 for o in octets):
            address = ".".join(str(int(o)) for o in octets)
        network = _cidr(f"{address}/{bits}")
        if network is not None:
            found.append(network)
    return tuple(found)
