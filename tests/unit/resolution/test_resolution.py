"""The per-request deadline: unfinished lookups are unknown now and keep running for later."""

import asyncio

from extender.core.platforms import Unknown, parse
from extender.core.pods import PullSecretsRef
from extender.resolution.within_deadline import Resolution
from tests.support.fakes import FunctionResolver

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
    from extender.resolution.within_deadline import RECENT_SECONDS
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


def _never_answering(asked: list[str], release: asyncio.Event):
    """A resolver whose lookups ask the registry (as a cache miss) and wait for `release`."""
    from extender.registry.deadline import note_registry_asked

    async def resolve(image, pull):
        asked.append(image)
        note_registry_asked()
        await release.wait()
        return AMD

    return FunctionResolver(resolve)


async def test_an_impatient_call_does_not_wait_again_on_a_lookup_an_earlier_call_ran_out_on():
    """prioritize after filter gave up on an image: answered unknown at once, no second
    lookup; with an hour's budget, an answer at all shows it did not wait."""
    asked: list[str] = []
    release = asyncio.Event()
    resolution = Resolution(_never_answering(asked, release))
    await resolution.resolve(["r.test/slow:1"], PULL, budget_seconds=0.01, patient=False)
    async with asyncio.timeout(5):  # waiting out the budget would hang the test instead
        again = await resolution.resolve(["r.test/slow:1"], PULL, 3600, patient=False)
    release.set()
    assert ["r.test/slow:1"] == asked
    assert isinstance(found := again["r.test/slow:1"], Unknown)
    assert found.reason.startswith("still being looked up for an earlier call, not waited for")


async def test_an_impatient_call_does_not_wait_on_a_registry_that_ran_an_earlier_call_out():
    """A never-seen image on a registry host that ran a call out of time is answered unknown
    at once, its lookup started so the next attempt finds it; another host is waited on."""
    asked: list[str] = []
    release = asyncio.Event()
    resolution = Resolution(_never_answering(asked, release))
    await resolution.resolve(["r.test/a:1"], PULL, budget_seconds=0.01, patient=False)
    async with asyncio.timeout(5):
        found = await resolution.resolve(["r.test/b:1"], PULL, 3600, patient=False)
    assert isinstance(unknown := found["r.test/b:1"], Unknown)
    assert unknown.reason.startswith("registry r.test did not answer an earlier call in time")
    other = asyncio.ensure_future(resolution.resolve(["s.test/c:1"], PULL, 3600, patient=False))
    await asyncio.sleep(0.05)
    assert not other.done()  # waited on: s.test never ran a call out of time
    release.set()
    assert {"s.test/c:1": AMD} == await other
    assert ["r.test/a:1", "r.test/b:1", "s.test/c:1"] == asked


async def test_a_patient_call_still_waits_on_a_lookup_an_earlier_call_ran_out_on():
    """The webhook's calls run side by side, so they wait their own budget as before."""
    asked: list[str] = []
    release = asyncio.Event()
    resolution = Resolution(_never_answering(asked, release))
    await resolution.resolve(["r.test/slow:1"], PULL, budget_seconds=0.01, patient=False)
    waiting = asyncio.ensure_future(resolution.resolve(["r.test/slow:1"], PULL, 3600))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    release.set()
    assert {"r.test/slow:1": AMD} == await waiting


async def test_a_registry_is_waited_on_again_once_a_lookup_there_asks_it_in_time():
    """A lookup that outlives its budget keeps its host slow; one not waited on that asks the
    registry within its budget shows the host answers in time again; a host nobody looks up
    again is waited on after SLOW_FOR_SECONDS."""
    from extender.registry.deadline import note_registry_asked
    from extender.resolution.slow_registries import SLOW_FOR_SECONDS
    from tests.support.clock import FakeClock

    clock = FakeClock()
    gates = {"r.test/a:1": asyncio.Event(), "t.test/a:1": asyncio.Event()}

    async def resolve(image, pull):
        note_registry_asked()
        await asyncio.sleep(0)  # the registry's answer comes in a later step
        if image in gates:
            await gates[image].wait()
        return AMD

    resolution = Resolution(FunctionResolver(resolve), clock=clock)

    async def impatient(image: str) -> object:
        return (await resolution.resolve([image], PULL, 1, patient=False))[image]

    await resolution.resolve(["r.test/a:1"], PULL, budget_seconds=0.01, patient=False)
    clock.advance(2)  # the lookup ends past its budget: r.test stays slow
    gates["r.test/a:1"].set()
    await asyncio.sleep(0.05)
    assert isinstance(await impatient("r.test/b:1"), Unknown)
    await asyncio.sleep(0.05)  # b:1's lookup, not waited on, ended in no clock time
    assert AMD == await impatient("r.test/c:1")

    gates["t.test/d:1"] = asyncio.Event()
    await resolution.resolve(["t.test/a:1"], PULL, budget_seconds=0.01, patient=False)
    clock.advance(SLOW_FOR_SECONDS + 1)  # nobody looked t.test up since it ran a call out
    waited = asyncio.ensure_future(impatient("t.test/d:1"))
    await asyncio.sleep(0.05)
    assert not waited.done()
    gates["t.test/d:1"].set()
    assert AMD == await waited
    gates["t.test/a:1"].set()


async def test_a_cache_still_answers_an_image_of_a_slow_registry():
    """Only the trip to a slow registry is not waited for: an answer a cache tier has (a
    lookup that never asks the registry) is given as for any registry."""
    from extender.registry.deadline import note_registry_asked

    release = asyncio.Event()

    async def resolve(image, pull):
        if image.endswith(":cached"):
            await asyncio.sleep(0)  # a cache tier's round trip (Redis)
            return AMD
        note_registry_asked()
        await release.wait()
        return AMD

    resolution = Resolution(FunctionResolver(resolve))
    await resolution.resolve(["r.test/a:1"], PULL, budget_seconds=0.01, patient=False)
    async with asyncio.timeout(5):
        found = await resolution.resolve(
            ["r.test/b:cached", "r.test/c:1"], PULL, 3600, patient=False
        )
    release.set()
    assert AMD == found["r.test/b:cached"]
    assert isinstance(found["r.test/c:1"], Unknown)


async def test_without_registries_only_a_cache_is_waited_for():
    """A pod archfit decided already: what a cache tier has is answered, a trip to any
    registry (slow or not) is not waited for, and goes on for the next attempt."""
    from extender.registry.deadline import note_registry_asked

    asked: list[str] = []
    release = asyncio.Event()

    async def resolve(image, pull):
        if image.endswith(":cached"):
            await asyncio.sleep(0)
            return AMD
        asked.append(image)
        note_registry_asked()
        await release.wait()
        return AMD

    resolution = Resolution(FunctionResolver(resolve))
    async with asyncio.timeout(5):  # waiting out the budget would hang the test instead
        found = await resolution.resolve(
            ["r.test/a:cached", "r.test/b:1"], PULL, 3600, patient=False, registries=False
        )
    release.set()
    assert AMD == found["r.test/a:cached"]
    assert isinstance(unknown := found["r.test/b:1"], Unknown)
    assert unknown.reason.startswith("not waited for: archfit wrote this pod's constraint")
    assert ["r.test/b:1"] == asked
