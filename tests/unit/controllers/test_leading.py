"""controllers.leading: what every controller runs while holding its Lease, over a Lease kept
in memory (tests.support.fakes.MemoryLeases)."""

from __future__ import annotations

import asyncio

from extender.controllers.leading import leading
from extender.kube.lease import Lease
from tests.support.clock import FakeUtcClock
from tests.support.fakes import MemoryLeases
from tests.support.waiting import wait_for_async


def lease(leases: MemoryLeases) -> Lease:
    return Lease(
        leases, "replica-a", duration_seconds=0.6, renew_seconds=0.05, clock=FakeUtcClock()
    )


async def test_the_work_runs_while_the_block_runs_and_stops_with_the_lease_cleared_after():
    """Open: the Lease is taken and the work runs. Closed: the work is cancelled and the
    holder cleared, so another replica takes over at once."""
    leases, states = MemoryLeases(), []

    async def work() -> None:
        states.append("running")
        try:
            await asyncio.Event().wait()
        finally:
            states.append("stopped")

    async with leading(lease(leases), work):
        await wait_for_async(lambda: states, "the work to run")
        held_by = leases.spec["holderIdentity"]
    assert ("replica-a", ["running", "stopped"], "") == (
        held_by,
        states,
        leases.spec.get("holderIdentity", ""),
    )


async def test_a_replica_that_is_not_ready_never_contends_for_the_lease():
    """`ready()` saying no (the policy API is missing, say) keeps the Lease untouched."""
    leases, asked = MemoryLeases(), []

    async def not_ready() -> bool:
        asked.append(True)
        return False

    async def work() -> None:
        raise AssertionError("the work must not run")

    async with leading(lease(leases), work, ready=not_ready):
        await wait_for_async(lambda: asked, "ready() to be asked")
        await asyncio.sleep(0.1)  # a contender would have written the Lease by now
    assert (None, 0) == (leases.lease, leases.writes)
