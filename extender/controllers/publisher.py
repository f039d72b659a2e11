"""The admission policy's parameter, kept current by one replica (a Lease): what archfit has
resolved (extender.core.image_table), written as the ImagePlatforms object that kube-apiserver's
MutatingAdmissionPolicy reads (docs/webhook.md, "When archfit is down")."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

import structlog

from extender.config.rules import mutation_rules_of
from extender.config.settings import AdmissionPolicySettings, Settings
from extender.controllers.leading import contender, holder_identity, leading
from extender.core.gates import never_held
from extender.core.image_table import REFRESHING, ImageTable, Published, Switches, parameter_spec
from extender.core.mutation import MutationRules
from extender.core.platforms import Platform, parse
from extender.core.pods import PullSecretsRef
from extender.core.text import MAX_LOGGED_ERROR, cut
from extender.lookups.resolution import Resolution
from extender.metrics import Metrics
from extender.services import Services, with_cluster_platforms

log = structlog.get_logger("archfit.publisher")

_REFRESH_BUDGET_SECONDS = 10.0
_RESYNC_SECONDS = 60.0
"""The object is read again this often, so one deleted or edited by hand is written again."""


class ParameterStore(Protocol):
    """Where the parameter lives (extender.kube.image_platforms.ImagePlatformsStore)."""

    async def read(self) -> dict[str, Any] | None: ...

    async def write(self, spec: dict[str, Any], status: dict[str, Any]) -> None: ...


class Publisher:
    """Writes the parameter whenever what it says changes, and keeps the table fresh."""

    def __init__(
        self,
        settings: AdmissionPolicySettings,
        table: ImageTable,
        resolution: Resolution,
        rules: Callable[[], MutationRules],
        switches: Switches,
        store: ParameterStore,
        metrics: Metrics,
        *,
        identity: str = "",
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._settings = settings
        self._table = table
        self._resolution = resolution
        self._rules = rules
        self._switches = switches
        self._store = store
        self._metrics = metrics
        self._identity = identity
        self._wall_clock = wall_clock
        self._written: dict[str, Any] | None = None
        self._read_at = 0.0

    async def run(self) -> None:
        """Forever: take over what the object already lists, then publish every
        publishSeconds. Errors are counted and logged; the next round tries again."""
        try:
            self._carry(await self._store.read())
        except Exception as error:  # the first publish finds out again
            log.warning("policy_parameter_unreadable", error=_short(error))
        while True:
            await self.publish_once()
            await asyncio.sleep(self._settings.publish_seconds)

    async def publish_once(self) -> Published | None:
        """One round: drop unused images, resolve due ones again, write if changed."""
        settings = self._settings
        dropped = self._table.drop_unused(settings.unused_seconds)
        if dropped:
            log.info(
                "policy_images_dropped", images=dropped, unused_seconds=settings.unused_seconds
            )
        await self._refresh()
        published = parameter_spec(
            self._table.recent_first(), self._rules(), self._switches, settings.max_bytes
        )
        metrics = self._metrics
        now = self._wall_clock()
        if published.spec == self._written and now - self._read_at < _RESYNC_SECONDS:
            metrics.policy_published.set(now)
            return published
        try:
            if published.spec == self._written:
                self._read_at = now
                if await self._store.read() == published.spec:
                    metrics.policy_published.set(now)
                    return published
            await self._store.write(published.spec, self._status(published, now))
        except Exception as error:
            cause = _cause(error)
            metrics.policy_publish_failures.labels(cause).inc()
            log.warning("policy_publish_failed", cause=cause, error=_short(error))
            self._written = None
            if cause == "conflict":
                with contextlib.suppress(Exception):
                    await self._store.read()
            return None
        self._written, self._read_at = published.spec, now
        metrics.policy_published.set(now)
        metrics.policy_images.set(published.images)
        metrics.policy_bytes.set(published.bytes)
        metrics.policy_evicted.set(published.evicted)
        log.info(
            "policy_parameter_published",
            images=published.images,
            bytes=published.bytes,
            evicted=published.evicted,
        )
        return published

    def _status(self, published: Published, now: float) -> dict[str, Any]:
        moment = datetime.datetime.fromtimestamp(now, datetime.UTC)
        return {
            "images": published.images,
            "bytes": published.bytes,
            "evicted": published.evicted,
            "publishedAt": moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "publisher": self._identity,
        }

    async def _refresh(self) -> None:
        """Resolve again what was last resolved refreshSeconds ago (a tag may have moved);
        a refresh is not a use (REFRESHING), and a failed one keeps the last answer."""
        due = self._table.due(self._settings.refresh_seconds)
        if not due:
            return
        by_pull: dict[PullSecretsRef, list[str]] = defaultdict(list)
        for image, pull in due:
            by_pull[pull].append(image)
        token = REFRESHING.set(True)
        try:
            for pull, images in by_pull.items():
                await self._resolution.resolve(images, pull, _REFRESH_BUDGET_SECONDS)
        finally:
            REFRESHING.reset(token)

    def _carry(self, spec: dict[str, Any] | None) -> None:
        """A new leader takes over the images its predecessor published, as the platforms
        of this cluster each ran on; they leave once unused, like any other."""
        if not spec:
            return
        platforms = {int(p["bit"]): _platform_of(p) for p in spec.get("platforms") or ()}
        carried = 0
        for image, value in (spec.get("images") or {}).items():
            if image in (spec.get("nativeImages") or {}):
                continue  # a 32-bit Arm case: its entries cannot be told from the bits
            runs_on = frozenset(p for bit, p in platforms.items() if int(value) & bit)
            if self._table.carry(image, runs_on):
                carried += 1
        if carried:
            log.info("policy_images_carried", images=carried)


def _platform_of(entry: dict[str, Any]) -> Platform:
    text = f"{entry['os']}/{entry['architecture']}"
    if entry.get("variant"):
        text += f"/{entry['variant']}"
    return parse(text)


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
    """While the block runs, contend for the publisher's Lease and publish while holding it.
    Without API access, or on a cluster without the v1 policy API or archfit's CRD, says so
    in one line and does nothing."""
    api, table = services.kube, services.images
    if api is None or table is None:
        log.warning("admission_policy_off", reason="no API access (kubernetes.mode)")
        yield
        return
    from extender.kube.access import current_namespace
    from extender.kube.image_platforms import ImagePlatformsStore, check_policy_api

    namespace = current_namespace(settings.kubernetes)
    identity = holder_identity()
    policy = settings.admission_policy
    publisher = Publisher(
        policy,
        table,
        services.resolution,
        cluster_rules(settings, services),
        switches_of(settings, namespace),
        ImagePlatformsStore(api, policy.parameter_name),
        metrics,
        identity=identity,
    )

    async def policy_api_present() -> bool:
        missing = await check_policy_api(api)
        if missing:
            log.warning("admission_policy_unavailable", reason=missing, serving="as without it")
            return False
        metrics.policy_enabled.set(1)
        log.info(
            "admission_policy_publishing", parameter=policy.parameter_name, lease=policy.lease_name
        )
        return True

    lease = contender(
        api, settings.kubernetes, policy.lease_name, metrics.policy_publisher_leader.set, identity
    )
    async with leading(lease, publisher.run, ready=policy_api_present):
        yield
