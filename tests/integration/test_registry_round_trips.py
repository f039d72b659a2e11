"""Round trips per lookup against a real registry, counted from its own log: they cannot grow back.

A never-seen tag costs one GET (digest and manifest together), plus a single-arch image's
config blob; a registry asking for auth adds its 401 and a token fetch the first time only,
and a new repository on a host already known skips the 401. A cached tag costs nothing, and
one past its TTL is revalidated with one HEAD (no Docker Hub pull).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from extender.config.registry_settings import CacheSettings
from extender.registry.client import RegistryClient
from extender.registry.hosts import HostTable
from extender.registry.pure.reference import parse
from extender.registry.transport import Transport
from tests.integration.conftest import ResolverFactory, Secrets, local_settings, pod
from tests.support.clock import FakeClock
from tests.support.fixtures import PublishedRegistry
from tests.support.pull_secrets import pull_secret
from tests.support.registry import RegistryProcess
from tests.support.relay import StallingRelay
from tests.support.tokens import TokenServer

pytestmark = pytest.mark.integration

Seen = list[tuple[str, str, int]]
"""(method, manifests|blobs, status) of each request, in the order the registry logged them."""

INDEX_COLD: Seen = [("GET", "manifests", 200)]
SINGLE_COLD: Seen = [("GET", "manifests", 200), ("GET", "blobs", 200)]
CHALLENGED: Seen = [("GET", "manifests", 401)]
REVALIDATED: Seen = [("HEAD", "manifests", 200)]


@dataclass(frozen=True)
class Case:
    """One registry and how archfit reaches it; the images are `<prefix>/multi` (an OCI
    index) and `<prefix>/single` (a Docker manifest, its platform in its config blob)."""

    registry: str
    """The session fixture serving it."""
    prefix: str
    with_secret: bool
    index_cold: Seen
    """The first lookup on the host: an index."""
    single_cold: Seen
    """Then a single-arch image in another repository of the same host."""
    tokens: tuple[int, int]
    """Token fetches during those two lookups."""


CASES = {
    "anonymous": Case("public_registry", "archfit", False, INDEX_COLD, SINGLE_COLD, (0, 0)),
    "bearer token, pull secret": Case(
        "token_registry", "private", True, CHALLENGED + INDEX_COLD, SINGLE_COLD, (1, 1)
    ),
    "bearer token, anonymous": Case(
        "token_registry", "public", False, CHALLENGED + INDEX_COLD, SINGLE_COLD, (1, 1)
    ),
    "basic": Case("basic_registry", "private", True, CHALLENGED + INDEX_COLD, SINGLE_COLD, (0, 0)),
}


@pytest.mark.parametrize("name", CASES)
async def test_each_lookup_costs_exactly_its_round_trips_cold_warm_and_revalidated(
    name: str,
    request: pytest.FixtureRequest,
    make_resolver: ResolverFactory,
    token_server: TokenServer,
) -> None:
    """Cold: one GET (+ config blob, + 401 and token the first time); warm: none; past the
    tag's TTL: one HEAD."""
    case = CASES[name]
    published: PublishedRegistry = request.getfixturevalue(case.registry)
    registry = published.registry
    secrets = Secrets()
    if case.with_secret:
        user, password = published.credentials or ("", "")
        secrets.secrets["regcred"] = pull_secret("regcred", registry.host, user, password)
    clock = FakeClock()
    resolver = await make_resolver(local_settings(registry.host), secrets=secrets, clock=clock)
    images = [f"{registry.host}/{case.prefix}/{repo}:1.0" for repo in ("multi", "single")]
    pull = pod("regcred") if case.with_secret else pod()

    async def phase(image: str) -> tuple[Seen, int]:
        mark, tokens = registry.mark(), len(token_server.requests)
        await resolver.platforms(image, pull)
        return _seen(registry, mark), len(token_server.requests) - tokens

    cold = [await phase(image) for image in images]
    warm = [await phase(image) for image in images]
    clock.advance(301)  # past cache.tagTtlSeconds: the digests are known, their facts cached
    revalidated = [await phase(image) for image in images]
    expected = (
        [(case.index_cold, case.tokens[0]), (case.single_cold, case.tokens[1])],
        [([], 0), ([], 0)],
        [(REVALIDATED, 0), (REVALIDATED, 0)],
    )
    assert expected == (cold, warm, revalidated)


def _seen(registry: RegistryProcess, mark: int) -> Seen:
    return [
        (r.method, "blobs" if "/blobs/" in r.path else "manifests", r.status)
        for r in registry.requests_since(mark)
    ]


async def test_a_hosts_lookups_share_one_connection(
    public_registry: PublishedRegistry, make_resolver: ResolverFactory
) -> None:
    """Keep-alive: three cold lookups on one host, five requests, one TCP connection."""
    upstream_host, upstream_port = public_registry.registry.host.rsplit(":", 1)
    relay = await StallingRelay(upstream_host, int(upstream_port)).start()
    try:
        host = f"127.0.0.1:{relay.port}"
        resolver = await make_resolver(local_settings(host))
        for repo in ("multi", "single", "listed"):
            await resolver.platforms(f"{host}/archfit/{repo}:1.0", pod())
        assert 1 == relay.connections
    finally:
        await relay.close()


async def test_without_stale_answers_a_tag_past_its_ttl_is_still_revalidated_with_a_head(
    public_registry: PublishedRegistry, make_resolver: ResolverFactory
) -> None:
    """staleIfErrorSeconds 0 keeps no answer for a failing registry, but the tag's last digest
    still says a HEAD will do, not a GET (a Docker Hub pull)."""
    registry = public_registry.registry
    clock = FakeClock()
    cache = CacheSettings(stale_if_error_seconds=0)
    resolver = await make_resolver(local_settings(registry.host), cache, clock=clock)
    image = public_registry.catalog.manifest_list.reference
    await resolver.platforms(image, pod())
    clock.advance(cache.tag_ttl_seconds + 1)
    mark = registry.mark()
    await resolver.platforms(image, pod())
    assert REVALIDATED == _seen(registry, mark)


async def test_a_tag_revalidated_after_its_repositorys_challenge_expired_skips_the_401(
    token_registry: PublishedRegistry, token_server: TokenServer
) -> None:
    """Five minutes on, the repository's own challenge is gone but its host's working one is
    lent for an hour: a new token (the old one expired too) and one HEAD, no 401."""
    registry = token_registry.registry
    settings = local_settings(registry.host)
    clock = FakeClock()
    transport = Transport(settings)
    client = RegistryClient(transport, HostTable(settings), clock)
    ref = parse(f"{registry.host}/public/multi:1.0")
    try:
        await client.resolve_tag(ref, ())
        clock.advance(301)
        mark, tokens = registry.mark(), len(token_server.requests)
        await client.resolve_tag(ref, ())
        later = (_seen(registry, mark), len(token_server.requests) - tokens)
    finally:
        await client.aclose()
        await transport.aclose()
    assert (REVALIDATED, 1) == later
