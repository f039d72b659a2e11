"""Resolving images from a real distribution registry: exact platforms, exact request counts."""

from __future__ import annotations

import asyncio

import pytest

from extender.config.registry_settings import RegistrySettings
from extender.core.platforms import Unknown
from extender.metrics import Metrics
from extender.registry.errors import AddressForbidden, NotFound
from extender.resolution.within_deadline import Resolution
from tests.integration.conftest import POD, ResolverFactory, local_settings
from tests.support.fixtures import PublishedRegistry
from tests.support.images import Pusher

pytestmark = pytest.mark.integration

CATALOG_NAMES = [
    "multiarch_oci",
    "manifest_list",
    "single",
    "with_attestations",
    "armv7_only",
    "amd64_only",
    "pinned_child",
    "artifact",
]


@pytest.mark.parametrize("name", CATALOG_NAMES)
async def test_every_catalog_image_resolves_to_exactly_its_platforms(
    public_registry: PublishedRegistry, make_resolver: ResolverFactory, name: str
) -> None:
    """OCI index, Docker list, single manifest, attestations, pinned child, artifact."""
    image = getattr(public_registry.catalog, name)
    resolver = await make_resolver(local_settings(public_registry.registry.host))
    resolved = await resolver.resolve(image.reference, POD)
    expected = (image.digest, image.platforms, name == "artifact")
    assert expected == (resolved.digest, {str(p) for p in resolved.platforms}, resolved.artifact)


async def test_a_never_seen_multi_arch_tag_costs_one_get_and_no_blob(
    public_registry: PublishedRegistry, make_resolver: ResolverFactory
) -> None:
    """An index names its platforms itself: one GET of the tag brings digest and index."""
    registry = public_registry.registry
    resolver = await make_resolver(local_settings(registry.host))
    mark = registry.mark()
    await resolver.platforms(public_registry.catalog.multiarch_oci.reference, POD)
    assert {("GET", "manifests"): 1} == dict(registry.count_since(mark))


async def test_a_single_arch_tag_also_fetches_its_config_blob_once(
    public_registry: PublishedRegistry, make_resolver: ResolverFactory
) -> None:
    """A single manifest's platform is in its config blob: one extra GET."""
    registry = public_registry.registry
    resolver = await make_resolver(local_settings(registry.host))
    mark = registry.mark()
    await resolver.platforms(public_registry.catalog.single.reference, POD)
    expected = {("GET", "manifests"): 1, ("GET", "blobs"): 1}
    assert expected == dict(registry.count_since(mark))


async def test_a_hundred_concurrent_pods_share_one_fetch_and_a_warm_cache_asks_nothing(
    public_registry: PublishedRegistry, make_resolver: ResolverFactory
) -> None:
    """Single flight: 100 concurrent lookups of one tag send one GET; then nothing."""
    registry = public_registry.registry
    image = public_registry.catalog.with_attestations.reference
    resolver = await make_resolver(local_settings(registry.host))
    mark = registry.mark()
    results = await asyncio.gather(*(resolver.platforms(image, POD) for _ in range(100)))
    cold = dict(registry.count_since(mark))
    mark = registry.mark()
    await asyncio.gather(*(resolver.platforms(image, POD) for _ in range(100)))
    warm = dict(registry.count_since(mark))
    assert (1, {("GET", "manifests"): 1}, {}) == (
        len(set(results)),
        cold,
        warm,
    )


async def test_two_never_seen_tags_of_one_digest_cost_one_get_each(
    public_registry: PublishedRegistry, make_resolver: ResolverFactory
) -> None:
    """Each never-seen tag is one GET, which brings its manifest; nothing is asked twice."""
    registry = public_registry.registry
    pusher = Pusher(registry.url)
    first, _ = pusher.index("twins/app", "blue", ["linux/amd64", "linux/arm64"], salt="twins")
    second, _ = pusher.index("twins/app", "green", ["linux/amd64", "linux/arm64"], salt="twins")
    resolver = await make_resolver(local_settings(registry.host))
    mark = registry.mark()
    answers = await asyncio.gather(
        resolver.platforms(first.reference, POD), resolver.platforms(second.reference, POD)
    )
    counts = dict(registry.count_since(mark))
    assert (first.digest, answers[0], {("GET", "manifests"): 2}) == (
        second.digest,
        answers[1],
        counts,
    )


async def test_an_image_pinned_by_digest_is_never_headed(
    public_registry: PublishedRegistry, make_resolver: ResolverFactory
) -> None:
    """`repo@sha256:...` skips tag resolution and is single-arch though its tag is multi-arch."""
    registry = public_registry.registry
    resolver = await make_resolver(local_settings(registry.host))
    mark = registry.mark()
    platforms = await resolver.platforms(public_registry.catalog.pinned_child.reference, POD)
    expected = ({"linux/arm64"}, {("GET", "manifests"): 1, ("GET", "blobs"): 1})
    assert expected == ({str(p) for p in platforms}, dict(registry.count_since(mark)))


async def test_a_caller_that_stops_waiting_does_not_cancel_the_shared_fetch(
    public_registry: PublishedRegistry, make_resolver: ResolverFactory
) -> None:
    """A request past its deadline leaves the fetch running; the next one finds it cached."""
    registry = public_registry.registry
    image = public_registry.catalog.manifest_list.reference
    resolver = await make_resolver(local_settings(registry.host))
    resolution = Resolution(resolver)
    mark = registry.mark()
    first = await resolution.resolve([image], POD, budget_seconds=0.0)
    second = await resolution.resolve([image], POD, budget_seconds=5.0)
    await resolution.aclose()
    platforms = second[image]
    assert not isinstance(platforms, Unknown)
    expected = (
        True,
        {"linux/amd64", "linux/arm64"},
        {("GET", "manifests"): 1},
    )
    assert expected == (
        isinstance(first[image], Unknown),
        {str(p) for p in platforms},
        dict(registry.count_since(mark)),
    )


async def test_an_unknown_tag_is_not_found_and_the_failure_is_remembered_briefly(
    public_registry: PublishedRegistry, make_resolver: ResolverFactory
) -> None:
    """404 raises NotFound; asking again within failureTtlSeconds sends nothing."""
    registry = public_registry.registry
    resolver = await make_resolver(local_settings(registry.host))
    image = f"{registry.host}/archfit/multi:does-not-exist"
    mark = registry.mark()
    for _ in range(3):
        with pytest.raises(NotFound):
            await resolver.platforms(image, POD)
    assert {("GET", "manifests"): 1} == dict(registry.count_since(mark))


async def test_a_loopback_registry_is_refused_unless_allow_listed(
    public_registry: PublishedRegistry, make_resolver: ResolverFactory
) -> None:
    """The SSRF guard stops the request before it reaches 127.0.0.1."""
    registry = public_registry.registry
    settings = local_settings(registry.host, allowed_networks=())
    resolver = await make_resolver(settings)
    mark = registry.mark()
    with pytest.raises(AddressForbidden, match=r"list it in registry\.allowedNetworks"):
        await resolver.platforms(public_registry.catalog.amd64_only.reference, POD)
    assert [] == registry.requests_since(mark)


async def test_localhost_by_name_is_refused_too_because_its_address_is_checked(
    public_registry: PublishedRegistry, make_resolver: ResolverFactory
) -> None:
    """A host name resolving to loopback is refused by the resolver, not only literal IPs."""
    registry = public_registry.registry
    port = registry.host.rsplit(":", 1)[1]
    host = f"localhost:{port}"
    resolver = await make_resolver(local_settings(host, allowed_networks=()))
    with pytest.raises(AddressForbidden):
        await resolver.platforms(f"{host}/archfit/amd64:1.0", POD)


async def test_registry_requests_and_cache_lookups_are_counted_in_metrics(
    public_registry: PublishedRegistry, make_resolver: ResolverFactory
) -> None:
    """archfit_registry_requests counts GETs by kind; cache lookups count hits.

    A never-seen tag's GET brings its facts too: that lookup still counts as the miss it was.
    """
    registry = public_registry.registry
    metrics = Metrics()
    resolver = await make_resolver(local_settings(registry.host), metrics=metrics)
    image = public_registry.catalog.amd64_only.reference
    await resolver.platforms(image, POD)
    await resolver.platforms(image, POD)

    def sample(name: str, **labels: str) -> float | None:
        return metrics.registry.get_sample_value(name, labels)

    host = registry.host
    expected = (None, 1.0, 1.0, 1.0, 1.0)
    assert expected == (
        sample("archfit_registry_requests_total", host=host, method="HEAD", kind="manifest",
               status="200"),
        sample("archfit_registry_requests_total", host=host, method="GET", kind="manifest",
               status="200"),
        sample("archfit_registry_requests_total", host=host, method="GET", kind="blob",
               status="200"),
        sample("archfit_cache_lookups_total", kind="tag", result="hit"),
        sample("archfit_cache_lookups_total", kind="digest", result="hit"),
    )  # fmt: skip


def test_default_settings_refuse_private_networks() -> None:
    """Out of the box nothing private is allow-listed."""
    expected: tuple[str, ...] = ()
    assert expected == RegistrySettings().allowed_networks
