"""The Lease's election (extender.kube.lease) over a Lease kept in memory
(tests.support.fakes.MemoryLeases): who holds it, when work starts and stops, what is written.

Expiry and the renewal deadline are judged on each contender's clock, which here moves only
when a test says; the real apiserver's side is in tests/e2e/test_lease.py.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from structlog.testing import capture_logs

from extender.kube.lease import Lease
from tests.support.clock import FakeUtcClock
from tests.support.fakes import MemoryLeases
from tests.support.waiting import wait_for_async

DURATION, RENEW = 0.6, 0.05
"""Short enough that retries and renewals come every few milliseconds of real time; expiry
and the deadline wait for the fake clock."""


class Contender:
    """One Lease contender leading a work that runs until cancelled, and what it saw."""

    def __init__(self, leases: MemoryLeases, identity: str, clock: FakeUtcClock) -> None:
        self.identity = identity
        self.lease = Lease(
            leases, identity, duration_seconds=DURATION, renew_seconds=RENEW, clock=clock
        )
        self.runs = 0
        self.running = False
        self.task: asyncio.Task[None] | None = None

    async def work(self) -> None:
        self.runs += 1
        self.running = True
        try:
            await asyncio.Event().wait()
        finally:
            self.running = False

    def start(self) -> Contender:
        self.task = asyncio.create_task(self.lease.lead(self.work))
        return self

    async def stop(self) -> None:
        """Cancel lead(), as shutdown does, and wait for it to end."""
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


@contextlib.asynccontextmanager
async def contending(*contenders: Contender) -> AsyncIterator[None]:
    for contender in contenders:
        contender.start()
    try:
        yield
    finally:
        for contender in contenders:
            await contender.stop()


def lease_lines(logs: list[dict[str, object]]) -> list[tuple[object, object, object]]:
    return [
        (entry["event"], entry["identity"], entry.get("reason"))
        for entry in logs
        if entry["event"] in ("lease_acquired", "lease_lost")
    ]


async def test_of_two_contenders_one_holds_the_lease_and_runs_its_work_and_the_other_never_does():
    """Both find no Lease: one creates it and renews it, the other keeps finding it held."""
    leases, clock = MemoryLeases(), FakeUtcClock()
    a, b = Contender(leases, "replica-a", clock), Contender(leases, "replica-b", clock)
    async with contending(a, b):
        await wait_for_async(lambda: a.lease.held or b.lease.held, "a holder")
        holder, other = (a, b) if a.lease.held else (b, a)
        writes = leases.writes
        await wait_for_async(lambda: leases.writes >= writes + 5, "five renewals")
        assert (True, False) == (holder.lease.held, other.lease.held)
        assert (1, 0, False) == (holder.runs, other.runs, other.running)
        assert (holder.identity, 0) == (
            leases.spec["holderIdentity"],
            leases.spec["leaseTransitions"],
        )


async def test_a_holder_that_shuts_down_clears_the_lease_and_the_other_takes_over_at_once():
    """The other's clock stands still, so to it the record never expires: only the cleared
    holder lets it in, and the Lease counts one transition."""
    leases, clock = MemoryLeases(), FakeUtcClock()
    a, b = Contender(leases, "replica-a", clock), Contender(leases, "replica-b", clock)
    async with contending(a):
        await wait_for_async(lambda: a.running, "replica-a to run its work")
        b.start()
        with capture_logs() as logs:
            await a.stop()
            await wait_for_async(lambda: b.running, "replica-b to run its work")
        await b.stop()
    assert [("lease_lost", "replica-a", "shutdown"), ("lease_acquired", "replica-b", None)] == (
        lease_lines(logs)
    )
    assert ("", 1) == (leases.spec.get("holderIdentity", ""), leases.spec["leaseTransitions"])


async def test_a_holder_that_cannot_renew_keeps_its_work_until_the_renewal_deadline_then_stops():
    """Renewals fail: the work goes on while its clock says the deadline (duration - renew)
    has not passed, and stops once it has, before any other contender may take over."""
    leases, clock = MemoryLeases(), FakeUtcClock()
    a = Contender(leases, "replica-a", clock)
    async with contending(a):
        await wait_for_async(lambda: a.running, "replica-a to run its work")
        with capture_logs() as logs:
            leases.unreachable = True
            await wait_for_async(
                lambda: len([e for e in logs if e["event"] == "lease_renewal_failed"]) >= 3,
                "three failed renewals",
            )
            assert (True, True) == (a.lease.held, a.running)
            clock.advance(DURATION - RENEW)
            await wait_for_async(lambda: not a.running, "replica-a to stop its work")
    assert [("lease_lost", "replica-a", "renewal_deadline")] == lease_lines(logs)
    assert not a.lease.held


async def test_another_holder_in_the_record_stops_the_work_and_is_taken_back_only_once_expired():
    """Someone else's name stops the work at the next renewal; the record, never renewed,
    is taken back once it has stayed unchanged for its duration on the contender's clock."""
    leases, clock = MemoryLeases(), FakeUtcClock()
    a = Contender(leases, "replica-a", clock)
    async with contending(a):
        await wait_for_async(lambda: a.running, "replica-a to run its work")
        with capture_logs() as logs:
            leases.overwrite(holderIdentity="intruder", leaseDurationSeconds=5)
            await wait_for_async(lambda: not a.running, "replica-a to see the intruder")
            reads = leases.writes
            await asyncio.sleep(10 * RENEW)  # it looks again, many times, its clock still
            assert (False, reads, "intruder") == (
                a.lease.held,
                leases.writes,
                leases.spec["holderIdentity"],
            )
            clock.advance(5)
            await wait_for_async(lambda: a.running, "replica-a to take the Lease back")
        # Taken from the intruder: one more transition than the record said.
        assert ("replica-a", 1, 2) == (
            leases.spec["holderIdentity"],
            leases.spec["leaseTransitions"],
            a.runs,
        )
    assert [
        ("lease_lost", "replica-a", "another_holder"),
        ("lease_acquired", "replica-a", None),
    ] == lease_lines(logs)


async def test_work_that_ends_gives_the_lease_up_and_runs_again_when_it_is_next_acquired():
    """A work that returns is not leadership lost for good: the Lease is cleared for
    another replica, and this one runs the work again when it holds the Lease again."""
    leases, clock = MemoryLeases(), FakeUtcClock()
    runs: list[str] = []

    async def brief() -> None:
        runs.append(leases.spec["holderIdentity"])

    lease = Lease(leases, "replica-a", duration_seconds=DURATION, renew_seconds=RENEW, clock=clock)
    task = asyncio.create_task(lease.lead(brief))
    try:
        await wait_for_async(lambda: len(runs) >= 2, "the work to run twice")
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert ["replica-a", "replica-a"] == runs[:2]
    assert "" == leases.spec.get("holderIdentity", "")


async def test_a_new_lease_is_created_with_its_times_in_one_write():
    """As client-go creates one: holder, acquire and renew times, no transition yet; no second
    write to add the times."""
    leases, clock = MemoryLeases(), FakeUtcClock()
    async with contending(Contender(leases, "replica-a", clock)):
        await wait_for_async(lambda: leases.stored, "the Lease created")
    created = leases.stored[0]
    assert ("replica-a", 0) == (created["holderIdentity"], created["leaseTransitions"])
    assert created["acquireTime"] == created["renewTime"] != ""
