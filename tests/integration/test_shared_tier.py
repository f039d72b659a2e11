"""The published table as a cache tier: a replica that never looked an image up answers from
it with no registry request, its own cache still comes first, and a lookup waiting on a slow
registry is answered as soon as the table learns the image (real resolvers, real registry)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import web

from extender.core.image_table import Rendered, Switches, parameter_spec
from extender.core.mutation import MutationRules
from extender.core.parameter import TIME_EPOCH, PublishedTable, read_spec
from extender.core.platforms import Platform, parse
from extender.resolution.shared_tier import SharedTier
from tests.integration.conftest import POD, ResolverFactory, RunningFaults, local_settings
from tests.support.fixtures import PublishedRegistry
from tests.support.images import Pusher

pytestmark = pytest.mark.integration

RULES = MutationRules(
    platforms=frozenset({parse("linux/amd64"), parse("linux/arm64")}), arch_preference={}
)
SWITCHES = Switches(True, True, False, (), ())


def published(entries: dict[str, frozenset[Platform]]) -> PublishedTable:
    """The table a leader would publish for these answers, read back as a replica reads it."""
    rendered = [(key, Rendered(found, TIME_EPOCH + 1.0)) for key, found in entries.items()]
    spec: dict[str, Any] = parameter_spec(rendered, RULES, SWITCHES, 100_000).spec
    return PublishedTable.of(read_spec(spec))


async def test_a_replica_answers_an_image_only_the_leader_looked_up_with_no_registry_request(
    public_registry: PublishedRegistry, make_resolver: ResolverFactory
) -> None:
    """Replica A resolves an image and publishes it; replica B, with its own cold cache,
    answers its exact platform set from the table: the registry sees nothing from B."""
    registry = public_registry.registry
    image = Pusher(registry.url).index("tier/multi", "1", ["linux/amd64", "linux/arm/v7"])
    reference = f"{registry.host}/tier/multi:1"
    leader = await make_resolver(local_settings(registry.host))
    found = await leader.platforms(reference, POD)
    replica = SharedTier(await make_resolver(local_settings(registry.host)))
    replica.update(published({reference: found}))
    mark = registry.mark()
    answered = await replica.platforms(reference, POD)
    assert (found, []) == (answered, registry.requests_since(mark))
    assert {"linux/amd64", "linux/arm/v7"} == {str(p) for p in answered}, image


async def test_the_replicas_own_cache_comes_before_the_table(
    public_registry: PublishedRegistry, make_resolver: ResolverFactory
) -> None:
    """What this replica's cache holds answers first (fresher, and its own credentials');
    the table answers only where the cache has nothing."""
    registry = public_registry.registry
    reference = public_registry.catalog.amd64_only.reference
    replica_resolver = await make_resolver(local_settings(registry.host))
    own = await replica_resolver.platforms(reference, POD)
    replica = SharedTier(replica_resolver)
    replica.update(published({reference: frozenset({parse("linux/s390x")})}))
    mark = registry.mark()
    assert (own, []) == (await replica.platforms(reference, POD), registry.requests_since(mark))


async def test_a_lookup_waiting_on_a_slow_registry_is_answered_when_the_table_learns_it(
    faults: RunningFaults, make_resolver: ResolverFactory
) -> None:
    """The registry holds its answer; the leader publishes the image meanwhile: the waiting
    lookup is answered from the table while the registry's answer is still pending."""
    answer = asyncio.Event()
    asked = asyncio.Event()

    async def held(request: web.Request) -> web.StreamResponse:
        asked.set()
        await answer.wait()
        return web.Response(status=404)

    faults.registry.route("GET", "/v2/held/app/manifests/1", held)
    reference = f"{faults.host}/held/app:1"
    replica = SharedTier(await make_resolver(local_settings(faults.host)))
    replica.update(published({}))  # the object as first read: without the image
    lookup = asyncio.ensure_future(replica.platforms(reference, POD))
    try:
        await asyncio.wait_for(asked.wait(), 30)
        arm = frozenset({parse("linux/arm64")})
        replica.update(published({reference: arm}))
        assert (arm, False) == (await lookup, answer.is_set())
    finally:
        answer.set()
        lookup.cancel()
