"""Resolving a pod's images to platforms within the request's deadline.

The registry-backed resolver lives in `extender.registry`; this module only
declares what it must provide and bounds how long a request waits for it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from functools import partial
from typing import Protocol, TypeVar

from extender.core.platforms import (
    Platform,
    PlatformSets,
    Resolved,
    SharedPlatforms,
    SharedResolved,
    Unknown,
    describe_failure,
)
from extender.core.pods import PullSecretsRef, WorkloadId
from extender.metrics import tally_request
from extender.registry.deadline import (
    LookupTrip,
    lookup_trip,
    request_deadline,
    skip_remembered_failures,
)
from extender.resolution.slow_registries import SlowRegistries, registry_host
from extender.ttlmap import TTLMap


class PlatformResolver(Protocol):
    """Answers which platforms an image provides.

    Raises any exception when it cannot tell; the caller then treats the
    image as unknown under the failure policy, never as unsupported.
    """

    async def platforms(self, image: str, pull: PullSecretsRef) -> frozenset[Platform]: ...


class WorkloadEvidence(Protocol):
    """What one workload's own failures taught, believed for that workload's pods only
    (extender.resolution.learned_resolver.LearnedResolver)."""

    def narrow(
        self, resolved: Mapping[str, Resolved], pull: PullSecretsRef, namespace: str, workload: str
    ) -> Mapping[str, Resolved]:
        """`resolved` narrowed by the workload's evidence; `resolved` itself when none."""
        ...


T = TypeVar("T")

_DECIDED = (
    "not waited for: archfit wrote this pod's constraint when it decided it (still looking: "
    "the next attempt finds the answer cached)"
)

RECENT_SECONDS = 5.0
"""How long a known answer is reused without asking the resolver (see Resolution)."""


class Resolution:
    """Runs lookups, keeping unfinished ones alive after a request's deadline.

    A lookup that outlives its request keeps running so that the scheduler's
    next attempt finds the answer cached; the set below holds a reference so
    the task is not garbage-collected mid-flight.

    Known answers are reused for RECENT_SECONDS without asking the resolver: kube-scheduler
    calls filter and then prioritize for each pod, and a Deployment's replicas arrive
    together, so most calls repeat a question just answered. Answering from this map costs a
    dict lookup, where a task per image and `asyncio.wait` cost far more than the request's
    own work. Only platforms are reused, never an unknown, so a registry's recovery shows at
    once; a tag moved to a new digest shows after the cache's tag TTL plus these seconds.

    Platforms are answered as SharedPlatforms: equal answers are one object
    (extender.core.interning).
    """

    def __init__(
        self,
        resolver: PlatformResolver,
        *,
        max_recent: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
        on_recent: Callable[[int], None] | None = None,
        evidence: WorkloadEvidence | None = None,
    ) -> None:
        self.resolver = resolver
        self._evidence = evidence
        self._background: set[asyncio.Task[frozenset[Platform]]] = set()
        self._pending: dict[tuple[str, PullSecretsRef], asyncio.Task[frozenset[Platform]]] = {}
        """Lookups a request ran out of time on, by image and credentials, while they go on."""
        self._slow = SlowRegistries(clock)
        self._recent: TTLMap[tuple[str, PullSecretsRef], SharedPlatforms] = TTLMap(
            max_recent, clock
        )
        self._shared = PlatformSets()
        """Every answer as the one object of its value, whatever the resolver hands out: the
        verbs' judgements are found again by the ids of their answers."""
        self._on_recent = on_recent
        """Told how many images a request answered from the recent map (a metric)."""

    async def resolve(
        self,
        images: Iterable[str],
        pull: PullSecretsRef,
        budget_seconds: float,
        *,
        fresh_failures: bool = False,
        workload: WorkloadId | None = None,
        patient: bool = True,
        registries: bool = True,
    ) -> dict[str, SharedResolved]:
        """Resolve every image concurrently; what is unfinished after `budget_seconds` is
        Unknown.

        The lookups carry the deadline that makes (`request_deadline`, an instant), so
        registry requests can be bounded by it rather than by a timeout the request never
        waits for. With
        `fresh_failures` they ask the registry again rather than repeat a failure the cache
        remembers (`skip_remembered_failures`).

        Not `patient` (the extender's verbs: kube-scheduler waits for each answer before the
        next pod), an image is answered Unknown at once, its lookup going on, when an earlier
        request ran out of time on that very lookup or on its registry host
        (extender.resolution.slow_registries): waiting again would only spend the budget again.
        Without `registries`, no trip to a registry is waited for at all, only the cache
        tiers: for a pod whose constraint archfit has written already (PodFacts.decided).
        """
        images = tuple(images)
        recent = self._recent
        answered: dict[str, SharedResolved] = {}
        for image in images:
            known = recent.get((image, pull))
            if known is None:
                break
            answered[image] = known
        else:
            if answered and self._on_recent is not None:
                self._on_recent(len(answered))
            return self._believed(answered, pull, workload)
        unique = dict.fromkeys(images)
        if not unique:
            return {}
        results: dict[str, SharedResolved] = {}
        pending, cache_only = self._not_waited(unique, pull) if not patient else ({}, {})
        if not registries:
            cache_only = {i: cache_only.get(i, _DECIDED) for i in unique if i not in pending}
        loop = asyncio.get_running_loop()
        lookups = _Lookups(len(unique) - len(pending), loop.create_future())
        budget = max(budget_seconds, 0.0)
        token = request_deadline.set(time.monotonic() + budget)
        fresh = skip_remembered_failures.set(fresh_failures)
        tasks: dict[str, tuple[asyncio.Task[frozenset[Platform]], LookupTrip]] = {}
        try:  # tasks copy the context as it is now, the deadline included
            for image in unique:
                if image in pending:
                    continue  # an earlier request's lookup goes on: nothing to start
                # A cache answers such an image as any other; only its trip to the registry
                # is not waited for.
                cut = partial(lookups.one_ended, image) if image in cache_only else None
                trip = LookupTrip(cut)
                lookup = _telling(self._lookup(image, pull, trip, budget), lookups, image)
                tasks[image] = asyncio.ensure_future(lookup), trip
        finally:
            skip_remembered_failures.reset(fresh)
            request_deadline.reset(token)
        if lookups.waiting:
            timer = loop.call_later(budget, lookups.stop_waiting)
            try:
                await lookups.ended
            finally:
                timer.cancel()
        asked = 0
        for image in unique:
            entry = tasks.get(image)
            if entry is None:
                results[image] = Unknown(pending[image])
                continue
            task, trip = entry
            if not task.done():
                self._keep_going(image, pull, task)
                if image in cache_only:
                    results[image] = Unknown(cache_only[image])
                    continue
                asked += trip.asked_registry
                self._slow.ran_out(registry_host(image))
                results[image] = Unknown(
                    f"registry slower than the {round(budget_seconds, 2):g} s deadline "
                    "(still looking: the next attempt finds the answer cached)"
                )
            elif task.cancelled():
                results[image] = Unknown("lookup cancelled")
            elif (error := task.exception()) is not None:
                asked += trip.asked_registry and image not in cache_only
                results[image] = Unknown(describe_failure(error))
            else:
                asked += trip.asked_registry and image not in cache_only
                results[image] = platforms = self._shared(task.result())
                recent.put((image, pull), platforms, RECENT_SECONDS)
        if asked:
            tally_request("registry_waits", asked)
        return self._believed(results, pull, workload)

    def _not_waited(
        self, images: Iterable[str], pull: PullSecretsRef
    ) -> tuple[dict[str, str], dict[str, str]]:
        """For an impatient request: the images whose lookup for an earlier request goes on
        (not waited for at all), and those on a registry that ran an earlier request out of
        time (waited for only while a cache may answer), each with why."""
        pending: dict[str, str] = {}
        slow: dict[str, str] = {}
        if not self._pending and not self._slow:
            return pending, slow
        for image in images:
            if (image, pull) in self._pending:
                pending[image] = (
                    "still being looked up for an earlier call, not waited for "
                    "(the next attempt finds the answer cached)"
                )
            elif self._slow and (host := registry_host(image)) in self._slow:
                slow[image] = (
                    f"registry {host} did not answer an earlier call in time, not waited "
                    "for (still looking: the next attempt finds the answer cached)"
                )
        return pending, slow

    async def _lookup(
        self, image: str, pull: PullSecretsRef, trip: LookupTrip, budget: float
    ) -> frozenset[Platform]:
        """One image's lookup, in its own task: whether it asked a registry, and how long
        that took, tell the slow registries whether its host answers in time."""
        lookup_trip.set(trip)  # this task's own context: the cache marks it on a miss
        ended = self._slow.timer(budget)
        try:
            return await self.resolver.platforms(image, pull)
        finally:
            if trip.asked_registry:
                ended(registry_host(image))

    def _keep_going(
        self, image: str, pull: PullSecretsRef, task: asyncio.Task[frozenset[Platform]]
    ) -> None:
        """Let a lookup no request waits for run on, so the next attempt finds its answer."""
        self._background.add(task)
        self._pending[(image, pull)] = task
        task.add_done_callback(partial(self._ended_in_background, (image, pull)))

    def _ended_in_background(
        self, key: tuple[str, PullSecretsRef], task: asyncio.Task[frozenset[Platform]]
    ) -> None:
        if self._pending.get(key) is task:
            del self._pending[key]
        self._forget(task)

    def _believed(
        self, results: dict[str, SharedResolved], pull: PullSecretsRef, workload: WorkloadId | None
    ) -> dict[str, SharedResolved]:
        if workload is None or self._evidence is None:
            return results
        narrowed = self._evidence.narrow(results, pull, workload.namespace, workload.name)
        if narrowed is results:
            return results
        return {
            image: self._shared(found) if isinstance(found, frozenset) else found
            for image, found in narrowed.items()
        }

    def forget_recent(self) -> None:
        """Ask the resolver again for every image (what it believes has changed)."""
        self._recent.clear()

    def _forget(self, task: asyncio.Task[frozenset[Platform]]) -> None:
        self._background.discard(task)
        if not task.cancelled():
            task.exception()  # mark retrieved: its error was already reported as Unknown

    async def aclose(self) -> None:
        """Cancel lookups still running in the background (at shutdown)."""
        for task in list(self._background):
            task.cancel()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)


class _Lookups:
    """What a request waits for: all its lookups told `ended` as they ended, or its budget
    spent. `asyncio.wait` would do it, a pass of the event loop later per wait: a task's end
    reaches it through the task's done callbacks, scheduled for the next pass, and only then
    is the request woken (much of a cold lookup's CPU is spent in such passes)."""

    __slots__ = ("_left", "_told", "ended", "waiting")

    def __init__(self, count: int, ended: asyncio.Future[None]) -> None:
        self._left = count
        self._told: set[str] = set()
        self.waiting = count > 0
        """Whether there is anything to wait for."""
        self.ended = ended
        """Done when every lookup has ended or the budget is spent (cancelled when the request
        itself stopped waiting)."""

    def one_ended(self, image: str) -> None:
        """`image`'s lookup ended, or is no longer waited for: told at most once each."""
        if image in self._told:
            return
        self._told.add(image)
        self._left -= 1
        if not self._left:
            self.stop_waiting()

    def stop_waiting(self) -> None:
        if not self.ended.done():
            self.ended.set_result(None)


async def _telling(lookup: Awaitable[T], lookups: _Lookups, image: str) -> T:
    """`lookup`'s answer; as it ends, in the same step, `lookups` is told."""
    try:
        return await lookup
    finally:
        lookups.one_ended(image)
