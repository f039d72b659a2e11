"""An egress proxy (a real tinyproxy) in front of the registry, with the SSRF guard still on.

tinyproxy was chosen over a hand-written CONNECT proxy because it is a real, widely used
forward proxy (Debian package), so what it relays is what a corporate proxy would see.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer

from extender.config.registry_settings import HostSettings, ProxySettings
from extender.registry.errors import AddressForbidden, Unreachable
from tests.integration.conftest import ResolverFactory, local_settings, pod
from tests.support.faults import FaultRegistry
from tests.support.fixtures import PublishedRegistry
from tests.support.proxy import PROXY_ADDRESS, TinyProxy, loopback_name
from tests.support.tls import make_serving_cert

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tinyproxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TinyProxy]:
    """tinyproxy on 127.0.0.3."""
    proxy = TinyProxy.start(tmp_path_factory.mktemp("tinyproxy"))
    try:
        yield proxy
    finally:
        proxy.stop()


def by_name(registry: PublishedRegistry, reference: str) -> tuple[str, str]:
    """The registry's host under a loopback name (Go never proxies 127.0.0.1), and the image."""
    host = f"{loopback_name()}:{registry.registry.host.rsplit(':', 1)[1]}"
    return host, reference.replace(registry.registry.host, host, 1)


def proxied(host: str, proxy: TinyProxy, *allowed: str, **proxy_fields: str):
    """Settings sending plain-http registry traffic through the proxy."""
    return local_settings(
        host,
        hosts={host: HostSettings(plain_http=True)},
        allowed_networks=allowed,
        proxy=ProxySettings(http_proxy=proxy.url, **proxy_fields),
    )


async def test_the_proxy_relays_every_registry_request(
    public_registry: PublishedRegistry, tinyproxy: TinyProxy, make_resolver: ResolverFactory
) -> None:
    """Tag, manifest and config all go through the proxy, addressed by the registry's name."""
    image = public_registry.catalog.single
    host, reference = by_name(public_registry, image.reference)
    settings = proxied(host, tinyproxy, f"{PROXY_ADDRESS}/32", "127.0.0.1/32")
    resolver = await make_resolver(settings)
    mark = tinyproxy.mark()
    platforms = await resolver.platforms(reference, pod())
    relayed = tinyproxy.requests_since(mark)
    assert image.platforms == {str(p) for p in platforms}
    assert {("GET", "manifests"), ("GET", "blobs")} == {
        (method, url.split("/")[-2]) for method, url in relayed
    }
    assert all(url.startswith(f"http://{host}/v2/") for _, url in relayed)


async def test_a_target_resolving_to_a_refused_address_is_refused_through_the_proxy(
    public_registry: PublishedRegistry, tinyproxy: TinyProxy, make_resolver: ResolverFactory
) -> None:
    """Only the proxy is allowed: the registry's name resolves to 127.0.0.1, so no request."""
    host, reference = by_name(public_registry, public_registry.catalog.single.reference)
    resolver = await make_resolver(proxied(host, tinyproxy, f"{PROXY_ADDRESS}/32"))
    mark = tinyproxy.mark()
    with pytest.raises(AddressForbidden):
        await resolver.platforms(reference, pod())
    assert [] == tinyproxy.requests_since(mark)


@pytest.mark.parametrize(
    ("host", "error", "message"),
    [
        # The cloud metadata address, refused as a literal IP.
        ("169.254.169.254", AddressForbidden, "not a public address"),
        # A name only the proxy might resolve: not handed over unchecked; the error says why.
        ("registry.archfit.invalid", Unreachable, r"list it by name in registry\.allowedNetworks"),
    ],
)
async def test_a_target_the_guard_cannot_vouch_for_never_reaches_the_proxy(
    tinyproxy: TinyProxy,
    make_resolver: ResolverFactory,
    host: str,
    error: type[Exception],
    message: str,
) -> None:
    """Refused before anything is sent to the proxy."""
    resolver = await make_resolver(proxied(host, tinyproxy, f"{PROXY_ADDRESS}/32"))
    mark = tinyproxy.mark()
    with pytest.raises(error, match=message):
        await resolver.platforms(f"{host}/team/app:1", pod())
    assert [] == tinyproxy.requests_since(mark)


async def test_no_proxy_hosts_are_reached_directly(
    public_registry: PublishedRegistry, tinyproxy: TinyProxy, make_resolver: ResolverFactory
) -> None:
    """A NO_PROXY entry naming the registry sends it around the proxy."""
    image = public_registry.catalog.single
    host, reference = by_name(public_registry, image.reference)
    name = host.split(":", 1)[0]
    settings = proxied(host, tinyproxy, f"{PROXY_ADDRESS}/32", "127.0.0.1/32", no_proxy=name)
    resolver = await make_resolver(settings)
    mark = tinyproxy.mark()
    platforms = await resolver.platforms(reference, pod())
    assert (image.platforms, []) == ({str(p) for p in platforms}, tinyproxy.requests_since(mark))


async def test_the_proxy_can_come_from_the_environment(
    public_registry: PublishedRegistry,
    tinyproxy: TinyProxy,
    make_resolver: ResolverFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """fromEnvironment reads HTTP_PROXY as containerd does."""
    monkeypatch.setenv("HTTP_PROXY", f"{PROXY_ADDRESS}:{tinyproxy.port}")  # no scheme: http
    image = public_registry.catalog.single
    host, reference = by_name(public_registry, image.reference)
    settings = local_settings(
        host,
        hosts={host: HostSettings(plain_http=True)},
        allowed_networks=(f"{PROXY_ADDRESS}/32", "127.0.0.1/32"),
        proxy=ProxySettings(from_environment=True),
    )
    resolver = await make_resolver(settings)
    mark = tinyproxy.mark()
    await resolver.platforms(reference, pod())
    assert 2 == len(tinyproxy.requests_since(mark))


async def test_a_proxy_missing_from_allowed_networks_stops_the_start(
    tinyproxy: TinyProxy, make_resolver: ResolverFactory, tmp_path: Path
) -> None:
    """Trusting a proxy is written down: one not in allowedNetworks is a config error."""
    settings = local_settings(
        "registry.example.com", proxy=ProxySettings(https_proxy=tinyproxy.url)
    )
    with pytest.raises(ValueError, match=r"registry\.allowedNetworks") as caught:
        await make_resolver(settings)
    assert "registry.proxy" in str(caught.value)


async def test_an_https_registry_is_reached_through_a_connect_tunnel(
    tinyproxy: TinyProxy, make_resolver: ResolverFactory, tmp_path: Path
) -> None:
    """CONNECT to the registry's name, TLS verified end to end against its own CA."""
    name = loopback_name()
    cert = make_serving_cert(tmp_path / "tls", dns_names=(name,))
    registry = FaultRegistry()
    registry.image("tls/app", "1", "linux/arm64")
    server = TestServer(registry.app(), host="127.0.0.1")
    await server.start_server(ssl=cert.server_context())
    try:
        host = f"{name}:{server.port}"
        settings = local_settings(
            hosts={host: HostSettings(ca_bundle=str(cert.ca_bundle))},
            allowed_networks=(f"{PROXY_ADDRESS}/32", "127.0.0.1/32"),
            proxy=ProxySettings(https_proxy=tinyproxy.url),
        )
        resolver = await make_resolver(settings)
        mark = tinyproxy.mark()
        platforms = await resolver.platforms(f"{host}/tls/app:1", pod())
        tunnels = set(tinyproxy.requests_since(mark))
    finally:
        await server.close()
    assert ({"linux/arm64"}, {("CONNECT", host)}) == ({str(p) for p in platforms}, tunnels)
