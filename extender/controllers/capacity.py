"""The capacity check: pending pods whose platforms meet no node, no Karpenter NodePool and
nothing the operator declared, told where people look before anyone wonders why they wait.

Runs in `archfit serve` on the one replica that holds `capacity.leaseName`: one writer, so each
Event is written once however many replicas run, and `capacity.eventsPerSecond` bounds the
whole cluster's. It has a Lease of its own, not the watcher's, because it reads other things
(unbound pods and NodePools, not bound pods) and runs with the watcher off. Fed by the pending
pod list-watch (extender.kube.pending_pods), it resolves each pod's images (cached: the webhook
or the extender looked them up already), judges them against the capacity view
(extender.core.capacity), and for a shortfall writes a Warning Event on the pod and its
controller, once per message each, counts it and logs it. It never changes a pod: a decision
is the webhook's, the releaser's, the admission policy's or the extender's.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from extender.config.settings import Settings
from extender.controllers.leading import contender, leading, nodes_synced
from extender.controllers.rate_limit import RateLimit
from extender.controllers.tasks import Tasks
from extender.controllers.watcher import RESOLVE_SECONDS
from extender.core.capacity import Capacity, Shortfall, shortfall
from extender.core.mutation import MutationRules
from extender.core.pods import SKIP_ANNOTATION
from extender.errors import InputError
from extender.metrics import Metrics
from extender.resolution.within_deadline import Resolution
from extender.services import Services

if TYPE_CHECKING:  # the client is loaded only once API access is on
    from extender.kube.pending_pods import PendingPod

log = structlog.get_logger("archfit.capacity")

SHORTFALL_REASON = "ArchfitNoCapacity"
_CHECK_SECONDS = 1.0
"""How often the capacity view is compared with the last one judged (nodes come and go
through the node index, NodePools through their watch)."""
MAX_TOLD_CONTROLLERS = 10_000
"""Controllers remembered as told (one Event per message each); past it the oldest go."""


class CapacityCalls(Protocol):
    """What the check needs of the API (extender.kube.pod_watch.PodCalls)."""

    async def controller(self, namespace: str, kind: str, name: str) -> tuple[str, str, str]: ...

    async def event(
        self, namespace: str, regarding: tuple[str, str, str], reason: str, message: str
    ) -> None: ...


class CapacityCheck:
    """Fed by `on_pod` and `recheck`; its tasks resolve, judge and write Events."""

    def __init__(
        self,
        settings: Settings,
        rules: MutationRules,
        metrics: Metrics,
        calls: CapacityCalls,
        resolution: Resolution,
        capacity: Callable[[], Capacity],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._excluded = frozenset(settings.policy.excluded_namespaces)
        self._rules = rules
        self._metrics = metrics
        self._calls = calls
        self._resolution = resolution
        self._capacity = capacity
        self._pods: dict[str, PendingPod] = {}
        """uid → the pending pods that can be judged (not gated, skipped or a DaemonSet's)."""
        self._seen: set[str] = set()
        """uids told since the current list began (a relist forgets the others)."""
        self._short: dict[str, Shortfall] = {}
        """uid → its shortfall, for the pods that have one now."""
        self._told: dict[str, str] = {}
        """uid → the message its Event said last."""
        self._told_controllers: OrderedDict[tuple[str, str, str, str, str], None] = OrderedDict()
        """(namespace, apiVersion, kind, name, message) written on a controller already."""
        self._events = RateLimit(settings.capacity.events_per_second, clock)
        self._judged: Capacity | None = None
        self._tasks = Tasks(log, "capacity_task_failed")

    @property
    def short(self) -> dict[str, Shortfall]:
        """uid → shortfall of each pod that has one now (tests, the bench)."""
        return dict(self._short)

    def on_pod(self, kind: str, pod: PendingPod) -> None:
        if kind == "SYNCED":
            for uid in set(self._pods) - self._seen:
                self._forget(uid)
            self._seen.clear()
            self._gauge()
            return
        uid = pod.uid
        if not uid:
            return
        if kind == "DELETED" or not self._judgeable(pod):
            self._forget(uid)
            self._gauge()
            return
        self._seen.add(uid)
        self._pods[uid] = pod
        self._tasks.spawn(self._judge(pod, self._capacity()))

    def recheck(self) -> None:
        """Judge every pending pod again if the capacity changed since they were judged."""
        capacity = self._capacity()
        if capacity == self._judged:
            return
        self._judged = capacity
        for pod in list(self._pods.values()):
            self._tasks.spawn(self._judge(pod, capacity))

    def _judgeable(self, pod: PendingPod) -> bool:
        """Whether archfit speaks of this pod: not held by a gate (nothing places it yet),
        not leaving, not one archfit leaves alone, not a DaemonSet's (made for a node that
        exists)."""
        meta = pod.metadata
        owner = pod.controller()
        return not (
            pod.gated
            or meta.deletion_timestamp
            or meta.namespace in self._excluded
            or pod.annotation(SKIP_ANNOTATION).strip().lower() == "true"
            or (owner is not None and owner[0] == "DaemonSet")
            or not pod.images()
        )

    async def _judge(self, pod: PendingPod, capacity: Capacity) -> None:
        images = pod.images()
        resolved = await self._resolution.resolve(
            images, pod.pull(), RESOLVE_SECONDS, workload=pod.workload()
        )
        uid = pod.uid
        if self._pods.get(uid) is not pod:
            return  # gone, or changed since: its newer version is judged
        try:
            found = shortfall(
                pod.placement(),
                images,
                resolved,
                capacity,
                rule=self._rules.rule,
                aarch32=self._rules.aarch32,
            )
        except InputError:  # a spec the API would refuse: nothing to say of its capacity
            found = None
        if found is None:
            # Capacity it has now: should it lose it again, it is told again.
            self._short.pop(uid, None)
            self._told.pop(uid, None)
            self._gauge()
            return
        self._short[uid] = found
        self._gauge()
        if self._told.get(uid) == found.message:
            return
        self._told[uid] = found.message
        await self._report(pod, found)

    async def _report(self, pod: PendingPod, found: Shortfall) -> None:
        meta = pod.metadata
        log.warning(
            "pod_without_capacity",
            pod=meta.name,
            namespace=meta.namespace,
            needs=[str(p) for p in found.needs],
            images=list(found.images),
            said=found.message,
        )
        await self._event(meta.namespace, ("v1", "Pod", meta.name), found.message, "pod")
        owner = pod.controller()
        if owner is None:
            return
        top = await self._calls.controller(meta.namespace, *owner)
        key = (meta.namespace, *top, found.message)
        if key in self._told_controllers:
            return
        self._told_controllers[key] = None
        while len(self._told_controllers) > MAX_TOLD_CONTROLLERS:
            self._told_controllers.popitem(last=False)
        await self._event(meta.namespace, top, found.message, "controller")

    async def _event(
        self, namespace: str, regarding: tuple[str, str, str], message: str, what: str
    ) -> None:
        await self._events.wait()
        await self._calls.event(namespace, regarding, SHORTFALL_REASON, message)
        self._metrics.capacity_events.labels(what).inc()

    def _forget(self, uid: str) -> None:
        self._pods.pop(uid, None)
        self._short.pop(uid, None)
        self._told.pop(uid, None)

    def _gauge(self) -> None:
        self._metrics.capacity_short_pods.set(len(self._short))

    async def drain(self) -> None:
        """Wait for the work under way (tests, the bench)."""
        await self._tasks.drain()

    async def aclose(self) -> None:
        await self._tasks.cancel()
        self._metrics.capacity_short_pods.set(0)


@asynccontextmanager
async def checking(settings: Settings, metrics: Metrics, services: Services) -> AsyncIterator[None]:
    """While the block runs: contend for `capacity.leaseName`, and while holding it,
    list-watch pending pods and NodePools and tell the pods no capacity can run."""
    api: Any = services.kube
    if api is None:
        log.info("capacity_check_off", reason="no API access (kubernetes.mode)")
        yield
        return
    from extender.config.rules import mutation_rules_of
    from extender.kube.node_pools import NodePoolWatch
    from extender.kube.pending_pods import PendingPodWatch
    from extender.kube.pod_watch import PodCalls

    capacity_settings = settings.capacity
    declared = capacity_settings.declared_platforms
    nodes = services.nodes

    async def work() -> None:
        pools = NodePoolWatch(api) if capacity_settings.node_pools else None

        def capacity() -> Capacity:
            return Capacity(
                nodes.known_platforms() if nodes is not None else frozenset(),
                pools.offers() if pools is not None else (),
                declared,
            )

        check = CapacityCheck(
            settings,
            mutation_rules_of(settings),
            metrics,
            PodCalls(api, component="archfit.io/capacity"),
            services.resolution,
            capacity,
        )
        pending = PendingPodWatch(api, capacity_settings.page_size)
        try:
            if pools is not None:
                pools.start()
                # A shortfall named before the NodePools are read would be wrong.
                while not await pools.wait_synced(_CHECK_SECONDS):
                    pass
            check.recheck()
            pending.start(check.on_pod)
            while True:
                await asyncio.sleep(_CHECK_SECONDS)
                check.recheck()
        finally:
            await pending.stop()
            if pools is not None:
                await pools.stop()
            await check.aclose()

    lease = contender(
        api, settings.kubernetes, capacity_settings.lease_name, metrics.capacity_leader.set
    )
    async with leading(lease, work, ready=nodes_synced(services.nodes)):
        yield
