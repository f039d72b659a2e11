"""TTLMap: expiry per entry, LRU bound, and one shared load per key, on a controllable clock."""

from __future__ import annotations

import asyncio

import pytest

from extender.ttlmap import TTLMap
from tests.support.clock import FakeClock

_FULL = [("put", "a", 1, 50), ("put", "b", 2, 50), ("put", "c", 3, 50)]
"""Three entries: the map below is full."""

# (what happens, in order: put/get/pop/advance; the values `get` saw)
CASES = [
    ("a value is there until its ttl", [("put", "a", 1, 10), ("advance", 9.9), ("get", "a")], [1]),
    ("it is gone at its ttl", [("put", "a", 1, 10), ("advance", 10), ("get", "a")], [None]),
    (
        "each entry has its own ttl",
        [("put", "a", 1, 5), ("put", "b", 2, 50), ("advance", 6), ("get", "a"), ("get", "b")],
        [None, 2],
    ),
    (
        "a put replaces value and ttl",
        [("put", "a", 1, 5), ("put", "a", 2, 50), ("advance", 6), ("get", "a")],
        [2],
    ),
    ("a ttl of zero forgets", [("put", "a", 1, 50), ("put", "a", 2, 0), ("get", "a")], [None]),
    ("pop forgets", [("put", "a", 1, 50), ("pop", "a"), ("get", "a")], [None]),
    ("pop of nothing is fine", [("pop", "a"), ("get", "a")], [None]),
    (
        "the least recently used goes first",
        [*_FULL, ("put", "d", 4, 50), ("get", "a"), ("get", "b"), ("get", "c"), ("get", "d")],
        [None, 2, 3, 4],
    ),
    (
        "a get makes an entry recent",
        [*_FULL, ("get", "a"), ("put", "d", 4, 50), *[("get", k) for k in "abcd"]],
        [1, 1, None, 3, 4],
    ),
    (
        "a put makes an entry recent",
        [*_FULL, ("put", "a", 5, 50), ("put", "d", 4, 50), ("get", "a"), ("get", "b")],
        [5, None],
    ),
]


@pytest.mark.parametrize(("steps", "seen"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_entries_live_by_their_own_ttl_within_the_bound(steps, seen):
    """Three entries at most; each lives `ttl` seconds of the fake clock."""
    clock = FakeClock()
    cache: TTLMap[str, int] = TTLMap(max_entries=3, clock=clock)
    got: list[int | None] = []
    for step, *args in steps:
        if step == "put":
            cache.put(*args)
        elif step == "get":
            got.append(cache.get(*args))
        elif step == "pop":
            cache.pop(*args)
        else:
            clock.advance(*args)
    assert seen == got


def test_a_met_expired_entry_is_dropped_and_no_entry_outgrows_the_bound():
    """Expired entries leave when met; a flood of keys keeps the map at its bound."""
    clock = FakeClock()
    cache: TTLMap[int, int] = TTLMap(max_entries=100, clock=clock)
    for key in range(1_000):
        cache.put(key, key, 10)
    full = len(cache)
    clock.advance(10)
    cache.get(999)
    assert (100, 99) == (full, len(cache))


def test_a_ttl_of_zero_takes_no_room():
    """Answers not to be kept (a plugin's cacheDuration 0) never push a kept one out."""
    cache: TTLMap[str, int] = TTLMap(max_entries=1, clock=FakeClock())
    cache.put("kept", 1, 50)
    cache.put("passing", 2, 0)
    assert (1, 1) == (cache.get("kept"), len(cache))


def test_a_bound_below_one_is_refused():
    """A map that can hold nothing would make every get_or_load a load; say so at start."""
    with pytest.raises(ValueError, match="max_entries"):
        TTLMap(max_entries=0)


class Loads:
    """A loader whose calls the test counts and finishes by hand."""

    def __init__(self) -> None:
        self.calls = 0
        self.gate = asyncio.Event()
        self.answer: object = "value"

    async def __call__(self) -> object:
        self.calls += 1
        await self.gate.wait()
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_concurrent_callers_share_one_load_and_its_answer_is_kept_for_its_ttl():
    """Ten callers, one load; then hits until the ttl passes, then one more load."""
    clock = FakeClock()
    cache: TTLMap[str, object] = TTLMap(max_entries=10, clock=clock)
    loads = Loads()
    waiters = [
        asyncio.ensure_future(cache.get_or_load("k", loads, lambda _: 30)) for _ in range(10)
    ]
    await _settle()
    in_flight = cache.loading
    loads.gate.set()
    answers = await asyncio.gather(*waiters)
    hit = await cache.get_or_load("k", loads, lambda _: 30)
    clock.advance(30)
    await cache.get_or_load("k", loads, lambda _: 30)
    assert (1, ["value"] * 10, "value", 2, 0) == (
        in_flight,
        answers,
        hit,
        loads.calls,
        cache.loading,
    )


async def test_the_ttl_comes_from_the_answer():
    """A token's own lifetime decides how long it is kept; zero means not kept at all."""
    clock = FakeClock()
    cache: TTLMap[str, tuple[str, float]] = TTLMap(max_entries=10, clock=clock)

    async def token() -> tuple[str, float]:
        return ("short", 5.0)

    async def uncacheable() -> tuple[str, float]:
        return ("never", 0.0)

    await cache.get_or_load("a", token, lambda answer: answer[1])
    await cache.get_or_load("b", uncacheable, lambda answer: answer[1])
    kept = (cache.get("a"), cache.get("b"))
    clock.advance(5)
    assert ((("short", 5.0), None), None) == (kept, cache.get("a"))


async def test_a_kept_none_is_a_hit():
    """None is a value like any other (a pull secret that does not exist)."""
    cache: TTLMap[str, None] = TTLMap(max_entries=10, clock=FakeClock())
    calls = 0

    async def missing() -> None:
        nonlocal calls
        calls += 1

    for _ in range(3):
        await cache.get_or_load("k", missing, lambda _: 30)
    assert 1 == calls


async def test_a_failed_load_reaches_every_waiter_and_is_not_kept():
    """Five waiters see the loader's own exception; the next caller loads again."""
    cache: TTLMap[str, object] = TTLMap(max_entries=10, clock=FakeClock())
    loads = Loads()
    loads.answer = LookupError("registry down")
    waiters = [asyncio.ensure_future(cache.get_or_load("k", loads, lambda _: 30)) for _ in range(5)]
    await _settle()
    loads.gate.set()
    outcomes = await asyncio.gather(*waiters, return_exceptions=True)
    loads.answer = "recovered"
    again = await cache.get_or_load("k", loads, lambda _: 30)
    assert (["registry down"] * 5, [LookupError] * 5, "recovered", 2) == (
        [str(outcome) for outcome in outcomes],
        [type(outcome) for outcome in outcomes],
        again,
        loads.calls,
    )


async def test_negative_caching_is_the_callers_choice_through_ttl_of():
    """A loader that turns a failure into a value keeps it for the shorter ttl it asks."""
    clock = FakeClock()
    cache: TTLMap[str, str | None] = TTLMap(max_entries=10, clock=clock)
    calls = 0

    async def lookup() -> str | None:
        nonlocal calls
        calls += 1
        return None  # "not found", remembered briefly

    def ttl_of(answer: str | None) -> float:
        return 2 if answer is None else 300

    await cache.get_or_load("k", lookup, ttl_of)
    await cache.get_or_load("k", lookup, ttl_of)
    clock.advance(2)
    await cache.get_or_load("k", lookup, ttl_of)
    assert 2 == calls


async def test_a_cancelled_waiter_leaves_the_load_running_for_the_others():
    """One caller gives up (its deadline); the other still gets the answer, which is kept."""
    cache: TTLMap[str, object] = TTLMap(max_entries=10, clock=FakeClock())
    loads = Loads()
    impatient = asyncio.ensure_future(cache.get_or_load("k", loads, lambda _: 30))
    patient = asyncio.ensure_future(cache.get_or_load("k", loads, lambda _: 30))
    await _settle()
    impatient.cancel()
    await _settle()
    loads.gate.set()
    answer = await patient
    assert (True, "value", "value", 1) == (
        impatient.cancelled(),
        answer,
        cache.get("k"),
        loads.calls,
    )


async def test_a_load_every_caller_abandoned_still_keeps_its_answer():
    """The next request finds in the map what the timed-out one started."""
    cache: TTLMap[str, object] = TTLMap(max_entries=10, clock=FakeClock())
    loads = Loads()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(cache.get_or_load("k", loads, lambda _: 30), timeout=0.01)
    loads.gate.set()
    await _settle()
    assert ("value", 1) == (await cache.get_or_load("k", loads, lambda _: 30), loads.calls)


async def test_loads_of_different_keys_run_side_by_side():
    """Single flight is per key: two keys, two loads in flight at once."""
    cache: TTLMap[str, object] = TTLMap(max_entries=10, clock=FakeClock())
    loads = Loads()
    waiters = [asyncio.ensure_future(cache.get_or_load(k, loads, lambda _: 30)) for k in "ab"]
    await _settle()
    in_flight = cache.loading
    loads.gate.set()
    await asyncio.gather(*waiters)
    assert (2, 2) == (in_flight, loads.calls)


async def test_aclose_cancels_the_loads_in_flight():
    """At shutdown nothing keeps running: the waiters see the cancellation."""
    cache: TTLMap[str, object] = TTLMap(max_entries=10, clock=FakeClock())
    loads = Loads()
    waiter = asyncio.ensure_future(cache.get_or_load("k", loads, lambda _: 30))
    await _settle()
    async with asyncio.timeout(5):  # a load aclose failed to cancel would wait forever
        await cache.aclose()
    outcome = await asyncio.gather(waiter, return_exceptions=True)
    assert ([asyncio.CancelledError], 0, None) == (
        [type(o) for o in outcome],
        cache.loading,
        cache.get("k"),
    )


def test_a_map_bounded_by_bytes_forgets_the_least_recently_used_until_it_fits():
    """With max_bytes, the sizes put gives count: a large entry pushes out older ones."""
    kept: TTLMap[str, int] = TTLMap(100, FakeClock(), max_bytes=10)
    for key, size in (("a", 4), ("b", 4), ("c", 6), ("huge", 11)):
        kept.put(key, 0, 60, size)
    assert ([None, 0, 0, None], 10) == ([kept.get(k) for k in ("a", "b", "c", "huge")], kept.bytes)


async def test_a_load_cancelled_before_it_began_still_tells_its_waiters():
    """aclose in the very pass a load was asked for: the load never runs a step of its own,
    so its waiters must learn of the cancellation from the task's end, not from the load."""
    cache: TTLMap[str, object] = TTLMap(max_entries=10, clock=FakeClock())
    loads = Loads()
    waiter = asyncio.ensure_future(cache.get_or_load("k", loads, lambda _: 30))
    await asyncio.sleep(0)  # the caller has asked: its load is made, not yet begun
    async with asyncio.timeout(5):  # a waiter nobody tells would wait forever
        await cache.aclose()
        outcome = await asyncio.gather(waiter, return_exceptions=True)
    assert ([asyncio.CancelledError], 0, 0) == (
        [type(o) for o in outcome],
        loads.calls,
        cache.loading,
    )


async def test_a_caller_that_stopped_waiting_is_not_held_by_the_load():
    """A slow load outlives many impatient callers: it keeps no future for those gone."""
    cache: TTLMap[str, object] = TTLMap(max_entries=10, clock=FakeClock())
    loads = Loads()
    callers = [asyncio.ensure_future(cache.get_or_load("k", loads, lambda _: 30)) for _ in range(3)]
    await _settle()
    callers[0].cancel()
    await _settle()
    still_told = len(cache._loads["k"].waiters)
    loads.gate.set()
    answers = await asyncio.gather(*callers[1:])
    assert (2, ["value", "value"], 1) == (still_told, answers, loads.calls)
