"""The releaser: lets held pods go once their images' platforms are known, or at the cap.

Runs in `archfit serve` on the one replica that holds the releaser's Lease. For each pod
held by archfit's gate it keeps asking for the pod's images (a failure is asked again
with backoff; a lookup still running is awaited, so one cold image costs one lookup for
every replica of a rollout), then writes the constraints the webhook would have written
and removes the gate in one patch guarded by the pod's uid and resourceVersion, at a
bounded rate. Each task is pinned to its pod's uid: a pod made since under the same name
(a StatefulSet's replacement) is another pod, and images changed while held are resolved
again before the release. A pod is never held past `webhook.gate.maxWaitSeconds`: it is
then released with the configured fallback. Every release writes an Event on the pod and
one log line.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import structlog

from extender.config.rules import mutation_rules_of
from extender.config.settings import Settings, WebhookGateSettings
from extender.controllers.leading import contender, leading
from extender.controllers.rate_limit import RateLimit
from extender.core.gates import PodChanged, ReleaseRefused, is_gated, release_operations
from extender.core.mutation import Mutation, MutationRules, decide_mutation
from extender.core.platforms import Resolved, Unknown
from extender.core.pod_rules import steered_rules, with_cluster_platforms
from extender.core.pods import Pod, PodError, PullSecretsRef, ShapeError, facts, read_pod
from extender.core.steering import SteeringSource
from extender.core.text import MAX_API_MESSAGE, error_text
from extender.metrics import Metrics
from extender.resolution.within_deadline import Resolution
from extender.services import Services

log = structlog.get_logger("archfit.releaser")

_MAX_BACKOFF_SECONDS = 4.0
"""A held pod looks again at least this often (or every `retrySeconds`, if longer), so it
goes within seconds of the registry answering again. The registry itself is asked past the
failure cache at most once per `retrySeconds` for each set of images, however many pods
wait on it, so this cap costs the registry nothing more."""
_GAUGE_SECONDS = 1.0
_LAST_LOOK_SECONDS = 1.0
"""How long a pod already past the cap still waits for its lookups before the fallback."""


class HeldPods(Protocol):
    """What the releaser needs of the API (extender.kube.gated_pods.GatedPods)."""

    async def read(self, namespace: str, name: str) -> Pod | None: ...

    async def patch(self, pod: Mapping[str, Any], operations: list[dict[str, Any]]) -> bool: ...

    async def event(
        self, pod: Mapping[str, Any], reason: str, message: str, *, warning: bool = False
    ) -> None: ...


@dataclass
class _Held:
    pod: Pod
    task: asyncio.Task[None] | None = None
    resolved: Mapping[str, Resolved] = field(default_factory=dict)
    patching: bool = False
    """The release patch is in flight: the watch may report its effect (the pod leaves the
    label selection, told as DELETED) before the patch call returns, and must not cancel the
    task, which still writes the Event and the line. At any other moment a DELETED ends the
    task."""


class Releaser:
    """Releases held pods; `on_change` is fed by the gated-pod watch."""

    def __init__(
        self,
        settings: WebhookGateSettings,
        metrics: Metrics,
        resolution: Resolution,
        rules: Callable[[], MutationRules],
        pods: HeldPods,
        *,
        steering: SteeringSource | None = None,
        wall_clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._settings = settings
        self._metrics = metrics
        self._resolution = resolution
        self._rules = rules
        self._pods = pods
        self._steering = steering
        """Namespace and workload preferences and the arm64 share, applied on release as
        on admission (docs/webhook.md)."""
        self._wall = wall_clock
        self._sleep = sleep
        """How a held pod's task waits between looks and between tries (a test's clock)."""
        self._held: dict[str, _Held] = {}
        self._probed: dict[tuple[tuple[str, ...], PullSecretsRef], float] = {}
        """When each set of images was last asked of the registry past the failure cache:
        once per `retrySeconds`, however many pods share it (a rollout's hundreds of
        replicas must not hammer a failing registry)."""
        self._limit = RateLimit(settings.releases_per_second)
        self._max_backoff = max(_MAX_BACKOFF_SECONDS, settings.retry_seconds)
        self._events: set[asyncio.Task[None]] = set()
        """Event writes under way, held so they are not garbage-collected mid-flight."""

    # --- fed by the watch ---------------------------------------------------------------

    def on_change(self, kind: str, pod: Pod) -> None:
        uid = str(pod.get("metadata", {}).get("uid") or "")
        if not uid:
            return
        held = self._held.get(uid)
        if kind == "DELETED" or not is_gated(pod):
            if held is None:
                return
            del self._held[uid]
            if not self._held:
                self._probed.clear()
            # A DELETED is the pod deleted, or its label removed, or the effect of a release
            # patch (the watch tells a pod that leaves the selection as DELETED). Only the
            # last may arrive while the patch is in flight; anything else ends the task, so
            # an answer meant for this pod never waits for a slot that a pod made since
            # under its name would get.
            if held.task is not None and not held.task.done() and not held.patching:
                held.task.cancel()
                if kind != "DELETED":
                    # The gate went, and not by archfit's hand (its task was still running).
                    self._metrics.gate_releases.labels("removed").inc()
                    log.info("pod_gate_removed", **_names(pod))
            self._gauges()
            return
        if held is None:
            held = self._held[uid] = _Held(pod)
            held.task = asyncio.create_task(self._hold(uid), name=f"archfit-hold-{uid}")
        else:
            held.pod = pod
        self._gauges()

    async def run(self) -> None:
        """Keep the gauges current until cancelled; then stop every held pod's task."""
        try:
            while True:
                self._gauges()
                await asyncio.sleep(_GAUGE_SECONDS)
        finally:
            tasks = [h.task for h in self._held.values() if h.task is not None]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._held.clear()
            self._metrics.gated_pods.set(0)
            self._metrics.gate_oldest_seconds.set(0)

    # --- one held pod -------------------------------------------------------------------

    async def _hold(self, uid: str) -> None:
        backoff = self._settings.retry_seconds
        while (held := self._held.get(uid)) is not None:
            try:
                pod_facts = facts(held.pod)
            except PodError as error:
                # Unreadable images: nothing will ever resolve; never strand the pod.
                if await self._release(uid, None, {}, at_cap=True, why=str(error)):
                    return
                continue
            left = self._settings.max_wait_seconds - self._age(held.pod)
            # A lookup still running is awaited up to the cap (and a moment past it, so a pod
            # found late, after an outage of archfit, still gets what the cache knows); a
            # failure answers at once, and is asked again rather than answered from the
            # failure cache, so a pod goes within seconds of the registry's recovery.
            key = (pod_facts.images, pod_facts.pull)
            now = time.monotonic()
            fresh = now - self._probed.get(key, -math.inf) >= self._settings.retry_seconds
            if fresh:
                self._probed[key] = now
            held.resolved = await self._resolution.resolve(
                pod_facts.images,
                pod_facts.pull,
                max(left, _LAST_LOOK_SECONDS),
                fresh_failures=fresh,
                workload=pod_facts.workload,
            )
            if not any(isinstance(r, Unknown) for r in held.resolved.values()):
                if await self._release(uid, key, held.resolved, at_cap=False):
                    return
                continue  # the images changed while held: resolve the new ones
            left = self._settings.max_wait_seconds - self._age(held.pod)
            if left <= 0:
                if await self._release(uid, key, held.resolved, at_cap=True):
                    return
                continue
            await self._sleep(min(backoff, left))
            backoff = min(backoff * 2, self._max_backoff)

    async def _release(
        self,
        uid: str,
        key: _ImagesKey | None,
        resolved: Mapping[str, Resolved],
        *,
        at_cap: bool,
        why: str = "",
    ) -> bool:
        """Patch until the pod is released or gone. A refused patch leaves the pod held and
        is tried again; past the cap the pod goes without the refused constraints.

        `resolved` answers for the images `key` names. Every patch is built from the pod
        about to be patched, and pins its uid and resourceVersion; if that pod's images are
        no longer `key`'s (`spec.containers[].image` may change on a gated pod), nothing is
        patched and False is returned: the caller resolves them again.
        """
        held = self._held.get(uid)
        if held is None:
            return True
        pod, refused, backoff = held.pod, False, self._settings.retry_seconds
        while True:
            if _images_of(pod) != key:
                log.info("pod_images_changed_while_held", **_names(pod))
                return False
            constrain = not (refused and self._age(pod) >= self._settings.max_wait_seconds)
            mutation, released = self._decide(pod, resolved, at_cap, constrain)
            if self._steering is not None and mutation and mutation.steering:
                # Counted at once, as admission counts: the releases of a workload's held
                # pods run concurrently, and each must see the sides chosen before it.
                self._steering.chosen(mutation.steering, mutation.arch_choice)
            operations = release_operations(
                pod, mutation.operations(dry_run=False) if mutation else [], released
            )
            await self._limit.wait()
            try:
                present = await self._patch(held, pod, operations)
            except PodChanged:
                self._metrics.gate_release_errors.labels("conflict").inc()
                fresh = await self._read_again(uid, pod)
                if fresh is None:
                    return True
                held.pod = pod = fresh
                continue
            except ReleaseRefused as error:
                self._metrics.gate_release_errors.labels("refused").inc()
                log.error(
                    "pod_release_refused", error=error_text(error, MAX_API_MESSAGE), **_names(pod)
                )
                refused = True
            except Exception as error:  # the API is unreachable: keep trying, never give up
                self._metrics.gate_release_errors.labels("error").inc()
                log.warning("pod_release_failed", error=error_text(error), **_names(pod))
            else:
                if present:
                    self._released(pod, resolved, mutation, released, at_cap, why)
                return True
            await self._sleep(backoff)
            backoff = min(backoff * 2, self._max_backoff)
            fresh = await self._read_again(uid, pod)
            if fresh is None:
                return True
            held.pod = pod = fresh

    async def _patch(self, held: _Held, pod: Pod, operations: list[dict[str, Any]]) -> bool:
        held.patching = True
        try:
            return await self._pods.patch(pod, operations)
        finally:
            held.patching = False

    async def _read_again(self, uid: str, pod: Pod) -> Pod | None:
        """The pod as it is now, or None when it is gone, replaced by another pod of the same
        name (another uid), or no longer held by archfit."""
        try:
            fresh = await self._pods.read(_ns(pod), _name(pod))
        except Exception as error:
            log.warning("pod_read_failed", error=error_text(error), **_names(pod))
            return pod
        if fresh is None or not is_gated(fresh):
            return None
        if str(fresh.get("metadata", {}).get("uid") or "") != uid:
            log.info("pod_replaced_while_held", **_names(pod))
            return None
        return fresh

    def _decide(
        self, pod: Pod, resolved: Mapping[str, Resolved], at_cap: bool, constrain: bool
    ) -> tuple[Mutation | None, str]:
        """The constraints to write and the `archfit.io/released` text."""
        if not constrain:
            return None, "without constraints: the apiserver refused them"
        rules = replace(self._rules(), scheduler_name="")  # immutable after CREATE
        rules = steered_rules(rules, pod, self._steering)
        images = tuple(resolved)
        try:
            view = read_pod(pod)
            if not at_cap:
                return decide_mutation(view, images, resolved, rules), "resolved"
            fallback = self._settings.fallback
            if fallback == "admit":
                return None, "at the cap, fallback admit: unconstrained"
            if fallback == "known":
                mutation = decide_mutation(view, images, resolved, rules, known_only=True)
                return mutation, "at the cap, fallback known: constrained by the known images"
            on_arch = frozenset(p for p in rules.platforms if p.architecture == fallback)
            assumed = {i: r if isinstance(r, frozenset) else on_arch for i, r in resolved.items()}
            mutation = decide_mutation(view, images, assumed, rules)
            return mutation, f"at the cap, fallback {fallback}"
        except ShapeError:
            return None, "without constraints: the pod's affinity is unreadable"
        except PodError:
            return None, "without constraints: the pod's images are unreadable"

    def _released(
        self,
        pod: Pod,
        resolved: Mapping[str, Resolved],
        mutation: Mutation | None,
        released: str,
        at_cap: bool,
        why: str,
    ) -> None:
        waited = self._age(pod)
        outcome = "fallback" if at_cap else "resolved"
        self._metrics.gate_releases.labels(outcome).inc()
        self._metrics.gate_wait_seconds.observe(waited)
        changes = mutation.changes if mutation else []
        unknown = {i: r.reason for i, r in resolved.items() if isinstance(r, Unknown)}
        log.info(
            "pod_released",
            outcome=outcome,
            released=released,
            changes=changes,
            runs_on=list(mutation.runs_on) if mutation else None,
            unknown_images=unknown or None,
            held_s=round(waited, 3),
            **_names(pod),
        )
        done = ", ".join(changes) or "no constraint"
        if at_cap:
            reasons = "; ".join(f"{i}: {r}" for i, r in unknown.items()) or why or "unknown"
            message = (
                f"archfit held this pod {waited:.0f}s (webhook.gate.maxWaitSeconds) without "
                f"learning every image's platforms ({reasons}); released {released} ({done})"
            )
        else:
            runs_on = ",".join(mutation.runs_on) if mutation else ""
            message = (
                f"archfit held this pod {waited:.1f}s until its images' platforms were known "
                f"({runs_on or 'none of the cluster'}); released with {done}"
            )
        if mutation and mutation.warnings:
            message += "; " + "; ".join(mutation.warnings)
        task = asyncio.create_task(
            self._pods.event(
                pod,
                "ArchfitReleasedAtCap" if at_cap else "ArchfitReleased",
                message,
                warning=at_cap,
            )
        )
        self._events.add(task)
        task.add_done_callback(self._events.discard)

    # --- helpers ------------------------------------------------------------------------

    def _age(self, pod: Mapping[str, Any]) -> float:
        created = pod.get("metadata", {}).get("creationTimestamp")
        try:
            when = datetime.datetime.fromisoformat(str(created).replace("Z", "+00:00"))
        except ValueError:
            return 0.0
        return max(self._wall() - when.timestamp(), 0.0)

    def _gauges(self) -> None:
        self._metrics.gated_pods.set(len(self._held))
        ages = [self._age(h.pod) for h in self._held.values()]
        self._metrics.gate_oldest_seconds.set(max(ages, default=0.0))


_ImagesKey = tuple[tuple[str, ...], PullSecretsRef]
"""A pod's images and the pull secrets they are read with: what one resolution answers."""


def _images_of(pod: Mapping[str, Any]) -> _ImagesKey | None:
    """The pod's images and pull secrets, or None when they cannot be read."""
    try:
        pod_facts = facts(pod)
    except PodError:
        return None
    return pod_facts.images, pod_facts.pull


def _ns(pod: Mapping[str, Any]) -> str:
    return str(pod["metadata"]["namespace"])


def _name(pod: Mapping[str, Any]) -> str:
    return str(pod["metadata"]["name"])


def _names(pod: Mapping[str, Any]) -> dict[str, str]:
    return {"pod": _name(pod), "namespace": _ns(pod)}


def releasing(
    settings: Settings, metrics: Metrics, services: Services
) -> contextlib.AbstractAsyncContextManager[None]:
    """While the block runs: contend for `webhook.gate.leaseName`, and release held pods
    while holding it. Only with API access (whoever holds pods made sure of it)."""
    from extender.kube.gated_pods import GatedPods

    api: Any = services.kube
    gate = settings.webhook.gate
    rules = mutation_rules_of(settings)

    async def release() -> None:
        pods = GatedPods(api)
        releaser = Releaser(
            gate,
            metrics,
            services.resolution,
            lambda: with_cluster_platforms(rules, services.nodes),
            pods,
            steering=services.steering,
        )
        pods.start(releaser.on_change)
        try:
            await releaser.run()
        finally:
            await pods.stop()

    return leading(
        contender(api, settings.kubernetes, gate.lease_name, metrics.releaser_leader.set), release
    )
