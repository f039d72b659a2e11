"""The releaser's leader election (extender.kube.lease) against the real kube-apiserver.

Contenders run in one process with identities of their own, each on its own API client,
as replicas would. Every test watches the invariant that matters: at no moment do two
contenders hold the Lease, or run their work, at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import pytest
from kubernetes import client, config
from structlog.testing import capture_logs

from extender.kube.client.api import KubeApi
from extender.kube.lease import ApiLeases, Lease
from tests.e2e.cluster import kube_api
from tests.e2e.controlplane import ControlPlane
from tests.support.relay import StallingRelay
from tests.support.waiting import wait_for_async

pytestmark = pytest.mark.e2e

LEASE = "archfit-releaser"


@dataclass
class Contenders:
    """Lease contenders on one Lease, their work, and what a sampler saw of them."""

    namespace: str
    control_plane: ControlPlane
    leases: dict[str, Lease] = field(default_factory=dict)
    tasks: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    running: set[str] = field(default_factory=set)
    most_running: int = 0
    """The most works that ever ran at once: must stay at most 1."""
    most_held: int = 0
    """The most contenders that held the Lease at one sample: must stay at most 1."""
    clients: list[KubeApi] = field(default_factory=list)

    def api(self, host: str | None = None) -> KubeApi:
        """An admin API client of its own, optionally through another host:port."""
        api = kube_api(self.control_plane.admin_kubeconfig, host)
        self.clients.append(api)
        return api

    def coordination(self) -> client.CoordinationV1Api:
        """The kubernetes client's Lease API, to read and write Leases as another tool would."""
        return client.CoordinationV1Api(
            config.new_client_from_config(config_file=str(self.control_plane.admin_kubeconfig))
        )

    def start(
        self,
        identity: str,
        *,
        api: KubeApi | None = None,
        duration: float = 8.0,
        renew: float = 1.0,
        clock: Callable[[], datetime.datetime] | None = None,
    ) -> Lease:
        """A contender that leads with a work that runs until cancelled."""
        extra: dict[str, Any] = {} if clock is None else {"clock": clock}
        lease = Lease(
            ApiLeases(api or self.api(), self.namespace, LEASE),
            identity,
            duration_seconds=duration,
            renew_seconds=renew,
            **extra,
        )
        self.leases[identity] = lease
        self.tasks[identity] = asyncio.create_task(lease.lead(self._work(identity)))
        return lease

    def _work(self, identity: str) -> Callable[[], Awaitable[None]]:
        async def work() -> None:
            self.running.add(identity)
            self.most_running = max(self.most_running, len(self.running))
            try:
                await asyncio.Event().wait()
            finally:
                self.running.discard(identity)

        return work

    def holders(self) -> list[str]:
        return [name for name, lease in self.leases.items() if lease.held]

    async def sample(self) -> None:
        """Forever: note how many hold the Lease, every few milliseconds."""
        while True:
            self.most_held = max(self.most_held, len(self.holders()))
            await asyncio.sleep(0.005)

    async def stop(self, identity: str) -> None:
        """Cancel one contender's lead(), as shutdown does, and wait until it has ended."""
        task = self.tasks.pop(identity)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    def read(self) -> dict[str, Any]:
        """The Lease's spec, as the apiserver has it."""
        lease = self.coordination().read_namespaced_lease(LEASE, self.namespace)
        return {
            "holder": lease.spec.holder_identity,
            "transitions": lease.spec.lease_transitions,
        }


@pytest.fixture
async def contenders(control_plane: ControlPlane, namespace: str) -> AsyncIterator[Contenders]:
    """Contenders on a Lease in the test's namespace, and a sampler; all stopped after."""
    found = Contenders(namespace, control_plane)
    sampler = asyncio.create_task(found.sample())
    try:
        yield found
    finally:
        sampler.cancel()
        for identity in list(found.tasks):
            await found.stop(identity)
        for api in found.clients:
            api.close()


@contextlib.contextmanager
def timed() -> Iterator[list[float]]:
    """Seconds elapsed in the block, in a one-element list once it ends."""
    start, elapsed = time.monotonic(), [0.0]
    yield elapsed
    elapsed[0] = time.monotonic() - start


async def one_holder(contenders: Contenders, seconds: float = 15.0) -> str:
    """The single contender that holds the Lease, once one does."""
    await wait_for_async(lambda: contenders.holders(), "a contender to hold the Lease", seconds)
    (holder,) = contenders.holders()
    return holder


async def test_of_two_contenders_exactly_one_holds_the_lease_and_runs_its_work(
    contenders: Contenders,
) -> None:
    """Started together: one holds, renews for several periods, and the other never gets in."""
    contenders.start("replica-a")
    contenders.start("replica-b")
    holder = await one_holder(contenders)
    await asyncio.sleep(3.5)  # three renewals and three tries of the other contender
    assert [holder] == contenders.holders()
    assert {holder} == contenders.running
    assert (1, 1) == (contenders.most_held, contenders.most_running)
    assert {"holder": holder, "transitions": 0} == await asyncio.to_thread(contenders.read)


async def test_a_cancelled_holder_gives_the_lease_up_and_the_other_takes_over_at_once(
    contenders: Contenders,
) -> None:
    """Shutdown clears holderIdentity: the successor takes over without waiting out the
    duration. Its clock stands still, so to it the Lease never expires: only the cleared
    holder can let it in."""
    contenders.start("replica-a")
    await one_holder(contenders)
    still = datetime.datetime.now(datetime.UTC)
    contenders.start("replica-b", clock=lambda: still)
    await asyncio.sleep(1.5)  # replica-b has tried and found the Lease held
    with capture_logs() as logs:
        await contenders.stop("replica-a")
        await one_holder(contenders)
    assert ["replica-b"] == contenders.holders()
    assert {"holder": "replica-b", "transitions": 1} == await asyncio.to_thread(contenders.read)
    assert {"replica-b"} == contenders.running
    assert [("lease_lost", "replica-a", "shutdown"), ("lease_acquired", "replica-b", None)] == [
        (e["event"], e["identity"], e.get("reason"))
        for e in logs
        if e["event"] in ("lease_acquired", "lease_lost")
    ]
    assert (1, 1) == (contenders.most_held, contenders.most_running)


async def test_a_holder_that_cannot_renew_stops_its_work_before_the_other_takes_over(
    contenders: Contenders, control_plane: ControlPlane
) -> None:
    """Its path to the apiserver stalls: it stops within the renew deadline (3 s), and the
    other takes the Lease only after seeing it unchanged for the duration (4 s)."""
    port = urlsplit(control_plane.server).port
    assert port is not None
    relay = await StallingRelay("127.0.0.1", port).start()
    try:
        stalled = contenders.start(
            "replica-a", api=contenders.api(f"https://127.0.0.1:{relay.port}"), duration=4.0
        )
        await one_holder(contenders)
        contenders.start("replica-b", duration=4.0)
        await asyncio.sleep(1.5)
        with capture_logs() as logs, timed() as lost_after:
            relay.stalled = True
            await wait_for_async(lambda: not stalled.held, "replica-a to give up", 10)
        assert [] == contenders.holders()  # replica-b has not seen the Lease expire yet
        holder = await one_holder(contenders)
    finally:
        await relay.close()
    assert "replica-b" == holder
    # Its last renewal was sent up to one period (1 s) before the stall, and it must stop
    # before the duration (4 s) runs out, when the other may take the Lease.
    assert 1.5 <= lost_after[0] <= 4.0, lost_after
    assert {"replica-b"} == contenders.running
    assert ["renewal_deadline"] == [e["reason"] for e in logs if e["event"] == "lease_lost"]
    assert (1, 1) == (contenders.most_held, contenders.most_running)


async def test_a_contender_whose_clock_runs_an_hour_ahead_never_takes_a_renewed_lease(
    contenders: Contenders,
) -> None:
    """Expiry is judged by how long a record stays unchanged, not by renewTime: skew is harmless."""

    def ahead() -> datetime.datetime:
        return datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)

    contenders.start("replica-a", duration=3.0)
    await one_holder(contenders)
    contenders.start("replica-b", duration=3.0, clock=ahead)
    await asyncio.sleep(7.0)  # more than twice the duration: replica-b tried about 6 times
    assert ["replica-a"] == contenders.holders()
    assert (1, 1) == (contenders.most_held, contenders.most_running)


class StillClock:
    """A contender's clock that moves only when the test says."""

    def __init__(self) -> None:
        self.now = datetime.datetime.now(datetime.UTC)

    def __call__(self) -> datetime.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += datetime.timedelta(seconds=seconds)


async def test_another_holder_in_the_record_cancels_the_work_until_its_record_expires(
    contenders: Contenders,
) -> None:
    """Someone else's name in the Lease stops the work at the next renewal; the record,
    never renewed, is taken back once it has stayed unchanged for its duration (5 s) on the
    contender's clock, and not before, however many times it looks."""
    clock = StillClock()
    lease = contenders.start("replica-a", clock=clock)
    await one_holder(contenders)
    api = contenders.coordination()
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    intruder = {"holderIdentity": "intruder", "leaseDurationSeconds": 5, "renewTime": now}
    with capture_logs() as logs, timed() as stopped_after:
        await asyncio.to_thread(api.patch_namespaced_lease, LEASE, contenders.namespace, [
            {"op": "add", "path": "/spec/holderIdentity", "value": intruder["holderIdentity"]},
            {"op": "add", "path": "/spec/leaseDurationSeconds", "value": 5},
            {"op": "add", "path": "/spec/renewTime", "value": now},
        ])  # fmt: skip
        await wait_for_async(lambda: not lease.held, "replica-a to see the intruder", 5)
    # Not waited out: the intruder's record, unchanged, would last its 5 s first.
    assert stopped_after[0] < 5, stopped_after
    assert set() == contenders.running
    await asyncio.sleep(2.5)  # replica-a looks again, twice, its clock standing still
    assert [] == contenders.holders()
    clock.advance(5)  # now the record has stayed unchanged for its duration
    await one_holder(contenders)
    assert {"holder": "replica-a", "transitions": 1} == await asyncio.to_thread(contenders.read)
    assert ["another_holder"] == [e["reason"] for e in logs if e["event"] == "lease_lost"]


@pytest.mark.parametrize("existing", [False, True], ids=["no-lease-yet", "released-lease"])
async def test_five_contenders_that_find_the_same_lease_at_once_let_one_win(
    contenders: Contenders, existing: bool
) -> None:
    """They read the same record and write it together: the apiserver lets one writer in
    (the create, or the write guarded by resourceVersion), so one holds it, ever."""
    if existing:
        body = client.V1Lease(
            metadata=client.V1ObjectMeta(name=LEASE),
            spec=client.V1LeaseSpec(lease_duration_seconds=1, lease_transitions=3),
        )
        api = contenders.coordination()
        await asyncio.to_thread(api.create_namespaced_lease, contenders.namespace, body)
    apis = [contenders.api() for _ in range(5)]
    for index, api_client in enumerate(apis):
        contenders.start(f"replica-{index}", api=api_client)
    holder = await one_holder(contenders)
    await asyncio.sleep(2.5)  # the losers have tried again: still one holder
    assert [holder] == contenders.holders()
    assert (1, 1) == (contenders.most_held, contenders.most_running)
    expected = {"holder": holder, "transitions": 4 if existing else 0}
    assert expected == await asyncio.to_thread(contenders.read)


async def test_times_on_whole_seconds_are_written_as_the_apiserver_parses_them(
    contenders: Contenders,
) -> None:
    """MicroTime needs six fraction digits, which isoformat() leaves out at .000000."""

    def whole_seconds() -> datetime.datetime:
        return datetime.datetime.now(datetime.UTC).replace(microsecond=0)

    lease = contenders.start("replica-a", clock=whole_seconds)
    await one_holder(contenders)
    await asyncio.sleep(2.5)  # two renewals
    api = contenders.coordination()
    spec = (await asyncio.to_thread(api.read_namespaced_lease, LEASE, contenders.namespace)).spec
    assert lease.held
    assert (0, 0) == (spec.renew_time.microsecond, spec.acquire_time.microsecond)
    assert spec.renew_time > spec.acquire_time
