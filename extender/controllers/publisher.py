"""The admission policy's parameter, kept by one replica (a Lease) from every pod the cluster
has: the images they name, resolved by the leader (extender.core.image_uses,
extender.core.image_table), written as the ImagePlatforms object that kube-apiserver's
MutatingAdmissionPolicy reads and every replica reads as a cache tier (docs/webhook.md, "When
archfit is down")."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from extender.config.rules import mutation_rules_of
from extender.config.settings import AdmissionPolicySettings, Settings
from extender.controllers.leading import contender, holder_identity, leading
from extender.core.gates import never_held
from extender.core.image_table import (
    ImageTable,
    Published,
    Rendered,
    Switches,
    fair_order,
    most_left_out,
    parameter_spec,
)
from extender.core.image_uses import ImageUses, LookupSource, PodUse
from extender.core.mutation import MutationRules
from extender.core.parameter import DIGEST_MARK, PublishedTable, read_spec, workload_key
from extender.core.platforms import Platform, Resolved
from extender.core.pod_rules import with_cluster_platforms
from extender.core.pods import PullSecretsRef
from extender.core.text import MAX_LOGGED_ERROR, cut, utc_text
from extender.metrics import Metrics
from extender.services import Services

if TYPE_CHECKING:
    from extender.registry.resolver import ImageResolution

log = structlog.get_logger("archfit.publisher")

_LOOKUP_SECONDS = 30.0
"""How long one lookup of the leader may take before it counts as failed."""
_WORKERS = 16
"""Lookups the leader runs at once: new images first, then refreshes, oldest first."""
_SOURCES_TRIED = 3
"""References (with their namespaces' credentials) tried per lookup of one key."""
_RETRY_SECONDS = (5.0, 15.0, 60.0)
"""After a failed lookup, when the key is tried again (then every minute)."""
_RESYNC_SECONDS = 60.0
"""The object is read again this often, so one deleted or edited by hand is written again."""
_LEFT_OUT_LOGGED = 10
"""Namespaces named in the log line that says which namespaces had images left out."""
_FIRST_LOGGED = 10
"""Keys named in the line that says where a term's first refresh starts."""
_RENDER_AT_LEAST_SECONDS = 60.0
"""A round renders the spec again when what it reads changed, and at least this often."""


class ParameterStore(Protocol):
    """Where the parameter lives (extender.kube.image_platforms.ImagePlatformsStore)."""

    async def read(self) -> dict[str, Any] | None: ...

    async def write(self, spec: dict[str, Any], status: dict[str, Any]) -> None: ...


class Answers(Protocol):
    """What the leader resolves with (extender.resolution.learned_resolver.LearnedResolver): the
    registry through the cache (never the shared table it publishes), and the evidence it
    believes."""

    async def registry_answer(
        self, image: str, pull: PullSecretsRef | None = None
    ) -> ImageResolution: ...

    def believed(self, digest: str, platforms: frozenset[Platform]) -> frozenset[Platform]: ...

    def narrow_by(
        self,
        resolved: Mapping[str, Resolved],
        digest_of: Callable[[str], str | None],
        namespace: str,
        workload: str,
    ) -> Mapping[str, Resolved]: ...


class EvidenceScopes(Protocol):
    """Which workloads have learned evidence of their own (extender.resolution.evidence_book)."""

    @property
    def version(self) -> int:
        """Moves whenever what is believed changes."""
        ...

    def workloads(self) -> list[tuple[str, str]]: ...


class SeenPod(Protocol):
    """A pod as the shared pod feed tells it (extender.kube.pod_watch.WatchedPod)."""

    @property
    def uid(self) -> str: ...

    def use(self) -> PodUse | None: ...


class Publisher:
    """One leadership term: follows every pod, resolves what they name, writes the object
    whenever what it says changed."""

    def __init__(
        self,
        settings: AdmissionPolicySettings,
        answers: Answers,
        evidence: EvidenceScopes | None,
        rules: Callable[[], MutationRules],
        switches: Switches,
        store: ParameterStore,
        metrics: Metrics,
        *,
        identity: str = "",
        wall_clock: Callable[[], float] = time.time,
        clock: Callable[[], float] = time.monotonic,
        workers: int = _WORKERS,
    ) -> None:
        self._settings = settings
        self._answers = answers
        self._evidence = evidence
        self._rules = rules
        self._switches = switches
        self._store = store
        self._metrics = metrics
        self._identity = identity
        self._wall_clock = wall_clock
        self._clock = clock
        self._ignored = frozenset(switches.excluded_namespaces) | frozenset(switches.never_hold)
        self.uses = ImageUses(clock, self._wanted)
        self.table = ImageTable()
        self._new: deque[str] = deque()
        self._due: deque[str] = deque()
        self._busy: set[str] = set()
        self._failed: dict[str, tuple[float, int]] = {}
        """key → (when to try again, failures so far)."""
        self._carried_at: dict[str, float] = {}
        """Keys taken over that no pod named yet: when (they leave unusedSeconds after)."""
        self._work = asyncio.Event()
        self._workers = workers
        self._tasks: list[asyncio.Task[None]] = []
        self.synced = asyncio.Event()
        """Set once the first list of every pod has been told."""
        self._written: dict[str, Any] | None = None
        self._written_content: object = None
        self._written_at = 0.0
        self._read_at = 0.0
        self._left_out: dict[str, int] = {}
        self._in_use = 0
        self._refreshing_said = False
        self._last_render: Published | None = None
        self._times_written = -1
        self._last_inputs: object = None

    # -- pods, told by the list-watch ---------------------------------------------------------

    def on_pod(self, kind: str, pod: SeenPod) -> None:
        if kind == "LISTING":
            self.uses.relisting()
            return
        if kind == "SYNCED":
            self.uses.resync()
            self.synced.set()
            return
        uid = pod.uid
        if not uid:
            return
        if kind == "DELETED":
            self.uses.remove(uid)
            return
        use = pod.use()
        if use is not None and use.namespace in self._ignored:
            use = None
        self.uses.add(uid, use)

    def _wanted(self, key: str) -> None:
        """A key no pod named before: resolved next, before any refresh."""
        self._carried_at.pop(key, None)
        if key not in self.table:
            self._new.append(key)
            self._work.set()

    # -- the term -------------------------------------------------------------------------

    async def run(self) -> None:
        """Until cancelled: take over what the object lists, wait for the first list of every
        pod, then publish every publishSeconds. Errors are counted and logged; the next round
        tries again."""
        try:
            self.carry(await self._store.read())
        except Exception as error:  # the first publish finds out again
            log.warning("policy_parameter_unreadable", error=_short(error))
        self.start()
        try:
            await self.synced.wait()
            while True:
                await self.publish_once()
                await asyncio.sleep(self._settings.publish_seconds)
        finally:
            await self.aclose()

    def start(self) -> None:
        """Start the lookups (new keys first, then refreshes, oldest first)."""
        self._tasks = [
            asyncio.create_task(self._worker(), name=f"archfit-policy-lookup-{n}")
            for n in range(self._workers)
        ]

    async def aclose(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    def carry(self, spec: dict[str, Any] | None) -> None:
        """A new leader takes over what its predecessor published: each entry with its own
        resolved-at time, so the oldest are resolved again first; one that no pod names
        leaves unusedSeconds after the takeover, like any other."""
        if not spec:
            return
        try:
            published = PublishedTable.of(read_spec(spec))
        except ValueError as error:
            log.warning("policy_parameter_unreadable", error=_short(error))
            return
        carried = self.table.carry(published)
        now = self._clock()
        for key in published.images:
            if not self.uses.named(key):
                self._carried_at.setdefault(key, now)
        if carried:
            log.info("policy_images_carried", images=carried)

    async def publish_once(self) -> Published | None:
        """One round: drop what no pod named for unusedSeconds, queue what is due for a
        refresh (oldest first), render, and write if what the object says changed."""
        settings = self._settings
        dropped = self.table.drop(self.uses.drop_unused(settings.unused_seconds))
        horizon = self._clock() - settings.unused_seconds
        stale = [k for k, at in self._carried_at.items() if at < horizon and not self.uses.named(k)]
        for key in stale:
            del self._carried_at[key]
        dropped += self.table.drop(stale)
        if dropped:
            log.info(
                "policy_images_dropped", images=dropped, unused_seconds=settings.unused_seconds
            )
        self._queue_refreshes()
        published = self._rendered()
        self._count(published)
        return await self._write(published)

    def _rendered(self) -> Published:
        """`render()`, or the last one while nothing it reads has changed: the pods' use, the
        answers (their times only once refreshSeconds has passed since the last write, when
        the times would be written), learned evidence, the rules; and at least once a minute
        (evidence expires)."""
        rules = self._rules()
        inputs = (
            self.uses.version,
            self.table.version,
            self._evidence.version if self._evidence is not None else 0,
            rules,
            int(self._clock() // _RENDER_AT_LEAST_SECONDS),
        )
        due = self._wall_clock() - self._written_at >= self._settings.refresh_seconds
        times_to_write = due and self.table.times != self._times_written
        if self._last_render is not None and inputs == self._last_inputs and not times_to_write:
            return self._last_render
        self._last_render, self._last_inputs = self.render(rules), inputs
        return self._last_render

    def render(self, rules: MutationRules | None = None) -> Published:
        """The spec as of now (under `rules`, else the rules of now), fairly ordered, within
        maxBytes."""
        table, believed = self.table, self._answers.believed
        unattributed = [key for key in self._carried_at if key in table]
        entries: dict[str, Rendered] = {}
        for key in fair_order(self.uses.lanes(), unattributed):
            answer = table.get(key)
            if answer is None:
                continue
            found = answer.platforms
            if found is not None and answer.digest:
                found = believed(answer.digest, found)
            entries[key] = Rendered(found, answer.resolved_at, answer.carried)
        return parameter_spec(
            entries.items(),
            rules or self._rules(),
            self._switches,
            self._settings.max_bytes,
            workloads=self._workload_answers(entries),
            namespaces_of=self.uses.namespaces,
            max_entries=self._settings.max_entries,
        )

    def _workload_answers(
        self, believed: Mapping[str, Rendered]
    ) -> dict[str, dict[str, frozenset[Platform]]]:
        """Per workload with evidence of its own that the webhook would believe for its pods
        (judged, as the webhook judges a pod, with the image list most of its pods name):
        every image of that list and the set it has for that workload's pods. The policy
        applies them to a pod naming exactly those images."""
        if self._evidence is None:
            return {}
        from extender.core.parameter import table_key

        out: dict[str, dict[str, frozenset[Platform]]] = {}

        def digest_of(image: str) -> str | None:
            answer = self.table.get(table_key(image))
            return answer.digest if answer is not None and answer.digest else None

        for namespace, workload in self._evidence.workloads():
            lists = self.uses.workload_images(namespace, workload)
            if not lists:
                continue
            resolved: dict[str, Resolved] = {}
            for image in lists[0]:
                rendered = believed.get(table_key(image))
                if rendered is None or rendered.platforms is None:
                    break  # an image not known: the policy holds such a pod anyway
                resolved[image] = rendered.platforms
            else:
                narrowed = self._answers.narrow_by(resolved, digest_of, namespace, workload)
                if narrowed is not resolved:
                    out[workload_key(namespace, workload)] = {
                        table_key(image): found
                        for image, found in narrowed.items()
                        if isinstance(found, frozenset)
                    }
        return out

    # -- lookups ----------------------------------------------------------------------------

    def _queue_refreshes(self) -> None:
        """What is due for a refresh, oldest first (carried entries keep their own time, so
        those a former leader resolved longest ago come first)."""
        now = self._wall_clock()
        retry = {k for k, (at, _) in self._failed.items() if at <= self._clock()}
        self._due = deque(self.table.due(now, self._settings.refresh_seconds))
        if self._due and not self._refreshing_said:
            # Once a term: where refreshing starts (a takeover's carried entries, oldest first).
            self._refreshing_said = True
            oldest = self.table.get(self._due[0])
            log.info(
                "policy_refresh_started",
                due=len(self._due),
                first=list(self._due)[:_FIRST_LOGGED],
                oldest_resolved_at=utc_text(oldest.resolved_at)
                if oldest and oldest.resolved_at
                else None,
            )
        self._new.extend(k for k in retry if k not in self.table)
        if self._due or self._new:
            self._work.set()

    def _next_key(self) -> tuple[str, bool] | None:
        """The next key to resolve, and whether it is new: new keys first."""
        while self._new:
            key = self._new.popleft()
            if key not in self._busy and key not in self.table and self.uses.named(key):
                at = self._failed.get(key)
                if at is None or at[0] <= self._clock():
                    return key, True
        while self._due:
            key = self._due.popleft()
            at = self._failed.get(key)
            if key in self._busy or key not in self.table or (at and at[0] > self._clock()):
                continue
            return key, False
        return None

    async def _worker(self) -> None:
        while True:
            found = self._next_key()
            if found is None:
                self._work.clear()
                await self._work.wait()
                continue
            key, new = found
            self._busy.add(key)
            try:
                await self._resolve(key, new)
            finally:
                self._busy.discard(key)

    async def _resolve(self, key: str, new: bool) -> None:
        sources = self.uses.sources(key)[:_SOURCES_TRIED]
        if not sources and DIGEST_MARK not in key:
            sources = [LookupSource(key, PullSecretsRef(namespace=""))]
        failure: Exception | None = None
        for source in sources:
            try:
                async with asyncio.timeout(_LOOKUP_SECONDS):
                    found = await self._answers.registry_answer(source.image, source.pull)
            except Exception as error:  # counted and retried: the key stays unlisted meanwhile
                failure = error
                continue
            if not self.uses.named(key) and key not in self._carried_at:
                return  # its pods went meanwhile
            self.table.answer(key, found.platforms, found.digest, self._wall_clock())
            self._failed.pop(key, None)
            return
        if failure is None:
            return  # no reference to read it by (a digest no pod names now)
        _, failures = self._failed.get(key, (0.0, 0))
        wait = _RETRY_SECONDS[min(failures, len(_RETRY_SECONDS) - 1)]
        self._failed[key] = (self._clock() + wait, failures + 1)
        self._metrics.policy_lookup_failures.inc()
        if not failures:
            log.warning(
                "policy_image_unresolved",
                key=key,
                new=new,
                error=_short(failure),
                retry_in_s=wait,
            )

    # -- writing ----------------------------------------------------------------------------

    def _count(self, published: Published) -> None:
        metrics = self._metrics
        metrics.policy_pods_indexed.set(len(self.uses))
        in_use = [key for key in self.uses.followed() if self.uses.in_use(key)]
        self._in_use = len(in_use)
        metrics.policy_images_in_use.set(len(in_use))
        metrics.policy_unresolved.set(sum(1 for key in in_use if key not in self.table))
        left_out = published.left_out_by_namespace
        if left_out != self._left_out:
            top = most_left_out(left_out)
            log.info(
                "policy_images_left_out",
                left_out=published.evicted,
                namespaces=len(left_out),
                most=dict(list(top.items())[:_LEFT_OUT_LOGGED]),
                max_bytes=self._settings.max_bytes,
            )
            self._left_out = dict(left_out)

    async def _write(self, published: Published) -> Published | None:
        metrics = self._metrics
        now = self._wall_clock()
        content = _content(published.spec)
        if published.spec == self._written or (
            content == self._written_content
            and now - self._written_at < self._settings.refresh_seconds
        ):
            # Unchanged, or only resolved-at times moved: those are written at most once per
            # refreshSeconds (a time published late only makes a successor refresh sooner).
            if now - self._read_at < _RESYNC_SECONDS:
                metrics.policy_published.set(now)
                return published
            try:
                self._read_at = now
                if await self._store.read() == self._written:
                    metrics.policy_published.set(now)
                    return published
            except Exception as error:
                self._failed_write(error)
            return None
        try:
            await self._store.write(published.spec, self._status(published, now))
        except Exception as error:
            self._failed_write(error)
            return None
        self._written, self._written_content = published.spec, content
        self._times_written = self.table.times
        self._written_at = self._read_at = now
        metrics.policy_published.set(now)
        metrics.policy_images.set(published.images)
        metrics.policy_bytes.set(published.bytes)
        metrics.policy_evicted.set(published.evicted)
        metrics.policy_left_out_namespaces.set(len(published.left_out_by_namespace))
        log.info(
            "policy_parameter_published",
            images=published.images,
            bytes=published.bytes,
            left_out=published.evicted,
            workloads=len(published.spec["workloads"]),
        )
        return published

    def _failed_write(self, error: Exception) -> None:
        cause = _cause(error)
        self._metrics.policy_publish_failures.labels(cause).inc()
        log.warning("policy_publish_failed", cause=cause, error=_short(error))
        self._written = self._written_content = None

    def _status(self, published: Published, now: float) -> dict[str, Any]:
        return {
            "images": published.images,
            "bytes": published.bytes,
            "evicted": published.evicted,
            "leftOut": most_left_out(published.left_out_by_namespace),
            "inUse": self._in_use,
            "pods": len(self.uses),
            "publishedAt": utc_text(now),
            "publisher": self._identity,
        }


def _content(spec: Mapping[str, Any]) -> object:
    """What the spec says, resolved-at times aside: two specs equal here differ only in when
    their entries were resolved."""
    layout = spec.get("layout") or {}
    shift = int(layout.get("timeShift") or 0)
    mask = (1 << shift) - 1 if shift else -1
    images = {key: value & mask for key, value in spec["images"].items()}
    workloads = {
        name: {key: value & mask for key, value in entries.items()}
        for name, entries in spec["workloads"].items()
    }
    rest = {k: v for k, v in spec.items() if k not in ("images", "workloads")}
    return rest, images, workloads


def _cause(error: Exception) -> str:
    from extender.errors import ConflictError

    if isinstance(error, ConflictError):
        return "conflict"
    status = getattr(error, "status", None)
    if isinstance(status, int) and 400 <= status < 500:
        return "refused"
    return "error"


def _short(error: Exception) -> str:
    return cut(f"{type(error).__name__}: {error}", MAX_LOGGED_ERROR)


def switches_of(settings: Settings, namespace: str) -> Switches:
    """What the policy follows as the webhook does (docs/webhook.md, "Pods it leaves alone")."""
    hook = settings.webhook
    return Switches(
        enforce=settings.policy.mode != "dry-run",
        hold=hook.unknown_images == "gate",
        steering=hook.enabled and hook.steering,
        excluded_namespaces=settings.policy.excluded_namespaces,
        never_hold=tuple(sorted(never_held(settings.policy.excluded_namespaces, namespace))),
    )


def cluster_rules(settings: Settings, services: Services) -> Callable[[], MutationRules]:
    """The webhook's rules with the platforms the node index knows now."""
    rules = mutation_rules_of(settings)
    return lambda: with_cluster_platforms(rules, services.nodes)


@contextlib.asynccontextmanager
async def publishing(
    settings: Settings, metrics: Metrics, services: Services
) -> AsyncIterator[None]:
    """While the block runs: on every replica, watch the published object (the shared table's
    tier, `services.shared`); contend for the publisher's Lease, and while holding it follow
    every pod and publish. Without API access, or on a cluster without the v1 policy API or
    archfit's CRD, says so in one line and does nothing."""
    api, learned, feed = services.kube, services.learned, services.pods
    if api is None or learned is None or feed is None:
        log.warning("admission_policy_off", reason="no API access (kubernetes.mode)")
        yield
        return
    from extender.kube.connect import current_namespace
    from extender.kube.image_platforms import (
        ImagePlatformsStore,
        ParameterWatch,
        check_policy_api,
    )

    namespace = current_namespace(settings.kubernetes)
    identity = holder_identity()
    policy = settings.admission_policy
    table_watch = ParameterWatch(api, policy.parameter_name)

    async def work() -> None:
        publisher = Publisher(
            policy,
            learned,
            services.evidence,
            cluster_rules(settings, services),
            switches_of(settings, namespace),
            ImagePlatformsStore(api, policy.parameter_name),
            metrics,
            identity=identity,
        )
        reader = await feed.join(publisher.on_pod, bound_only=False)
        try:
            await publisher.run()
        finally:
            await feed.leave(reader)

    async def policy_api_present() -> bool:
        missing = await check_policy_api(api)
        if missing:
            log.warning("admission_policy_unavailable", reason=missing, serving="as without it")
            return False
        metrics.policy_enabled.set(1)
        if services.shared is not None:
            table_watch.start(services.shared.update)
        log.info(
            "admission_policy_publishing", parameter=policy.parameter_name, lease=policy.lease_name
        )
        return True

    lease = contender(
        api, settings.kubernetes, policy.lease_name, metrics.policy_publisher_leader.set, identity
    )
    try:
        async with leading(lease, work, ready=policy_api_present):
            yield
    finally:
        await table_watch.stop()
