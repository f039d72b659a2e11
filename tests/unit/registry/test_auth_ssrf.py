"""The SSRF guard decides which addresses registry requests (and token realms) may reach."""

from __future__ import annotations

import ipaddress
import socket

import pytest
import yarl
from aiohttp.abc import AbstractResolver, ResolveResult

from extender.registry.errors import AddressForbidden
from extender.registry.netguard import ALLOW_HINT, AddressGuard, GuardedDns, is_public

ADDRESSES = [
    ("8.8.8.8", True),
    ("2606:4700::1111", True),
    ("127.0.0.1", False),
    ("10.1.2.3", False),
    ("172.16.0.1", False),
    ("192.168.1.1", False),
    ("169.254.169.254", False),  # cloud metadata service
    ("100.64.0.1", False),  # carrier-grade NAT
    ("0.0.0.0", False),
    ("224.0.0.1", False),  # multicast is "global" to Python, never a registry
    ("255.255.255.255", False),
    ("::1", False),
    ("::", False),
    ("fe80::1", False),
    ("fc00::1", False),
    ("fec0::1", False),  # deprecated site-local, still routed inside old networks
    ("::ffff:127.0.0.1", False),  # IPv4-mapped loopback
    ("::ffff:169.254.169.254", False),
    ("::ffff:8.8.8.8", True),
    ("64:ff9b::7f00:1", False),  # NAT64 of 127.0.0.1
    ("2002:7f00:1::1", False),  # 6to4 of 127.0.0.1
    ("2001::1", False),  # Teredo
]


@pytest.mark.parametrize(("address", "expected"), ADDRESSES)
def test_only_ordinary_internet_addresses_are_public(address: str, expected: bool) -> None:
    """Loopback, private, link-local, CGNAT, multicast and embedded-IPv4 forms are not."""
    assert expected == is_public(ipaddress.ip_address(address))


def test_the_allow_list_opens_networks_and_mapped_forms_of_them() -> None:
    """An allow-listed CIDR also covers its IPv4-mapped IPv6 spelling."""
    guard = AddressGuard(["10.0.0.0/8", "127.0.0.1"])
    found = [
        guard.address_allowed(ipaddress.ip_address(a))
        for a in ("10.9.8.7", "::ffff:10.9.8.7", "127.0.0.1", "127.0.0.2", "192.168.0.1")
    ]
    assert [True, True, True, False, False] == found


def test_host_names_are_allow_listed_exactly_or_by_suffix() -> None:
    """`registry.local` and `*.svc.cluster.local` entries."""
    guard = AddressGuard(["registry.local", "*.svc.cluster.local"])
    names = ["registry.local", "REGISTRY.local.", "r.ns.svc.cluster.local", "svc.cluster.local",
             "evil-registry.local"]  # fmt: skip
    assert [True, True, True, False, False] == [guard.name_allowed(n) for n in names]


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:169.254.169.254]/",
        "http://127.0.0.1:5000/v2/",
        "http://[fe80::1%25eth0]/",
        "file:///etc/passwd",
        "gopher://example.com/",
        "http://user:pw@example.com/",
        # Legacy numeric IPv4 spellings that inet_aton (and so getaddrinfo) accepts.
        "http://2130706433/",
        "http://0177.0.0.1/",
        "http://0x7f.0.0.1/",
        "http://127.1/",
        "http://0/",
        "http://2852039166/latest/meta-data/",  # 169.254.169.254
        "http://169.254.169.254./",
    ],
)
def test_forbidden_urls_are_refused_before_any_connection(url: str) -> None:
    """Literal private IPs, odd schemes and URLs carrying credentials."""
    with pytest.raises(AddressForbidden):
        AddressGuard().check_url(yarl.URL(url))


def test_a_public_url_and_a_host_name_pass_the_literal_check() -> None:
    """Names are checked later, on what they resolve to."""
    guard = AddressGuard()
    for url in ("https://8.8.8.8/v2/", "https://134744072/v2/", "https://registry-1.docker.io/v2/"):
        guard.check_url(yarl.URL(url))
    assert guard.name_allowed("registry-1.docker.io") is False


class _CountingGuard(AddressGuard):
    """Counts the addresses it judges."""

    judged = 0

    def address_allowed(
        self, ip: ipaddress.IPv4Address | ipaddress.IPv6Address, port: int | None = None
    ) -> bool:
        self.judged += 1
        return super().address_allowed(ip, port)


def test_a_hosts_verdict_is_worked_out_once_and_holds_for_every_request_to_it() -> None:
    """Every registry request is checked; the host's verdict depends on the host, the port and
    the allow-list only, so it is judged once (issue 32), refusals included, with their words."""
    guard = _CountingGuard(["127.0.0.1:5000"])
    for path in ("/v2/", "/v2/a/manifests/1", "/v2/b/manifests/2"):
        guard.check_url(yarl.URL(f"https://127.0.0.1:5000{path}"))
    refusals = []
    for path in ("/v2/", "/v2/a/manifests/1"):
        with pytest.raises(AddressForbidden) as caught:
            guard.check_url(yarl.URL(f"https://127.0.0.1:5001{path}"))
        refusals.append(str(caught.value))
    with pytest.raises(AddressForbidden):
        guard.check_url(yarl.URL("ftp://127.0.0.1:5000/v2/"))  # the scheme, each time
    expected = ["refusing to contact 127.0.0.1: not a public address; " + ALLOW_HINT] * 2
    assert (2, expected) == (guard.judged, refusals)


class _Dns(AbstractResolver):
    """A resolver that answers every name with `addresses` (what a DNS server could say)."""

    def __init__(self, *addresses: str) -> None:
        self.addresses = addresses

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        return [
            ResolveResult(hostname=host, host=a, port=port, family=family, proto=0, flags=0)
            for a in self.addresses
        ]

    async def close(self) -> None:
        pass


async def test_a_name_resolving_to_a_public_and_a_loopback_address_is_refused():
    """Every address must pass: a proxy would resolve the name again and may pick 127.0.0.1."""
    resolver = GuardedDns(AddressGuard(), _Dns("93.184.215.14", "127.0.0.1"))
    with pytest.raises(AddressForbidden, match=r"non-public address 127\.0\.0\.1"):
        await resolver.resolve("mixed.example.com", 443)


async def test_a_name_whose_every_address_is_public_or_listed_passes():
    """A public and an allow-listed address: both are returned, nothing is dropped."""
    resolver = GuardedDns(AddressGuard(["10.0.0.0/8"]), _Dns("93.184.215.14", "10.1.2.3"))
    assert ["93.184.215.14", "10.1.2.3"] == [
        r["host"] for r in await resolver.resolve("ok.example.com", 443)
    ]
