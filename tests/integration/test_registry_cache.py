"""The resolver cache: shared through a real redis-server, bounded in memory, never fatal."""

from __future__ import annotations

import asyncio

import pytest

from extender.registry.cache import BoundedTTLMap, Store
from extender.registry.settings import CacheSettings
from tests.integration.conftest import POD, ResolverFactory, local_settings
from tests.support.clock import FakeClock
from tests.support.fixtures import PublishedRegistry
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


def test_the_memory_tier_drops_the_least_recently_used_entry_beyond_its_bound() -> None:
    """The in-process tier keeps max_entries."""
    cache: BoundedTTLMap[str] = BoundedTTLMap(max_entries=3)
    for key in ("a", "b", "c"):
        cache.set(key, key, ttl=60)
    cache.get("a")  # a is now the most recently used
    cache.set("d", "d", ttl=60)
    assert ["a", None, "c", "d"] == [cache.get(key) for key in ("a", "b", "c", "d")]


async def test_the_memory_store_expires_entries_after_their_ttl() -> None:
    """A failure remembered for a moment is gone after it."""
    clock = FakeClock()
    store = Store(CacheSettings(max_entries=10), clock=clock)
    await store.set("k", "v", str, ttl=1)
    before = await store.get("k", str, ttl=1)
    clock.advance(1.01)
    after = await store.get("k", str, ttl=1)
    await store.aclose()
    assert ("v", None) == (before, after)
