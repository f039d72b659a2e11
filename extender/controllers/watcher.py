"""The mismatch watcher: finds containers that fail because of their node's platform, says so
where people look, learns from it, and (with `watcher.remediate`) evicts what cannot run.

Runs in `archfit serve` on the one replica that holds the watcher's Lease, fed by the pod
list-watch (extender.kube.pod_watch). For each finding (extender.core.mismatch.classify; for a
crash-loop, the end of its previous log, read once per restart at a bounded rate) it writes
a Warning Event on the pod and on its controller (a ReplicaSet's Deployment, a Job's
CronJob), counts it, and, for a digest that pulled but does not start there, learns
"digest D does not run on platform P" (extender.resolution.evidence_book), so the extender and
the webhook place the replacement elsewhere. Each finding is reported once. Memory holds only
the pods that are failing now, not the cluster's pods.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from extender.config.settings import Settings, WatcherSettings
from extender.controllers.leading import contender, leading, nodes_synced
from extender.controllers.rate_limit import RateLimit
from extender.controllers.tasks import Tasks
from extender.core.mismatch import (
    ContainerState,
    Evidence,
    Finding,
    advice,
    classify,
    from_log,
    provenance,
)
from extender.core.mismatch import wants_log as needs_log
from extender.core.platforms import Platform, any_accepts
from extender.core.pods import PullSecretsRef
from extender.core.text import cut
from extender.metrics import Metrics
from extender.registry.pure.reference import parse as parse_reference
from extender.resolution.evidence_book import EvidenceBook
from extender.resolution.within_deadline import Resolution
from extender.services import NodeSource, Services

if TYPE_CHECKING:  # the client is loaded only once API access is on
    from extender.kube.pod_watch import WatchedPod
    from extender.registry.resolver import ImageResolution
    from extender.registry.verify import Verification

log = structlog.get_logger("archfit.watcher")

FINDING_REASON = "ArchfitPlatformMismatch"
EVICTED_REASON = "ArchfitEvicted"
_RECHECK_SECONDS = 30.0
"""A not-Ready pod's images are compared with its node again at most this often."""
RESOLVE_SECONDS = 5.0
"""How long a controller waits for a pod's images to resolve (the cache answers most)."""
MAX_QUEUED_LOGS = 10_000
"""Previous-log reads waiting at most: past it the oldest goes (its container is queued again
at its next restart)."""


class Calls(Protocol):
    """What the watcher needs of the API (extender.kube.pod_watch.PodCalls)."""

    async def previous_log(self, pod: WatchedPod, container: str, limit_bytes: int) -> str: ...

    async def controller(self, namespace: str, kind: str, name: str) -> tuple[str, str, str]: ...

    async def event(
        self, namespace: str, regarding: tuple[str, str, str], reason: str, message: str
    ) -> None: ...

    async def evict(self, pod: WatchedPod) -> str: ...


class IndexChecks(Protocol):
    """Checks an index's entries against their image configs (LearnedResolver.verify)."""

    async def verify(
        self, image: str, pull: PullSecretsRef | None = None
    ) -> tuple[ImageResolution, Verification]: ...


class Watcher:
    """Fed by `on_pod`; its tasks write Events, read logs, learn and evict."""

    def __init__(
        self,
        settings: WatcherSettings,
        metrics: Metrics,
        calls: Calls,
        resolution: Resolution,
        nodes: NodeSource | None,
        book: EvidenceBook | None,
        indexes: IndexChecks | None = None,
        *,
        wall: Callable[[], float] = time.time,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._metrics = metrics
        self._calls = calls
        self._resolution = resolution
        self._nodes = nodes
        self._book = book
        self._indexes = indexes
        self._wall = wall
        self._clock = clock
        self._reported: dict[str, set[tuple[str, str]]] = {}
        """uid → (container, reason) already reported: each finding once."""
        self._broken: set[str] = set()
        """uids with a container failing on its platform now."""
        self._logs_read: dict[str, dict[str, int]] = {}
        """uid → container → the restart whose previous log was queued last."""
        self._log_queue: dict[tuple[str, str], tuple[WatchedPod, ContainerState]] = {}
        """(uid, container) → the pod and its latest restart, whose previous log waits to be
        read; oldest first."""
        self._log_reader: asyncio.Task[None] | None = None
        self._checked: dict[str, float] = {}
        """uid → when its images were last compared with its node (remediation)."""
        self._evicted: set[str] = set()
        self._seen: set[str] = set()
        """uids told since the current list began (a relist forgets the others)."""
        self._logs = RateLimit(settings.logs_per_second, clock)
        self._evictions = RateLimit(settings.evictions_per_minute / 60, clock)
        self._events = RateLimit(settings.events_per_second, clock)
        self._tasks = Tasks(log, "watcher_task_failed")
        self.findings = 0
        """How many findings were reported (the bench reads it)."""

    def on_pod(self, kind: str, pod: WatchedPod) -> None:
        if kind == "SYNCED":
            for uid in set(self._reported) | self._broken | set(self._checked):
                if uid not in self._seen:
                    self._forget(uid)
            self._seen.clear()
            self._gauge()
            return
        uid = pod.uid
        if not uid:
            return
        if kind == "DELETED":
            self._forget(uid)
            self._gauge()
            return
        self._seen.add(uid)
        self._examine(pod)

    def _examine(self, pod: WatchedPod) -> None:
        uid = pod.uid
        broken = False
        for state in pod.states():
            finding = classify(state)
            if finding is not None:
                broken = True
                self._found(pod, finding)
            elif needs_log(state):
                read = self._logs_read.setdefault(uid, {})
                if read.get(state.name) != state.restart_count:
                    read[state.name] = state.restart_count
                    self._queue_log(pod, state)
            if (state.name, "run") in self._reported.get(uid, ()):
                broken = broken or needs_log(state)
        if broken:
            self._broken.add(uid)
        else:
            self._broken.discard(uid)
        self._gauge()
        if self._settings.remediate:
            self._maybe_remediate(pod)

    def _found(self, pod: WatchedPod, finding: Finding) -> None:
        reported = self._reported.setdefault(pod.uid, set())
        if (finding.container, finding.reason) in reported:
            return
        reported.add((finding.container, finding.reason))
        self._tasks.spawn(self._report(pod, finding))

    def _queue_log(self, pod: WatchedPod, state: ContainerState) -> None:
        """Queue a read of the previous log: one entry per (pod, container), holding its
        latest restart in the place its first one took, so a thousand crash-looping
        containers are each read in turn, not once per restart behind each other."""
        queue = self._log_queue
        queue[(pod.uid, state.name)] = (pod, state)  # an update keeps its place
        while len(queue) > MAX_QUEUED_LOGS:
            del queue[next(iter(queue))]
        self._metrics.watcher_log_queue.set(len(queue))
        if self._log_reader is None:
            self._log_reader = self._tasks.spawn(self._read_queued_logs())

    async def _read_queued_logs(self) -> None:
        """Take the queue's oldest entry each time a `logsPerSecond` slot comes."""
        try:
            while self._log_queue:
                await self._logs.wait()
                if not self._log_queue:
                    break
                key = next(iter(self._log_queue))
                pod, state = self._log_queue.pop(key)
                self._metrics.watcher_log_queue.set(len(self._log_queue))
                self._tasks.spawn(self._read_log(pod, state))
        finally:
            self._log_reader = None

    async def _read_log(self, pod: WatchedPod, state: ContainerState) -> None:
        try:
            tail = await self._calls.previous_log(pod, state.name, self._settings.log_bytes)
        except Exception as error:  # a log that cannot be read tells nothing
            log.info("previous_log_unread", pod=pod.metadata.name, error=cut(str(error), 200))
            return
        finding = from_log(state, tail)
        if finding is not None:
            self._broken.add(pod.uid)
            self._gauge()
            self._found(pod, finding)

    async def _report(self, pod: WatchedPod, finding: Finding) -> None:
        meta = pod.metadata
        node = pod.spec.node_name
        facts = self._nodes.snapshot().get(node) if self._nodes is not None else None
        platform = facts[0] if facts is not None else None
        self.findings += 1
        self._metrics.mismatch_findings.labels(finding.reason).inc()
        log.warning(
            "platform_mismatch",
            pod=meta.name,
            namespace=meta.namespace,
            node=node,
            node_platform=str(platform) if platform else None,
            container=finding.container,
            image=finding.image,
            digest=finding.digest or None,
            reason=finding.reason,
            said=finding.message,
        )
        learned = None
        if finding.reason != "pull" and finding.digest and platform and self._book is not None:
            evidence = await self._evidence(pod, finding, platform)
            added = await self._book.learn(evidence)
            if added is not None:
                log.info(
                    "evidence_learned",
                    digest=finding.digest,
                    platform=str(platform),
                    scope=added.scope,
                    workload=added.workload,
                    provenance=added.provenance or None,
                    corroboration=added.corroboration or None,
                )
            learned = added or self._book.covering(evidence)
        message = advice(finding, platform, learned)
        await self._event(meta.namespace, ("v1", "Pod", meta.name), FINDING_REASON, message)
        owner = pod.controller()
        if owner is not None:
            top = await self._calls.controller(meta.namespace, *owner)
            await self._event(meta.namespace, top, FINDING_REASON, message)
        if learned is not None and self._settings.remediate:
            self._checked.pop(pod.uid, None)
            self._maybe_remediate(pod)

    async def _evidence(self, pod: WatchedPod, finding: Finding, platform: Platform) -> Evidence:
        """What the finding teaches, scoped to the pod's own workload unless its index's
        config corroborates it (docs/operations.md, "Learned evidence")."""
        meta = pod.metadata
        now = self._wall()
        return Evidence(
            finding.digest,
            platform,
            finding.image,
            finding.reason,
            now,
            now + self._settings.evidence_ttl_seconds,
            namespace=meta.namespace,
            workload=pod.workload().name,
            pod=meta.name,
            said=finding.message,
            provenance=provenance(finding.reason, pod.launch(finding.container)),
            corroboration=await self._config_disagrees(pod, finding, platform),
        )

    async def _config_disagrees(self, pod: WatchedPod, finding: Finding, platform: Platform) -> str:
        """How the index's own entry for `platform` is a build for another platform, per its
        image config ("" when it agrees, is a single manifest, or cannot be read): a fact
        of the registry, which no pod's owner controls (`archfit inspect --verify`)."""
        if self._indexes is None:
            return ""
        try:
            pinned = f"{parse_reference(finding.image).name}@{finding.digest}"
            _, verification = await asyncio.wait_for(
                self._indexes.verify(pinned, pod.pull()), RESOLVE_SECONDS
            )
        except Exception as error:  # unverified: the evidence stays with its workload
            log.info("index_unverified", image=finding.image, error=cut(str(error), 200))
            return ""
        for check in verification.checks:
            claimed, believed = check.claimed, check.believed
            if (claimed.os, claimed.architecture) != (platform.os, platform.architecture):
                continue
            if (believed.os, believed.architecture) != (platform.os, platform.architecture):
                return f"the index's {platform} entry is a {believed} image, per its config"
        return ""

    # --- remediation ------------------------------------------------------------------

    def _maybe_remediate(self, pod: WatchedPod) -> None:
        uid = pod.uid
        if pod.ready or not pod.failing or pod.controller() is None or not pod.spec.node_name:
            self._checked.pop(uid, None)
            return
        if uid in self._evicted or pod.metadata.deletion_timestamp:
            return
        now = self._clock()
        if now - self._checked.get(uid, -_RECHECK_SECONDS) < _RECHECK_SECONDS:
            return
        self._checked[uid] = now
        self._tasks.spawn(self._remediate(pod))

    async def _remediate(self, pod: WatchedPod) -> None:
        facts = self._nodes.snapshot().get(pod.spec.node_name) if self._nodes else None
        platform, rule, aarch32 = facts if facts is not None else (None, None, False)
        if platform is None or rule is None:
            return
        resolved = await self._resolution.resolve(
            pod.images(), pod.pull(), RESOLVE_SECONDS, workload=pod.workload()
        )
        lacking = [
            image
            for image, found in resolved.items()
            if isinstance(found, frozenset)
            and not any_accepts(platform, found, rule=rule, aarch32=aarch32)
        ]
        if not lacking:
            return
        await self._evictions.wait()
        if pod.uid in self._evicted or pod.uid not in self._checked:
            return  # gone or Ready meanwhile
        outcome = await self._calls.evict(pod)
        self._metrics.mismatch_evictions.labels(outcome).inc()
        meta = pod.metadata
        log.info(
            "pod_eviction",
            outcome=outcome,
            pod=meta.name,
            namespace=meta.namespace,
            node=pod.spec.node_name,
            node_platform=str(platform),
            images=lacking,
        )
        if outcome == "evicted":
            self._evicted.add(pod.uid)
            message = (
                f"archfit evicted this pod (watcher.remediate): {', '.join(lacking)} cannot run on"
                f" {platform}, and the pod was not Ready; its controller makes a replacement"
            )
            await self._event(meta.namespace, ("v1", "Pod", meta.name), EVICTED_REASON, message)

    # --- helpers ------------------------------------------------------------------------

    async def _event(
        self, namespace: str, regarding: tuple[str, str, str], reason: str, message: str
    ) -> None:
        await self._events.wait()
        await self._calls.event(namespace, regarding, reason, message)

    def _forget(self, uid: str) -> None:
        self._reported.pop(uid, None)
        self._broken.discard(uid)
        for container in self._logs_read.pop(uid, {}):
            self._log_queue.pop((uid, container), None)
        self._metrics.watcher_log_queue.set(len(self._log_queue))
        self._checked.pop(uid, None)
        self._evicted.discard(uid)

    def _gauge(self) -> None:
        self._metrics.mismatch_pods.set(len(self._broken))

    async def drain(self) -> None:
        """Wait for the work under way (tests, the bench)."""
        await self._tasks.drain()

    async def aclose(self) -> None:
        await self._tasks.cancel()
        self._log_queue.clear()
        self._metrics.mismatch_pods.set(0)
        self._metrics.watcher_log_queue.set(0)


@asynccontextmanager
async def watching(settings: Settings, metrics: Metrics, services: Services) -> AsyncIterator[None]:
    """While the block runs: contend for `watcher.leaseName`, and read the pods bound to a node
    from the shared pod feed (extender.kube.pod_feed) while holding it."""
    api: Any = services.kube
    feed = services.pods
    if api is None or feed is None:
        log.info("watcher_off", reason="no API access (kubernetes.mode)")
        yield
        return
    from extender.kube.pod_watch import PodCalls

    watch_settings = settings.watcher

    async def work() -> None:
        watcher = Watcher(
            watch_settings,
            metrics,
            PodCalls(api),
            services.resolution,
            services.nodes,
            services.evidence,
            services.learned,
        )
        reader = await feed.join(watcher.on_pod, bound_only=True)
        try:
            await asyncio.Event().wait()
        finally:
            await feed.leave(reader)
            await watcher.aclose()

    lease = contender(
        api, settings.kubernetes, watch_settings.lease_name, metrics.watcher_leader.set
    )
    async with leading(lease, work, ready=nodes_synced(services.nodes)):
        yield
