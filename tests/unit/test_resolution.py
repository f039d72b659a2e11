"""The per-request deadline: unfinished lookups are unknown now and keep running for later."""

import asyncio

from extender.core.platforms import Unknown, parse
from extender.core.pods import PullSecretsRef
from extender.lookups.resolution import Resolution
from tests.support.function_resolver import FunctionResolver

PULL = PullSecretsRef("default")
AMD = frozenset({parse("linux/amd64")})


async def test_a_lookup_past_the_deadline_is_unknown_and_finishes_in_the_background():
    """The slow image is Unknown for this request; its lookup still completes."""
    finished: list[str] = []
    release, slow_done = asyncio.Event(), asyncio.Event()

    async def resolve(image, pull):
        if image == "slow":
            await release.wait()
        finished.append(image)
        if image == "slow":
            slow_done.set()
        return AMD

    resolution = Resolution(FunctionResolver(resolve))
    result = await resolution.resolve(["fast", "slow"], PULL, budget_seconds=0.05)
    release.set()
    await asyncio.wait_for(slow_done.wait(), timeout=10)
    assert {
        "fast": AMD,
        "slow": Unknown(
            "registry slower than the 0.05 s deadline (still looking: the next attempt finds the "
            "answer cached)"
        ),
    } == result
    assert ["fast", "slow"] == finished


async def test_images_resolve_concurrently_not_one_after_another():
    """Each lookup waits until all ten have started: that ends only if they run together."""
    started: list[str] = []
    all_started = asyncio.Event()

    async def resolve(image, pull):
        started.append(image)
        if len(started) == 10:
            all_started.set()
        await all_started.wait()
        return AMD

    resolution = Resolution(FunctionResolver(resolve))
    result = await resolution.resolve([f"i{n}" for n in range(10)], PULL, budget_seconds=10.0)
    assert 10 * [AMD] == list(result.values())


async def test_an_image_named_twice_is_looked_up_once_and_answered_when_that_ends():
    """The request waits for each distinct image's lookup, not for one per mention: with a
    budget of an hour, an answer at all shows it did not wait for a lookup never made."""
    looked_up: list[str] = []

    async def resolve(image, pull):
        looked_up.append(image)
        return AMD

    resolution = Resolution(FunctionResolver(resolve))
    async with asyncio.timeout(5):  # waiting out the budget would hang the test instead
        result = await resolution.resolve(["a", "b", "a"], PULL, budget_seconds=3600)
    assert ({"a": AMD, "b": AMD}, ["a", "b"]) == (result, looked_up)


async def test_a_failing_lookup_is_unknown_with_its_reason():
    """Any exception is 'unknown', never 'unsupported'."""

    async def resolve(image, pull):
        raise ConnectionError("registry.acme.test: connection refused")

    result = await Resolution(FunctionResolver(resolve)).resolve(["a"], PULL, budget_seconds=1)
    assert {"a": Unknown("registry.acme.test: connection refused")} == result


async def test_closing_cancels_lookups_still_running():
    """At shutdown nothing keeps the loop alive."""
    started = asyncio.Event()

    async def resolve(image, pull):
        started.set()
        await asyncio.Event().wait()  # never set: the lookup runs until it is cancelled
        return AMD

    resolution = Resolution(FunctionResolver(resolve))
    await resolution.resolve(["a"], PULL, budget_seconds=0.01)
    await started.wait()
    await asyncio.wait_for(resolution.aclose(), timeout=2)
    assert [] == list(resolution._background)


async def test_a_known_answer_is_reused_for_a_few_seconds_and_an_unknown_never():
    """filter then prioritize, and a Deployment's replicas, repeat one question: the second
    asks nothing; after RECENT_SECONDS the resolver is asked again; failures are not kept."""
    from extender.lookups.resolution import RECENT_SECONDS
    from tests.support.clock import FakeClock

    asked: list[str] = []
    reused: list[int] = []

    async def resolve(image, pull):
        asked.append(image)
        if image == "down":
            raise LookupError("registry down")
        return AMD

    clock = FakeClock()
    resolution = Resolution(FunctionResolver(resolve), clock=clock, on_recent=reused.append)
    for _ in range(3):
        assert {"a": AMD} == await resolution.resolve(["a"], PULL, budget_seconds=1)
        await resolution.resolve(["down"], PULL, budget_seconds=1)
    await resolution.resolve(["a"], PullSecretsRef("other-namespace"), budget_seconds=1)
    clock.advance(RECENT_SECONDS + 0.1)
    await resolution.resolve(["a"], PULL, budget_seconds=1)
    assert (["a", "down", "down", "down", "a", "a"], [1, 1]) == (asked, reused)
