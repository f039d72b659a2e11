"""The resolver cache: shared through a real redis-server, bounded in memory, never fatal."""

from __future__ import annotations

import asyncio

import pytest

from extender.config.registry_settings import CacheSettings
from extender.registry.cache import Store
from extender.registry.errors import NotFound
from tests.integration.conftest import POD, ResolverFactory, local_settings
from tests.support.clock import FakeClock
from tests.support.fixtures import PublishedRegistry
from tests.support.images import Pusher
from tests.support.process import free_port

pytestmark = pytest.mark.integration


async def test_two_replicas_sharing_redis_ask_the_registry_once(
    public_registry: PublishedRegistry, make_resolver: ResolverFactory, redis_url: str
) -> None:
    """The second resolver instance finds the first one's answer in Redis: zero requests."""
    registry = public_registry.registry
    cache = CacheSettings(url=redis_url)
    first = await make_resolver(local_settings(registry.host), cache)
    second = await make_resolver(local_settings(registry.host), cache)
    image = public_registry.catalog.single.reference
    await first.platforms(image, POD)
    mark = registry.mark()
    platforms = await second.platforms(image, POD)
    assert ({"linux/arm64"}, []) == (
        {str(p) for p in platforms},
        registry.requests_since(mark),
    )


async def test_a_dead_redis_is_a_cache_miss_not_a_failure(
    public_registry: PublishedRegistry, make_resolver: ResolverFactory
) -> None:
    """Redis down: every lookup goes to the registry, quickly, and still answers."""
    registry = public_registry.registry
    cache = CacheSettings(url=f"redis://127.0.0.1:{free_port()}/0", redis_timeout_seconds=0.2)
    resolver = await make_resolver(local_settings(registry.host), cache)
    image = public_registry.catalog.amd64_only.reference
    platforms = await asyncio.wait_for(resolver.platforms(image, POD), timeout=5)
    assert {"linux/amd64"} == {str(p) for p in platforms}


async def test_max_entries_counts_images_so_that_many_tags_stay_cached_whole(
    public_registry: PublishedRegistry, make_resolver: ResolverFactory
) -> None:
    """maxEntries images resolved by tag, and a failed lookup besides: all answered from memory.

    Each image keeps its tag's digest and its digest's platforms; a failure is kept apart.
    """
    registry = public_registry.registry
    pusher = Pusher(registry.url)
    images = [
        pusher.index(f"bound/app{i}", "1", ["linux/amd64", "linux/arm64"], salt=f"bound{i}")[0]
        for i in range(8)
    ]
    resolver = await make_resolver(local_settings(registry.host), CacheSettings(max_entries=8))
    cold = [await resolver.platforms(image.reference, POD) for image in images]
    with pytest.raises(NotFound):
        await resolver.platforms(f"{registry.host}/bound/app0:missing", POD)
    mark = registry.mark()
    warm = [await resolver.platforms(image.reference, POD) for image in images]
    assert (cold, []) == (warm, registry.requests_since(mark))


async def test_the_memory_tier_drops_the_least_recently_used_image_beyond_its_bound() -> None:
    """The in-process tier keeps max_entries of each kind; the least recently used goes."""
    store = Store(CacheSettings(max_entries=3))
    for key in ("a", "b", "c"):
        await store.set("digest", key, key, str, ttl=60)
    await store.get("digest", "a", str, ttl=60)  # a is now the most recently used
    await store.set("digest", "d", "d", str, ttl=60)
    await store.set("tag", "e", "e", str, ttl=60)  # another kind: it evicts no digest
    kept = [await store.get("digest", key, str, ttl=60) for key in ("a", "b", "c", "d")]
    await store.aclose()
    assert ["a", None, "c", "d"] == kept


async def test_the_memory_store_expires_entries_after_their_ttl() -> None:
    """A failure remembered for a moment is gone after it."""
    clock = FakeClock()
    store = Store(CacheSettings(max_entries=10), clock=clock)
    await store.set("failure", "k", "v", str, ttl=1)
    before = await store.get("failure", "k", str, ttl=1)
    clock.advance(1.01)
    after = await store.get("failure", "k", str, ttl=1)
    await store.aclose()
    assert ("v", None) == (before, after)
