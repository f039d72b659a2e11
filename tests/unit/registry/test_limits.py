"""The Redis circuit breaker and the per-host fair share of the connection pool."""

from __future__ import annotations

import asyncio

from extender.registry.breaker import CircuitBreaker
from extender.registry.fairshare import FairShare
from tests.support.clock import FakeClock
from tests.support.waiting import settle


def test_the_breaker_opens_after_its_failures_and_lets_one_probe_through_after_the_pause():
    """Three failures open it; during the pause nothing passes; then exactly one probe."""
    clock = FakeClock()
    breaker = CircuitBreaker(failures=3, open_seconds=10, clock=clock)
    for _ in range(3):
        breaker.failed()
    during = [breaker.allow() for _ in range(5)]
    clock.advance(10)
    probes = [breaker.allow() for _ in range(3)]
    assert ([False] * 5, [True, False, False]) == (during, probes)


def test_a_failed_probe_opens_the_breaker_for_another_pause_and_a_good_one_closes_it():
    """Probe fails: closed again only after another pause; probe succeeds: everything passes."""
    clock = FakeClock()
    breaker = CircuitBreaker(failures=1, open_seconds=10, clock=clock)
    breaker.failed()
    clock.advance(10)
    breaker.allow()
    breaker.failed()
    reopened = breaker.allow()
    clock.advance(10)
    breaker.allow()
    breaker.succeeded()
    assert (False, [True, True]) == (reopened, [breaker.allow(), breaker.allow()])


def test_an_abandoned_probe_does_not_leave_the_breaker_stuck():
    """A probe that never reached Redis (pool full) lets the next caller probe instead."""
    clock = FakeClock()
    breaker = CircuitBreaker(failures=1, open_seconds=1, clock=clock)
    breaker.failed()
    clock.advance(1)
    breaker.allow()
    breaker.abandoned()
    assert breaker.allow()


async def test_a_host_holding_its_share_waits_while_a_new_host_gets_a_connection():
    """Total 8, per host 8: one busy host holds 4 (a share is kept free), a newcomer gets one."""
    fair = FairShare(total=8, per_host=8)
    release = asyncio.Event()
    entered: list[str] = []

    async def hold(host: str) -> None:
        async with fair.slot(host):
            entered.append(host)
            await release.wait()

    slow = [asyncio.ensure_future(hold("slow")) for _ in range(8)]
    await settle()
    held_before = entered.count("slow")  # inside the block = holding a connection
    newcomer = asyncio.ensure_future(hold("healthy"))
    await settle()
    got = (entered.count("slow"), entered.count("healthy"))
    release.set()
    await asyncio.gather(*slow, newcomer)
    assert (4, (4, 1), 9) == (held_before, got, len(entered))
