"""Stale-if-error: a tag past its TTL answers from its last good digest while its registry fails.

The registry is the real one behind a relay (tests/support/outage.py) that the test switches
into an outage; the cache's clock is a FakeClock, so TTLs pass without sleeping.
"""

from __future__ import annotations

import asyncio
import io
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from structlog.testing import capture_logs

from extender.cli.inspect_images import run_inspect
from extender.config.registry_settings import CacheSettings, RegistrySettings
from extender.core.platforms import Unknown
from extender.metrics import Metrics
from extender.registry.errors import NotFound, Unauthorized, UnexpectedStatus
from extender.registry.resolver import ImageResolution, RegistryResolver
from extender.resolution.within_deadline import Resolution
from tests.integration.conftest import POD, ResolverFactory, local_settings
from tests.support.clock import FakeClock
from tests.support.fixtures import PublishedRegistry
from tests.support.images import Image
from tests.support.outage import Failure, Relay, serve_relay

pytestmark = pytest.mark.integration

TAG_TTL = 60
STALE_IF_ERROR = 3600
CACHE = CacheSettings(
    tag_ttl_seconds=TAG_TTL, failure_ttl_seconds=10, stale_if_error_seconds=STALE_IF_ERROR
)


@pytest.fixture
async def relay(public_registry: PublishedRegistry) -> AsyncIterator[Relay]:
    """The public registry behind a relay that the test can switch into an outage."""
    async with serve_relay(public_registry.registry.url) as running:
        yield running


def settings(relay: Relay) -> RegistrySettings:
    """Plain HTTP to the relay, with time limits short enough for a hang to end quickly."""
    return local_settings(relay.host, request_timeout_seconds=0.5, connect_timeout_seconds=0.5)


def through(relay: Relay, image: Image) -> str:
    """The image's reference, named through the relay."""
    return relay.host + image.reference[image.reference.index("/") :]


@dataclass
class Outage:
    """A resolver that learned an image through the relay, now failing past the tag's TTL."""

    resolver: RegistryResolver
    clock: FakeClock
    metrics: Metrics
    reference: str

    async def resolve(self) -> ImageResolution:
        """Look the image up again."""
        return await self.resolver.resolve(self.reference, POD)


async def outage_past_ttl(
    make_resolver: ResolverFactory,
    relay: Relay,
    image: Image,
    failure: Failure,
    past: float = 1,
    cache: CacheSettings = CACHE,
) -> Outage:
    """Resolve `image` through the relay, then fail with `failure` `past` s after its tag's TTL."""
    clock, metrics = FakeClock(), Metrics()
    resolver = await make_resolver(settings(relay), cache, metrics, clock=clock)
    outage = Outage(resolver, clock, metrics, through(relay, image))
    await outage.resolve()
    relay.failure = failure
    clock.advance(cache.tag_ttl_seconds + past)
    return outage


def stale_answers(metrics: Metrics) -> float:
    """archfit_cache_stale_answers_total, summed over its error label."""
    return sum(
        sample.value
        for family in metrics.registry.collect()
        if family.name == "archfit_cache_stale_answers"
        for sample in family.samples
        if sample.name.endswith("_total")
    )


@pytest.mark.parametrize(
    ("failure", "kind"),
    [(503, "UnexpectedStatus"), (429, "UnexpectedStatus"), ("hang", "Timeout"),
     ("reset", "Unreachable")],
)  # fmt: skip
async def test_a_tag_past_its_ttl_answers_from_its_last_good_digest_while_the_registry_fails(
    public_registry: PublishedRegistry,
    make_resolver: ResolverFactory,
    relay: Relay,
    failure: Failure,
    kind: str,
) -> None:
    """503, 429, a hang or a reset after the tag's TTL: the last digest answers, counted, twice."""
    image = public_registry.catalog.manifest_list
    outage = await outage_past_ttl(make_resolver, relay, image, failure)
    first = await outage.resolve()
    again = await outage.resolve()  # the failure is remembered
    assert (
        ({"linux/amd64", "linux/arm64"}, image.digest, kind, TAG_TTL + 1),
        (again.digest, again.stale is not None),
        2.0,
    ) == (
        summary(first),
        (image.digest, True),
        stale_answers(outage.metrics),
    )


def summary(resolution: ImageResolution) -> tuple[set[str], str, str, int]:
    """Platforms, digest, the failure's class and the age of a stale answer."""
    assert resolution.stale is not None, "the answer is not marked stale"
    stale = resolution.stale
    platforms = {str(p) for p in resolution.platforms}
    return platforms, resolution.digest, stale.kind, round(stale.age_seconds)


@pytest.mark.parametrize(("failure", "error"), [(401, Unauthorized), (404, NotFound)])
async def test_a_definite_refusal_is_never_answered_from_the_last_good_digest(
    public_registry: PublishedRegistry,
    make_resolver: ResolverFactory,
    relay: Relay,
    failure: Failure,
    error: type[Exception],
) -> None:
    """401 or 404 after the tag's TTL: the lookup fails as the registry says; nothing stale."""
    outage = await outage_past_ttl(
        make_resolver, relay, public_registry.catalog.manifest_list, failure
    )
    with pytest.raises(error):
        await outage.resolve()
    assert (True, 0.0) == (relay.failed > 0, stale_answers(outage.metrics))


async def test_past_stale_if_error_seconds_a_failing_registry_leaves_the_image_unknown(
    public_registry: PublishedRegistry, make_resolver: ResolverFactory, relay: Relay
) -> None:
    """The last good digest answers until staleIfErrorSeconds after the TTL, and not after."""
    image = public_registry.catalog.manifest_list
    cache = CacheSettings(
        tag_ttl_seconds=TAG_TTL, failure_ttl_seconds=1, stale_if_error_seconds=600
    )
    outage = await outage_past_ttl(make_resolver, relay, image, 503, past=599, cache=cache)
    last = await outage.resolve()
    outage.clock.advance(2)
    with pytest.raises(UnexpectedStatus):
        await outage.resolve()
    assert (image.digest, TAG_TTL + 599) == summary(last)[1::2]


async def test_a_stale_answer_logs_one_warning_naming_the_image_its_age_and_the_error(
    public_registry: PublishedRegistry, make_resolver: ResolverFactory, relay: Relay
) -> None:
    """One image_answered_stale warning: image, digest, age in seconds, the registry's error."""
    image = public_registry.catalog.single
    outage = await outage_past_ttl(make_resolver, relay, image, 503, past=120)
    with capture_logs() as logs:
        await outage.resolve()
    stale = [entry for entry in logs if entry["event"] == "image_answered_stale"]
    assert [("warning", through(relay, image), image.digest, TAG_TTL + 120, True)] == [
        (e["log_level"], e["image"], e["digest"], e["age_seconds"], "503" in e["error"])
        for e in stale
    ]


async def test_a_new_process_sharing_redis_answers_stale_from_the_last_good_digest_there(
    public_registry: PublishedRegistry,
    make_resolver: ResolverFactory,
    relay: Relay,
    redis_url: str,
) -> None:
    """A resolver with empty memory (a restart) finds the tag's last good digest in Redis."""
    image = public_registry.catalog.amd64_only
    cache = CacheSettings(
        url=redis_url, tag_ttl_seconds=1, failure_ttl_seconds=10, stale_if_error_seconds=3600
    )
    before = await make_resolver(settings(relay), cache)
    await before.resolve(through(relay, image), POD)
    relay.failure = 503
    await asyncio.sleep(1.1)  # Redis keeps time itself: the tag's key must really expire
    metrics = Metrics()
    after = await make_resolver(settings(relay), cache, metrics)
    answer = await after.resolve(through(relay, image), POD)
    assert ({"linux/amd64"}, image.digest, True, 1.0) == (
        {str(p) for p in answer.platforms},
        answer.digest,
        answer.stale is not None,
        stale_answers(metrics),
    )


async def test_inspect_says_when_an_answer_is_the_last_good_digest(
    public_registry: PublishedRegistry, relay: Relay, redis_url: str
) -> None:
    """Through a shared Redis, a failing registry: JSON carries `stale`, the table says STALE."""
    image = public_registry.catalog.armv7_only
    cache = CacheSettings(
        url=redis_url, namespace="inspect-stale", tag_ttl_seconds=1, stale_if_error_seconds=3600
    )
    reference = through(relay, image)
    await run_inspect([reference], settings(relay), cache, True, io.StringIO())
    relay.failure = 503
    await asyncio.sleep(1.1)  # Redis keeps time itself: the tag's key must really expire
    as_json, table = io.StringIO(), io.StringIO()
    status = await run_inspect([reference], settings(relay), cache, True, as_json)
    await run_inspect([reference], settings(relay), cache, False, table)
    document = json.loads(as_json.getvalue())[0]
    assert (0, ["linux/arm/v7"], True, True, True) == (
        status,
        document["platforms"],
        document["stale"]["ageSeconds"] >= 1,
        "503" in document["stale"]["error"],
        "STALE" in table.getvalue().splitlines()[1],
    )


async def test_a_fresh_lookup_sees_the_registry_recover_while_a_normal_one_repeats_the_failure(
    public_registry: PublishedRegistry, make_resolver: ResolverFactory, relay: Relay
) -> None:
    """A remembered 503 of a cold tag; the registry recovers: fresh_failures answers at once."""
    image = public_registry.catalog.multiarch_oci
    resolver = await make_resolver(settings(relay), CACHE, clock=FakeClock())
    resolution = Resolution(resolver)
    reference = through(relay, image)
    relay.failure = 503
    await resolution.resolve([reference], POD, 5.0)  # the failure is now remembered
    relay.failure = None
    normal = await resolution.resolve([reference], POD, 5.0)
    fresh = await resolution.resolve([reference], POD, 5.0, fresh_failures=True)
    assert (Unknown, True, {"linux/amd64", "linux/arm64", "linux/arm/v7"}) == (
        type(normal[reference]),
        "503" in getattr(normal[reference], "reason", ""),
        {str(p) for p in fresh[reference]},  # type: ignore[union-attr]
    )


async def test_a_registry_slower_than_the_request_answers_from_the_last_good_digest_in_time(
    public_registry: PublishedRegistry, make_resolver: ResolverFactory, relay: Relay
) -> None:
    """A hung registry past the tag's TTL, a 1 s deadline: the last digest answers within it."""
    image = public_registry.catalog.manifest_list
    clock = FakeClock()
    resolver = await make_resolver(local_settings(relay.host), CACHE, clock=clock)
    resolution = Resolution(resolver, clock=clock)  # its 5 s of recent answers pass too
    reference = through(relay, image)
    await resolution.resolve([reference], POD, 5.0)
    relay.failure = "hang"  # each request waits out requestTimeoutSeconds (5 s), past the deadline
    clock.advance(TAG_TTL + 1)
    deadline = 1.0
    started = time.perf_counter()
    answer = await resolution.resolve([reference], POD, deadline)
    took = time.perf_counter() - started
    # Answered at the deadline (the failure) cannot take less than it, however idle the
    # machine: an answer before it came from the last good digest at once.
    assert ({"linux/amd64", "linux/arm64"}, True) == (
        {str(p) for p in answer[reference]},  # type: ignore[union-attr]
        took < deadline,
    )
