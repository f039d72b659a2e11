"""The mutating admission webhook: its own TLS listener, one handler, never a denial.

kube-apiserver calls webhooks over HTTPS only, so the webhook listens apart from the
extender verbs, on a certificate that follows its files (`extender.tls`). The handler
translates: decode, skip or resolve, `mutation.decide_mutation`, explain, render.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import structlog
from aiohttp import web

from extender import explain
from extender.admission_api import AdmissionRequest, WireError, parse_review, render_allowed
from extender.config import Settings
from extender.gates import gate_operations
from extender.listener import (
    BodyTimeout,
    ConnectionGuard,
    GuardedSite,
    answer_and_close,
    client_problem,
    handler_options,
    read_body,
)
from extender.metrics import Metrics, tally_request_lookups
from extender.mutation import MutationRules, ShapeError, TaintRule, decide_mutation
from extender.once import OncePerCause
from extender.platforms import Platform, Resolved, Rule
from extender.platforms import parse as parse_platform
from extender.pods import PodError, PodFacts, facts, skip_reason
from extender.services import Services
from extender.tls import ReloadingCertificate
from extender.wire_json import JsonError
from extender.workload_admission import WorkloadWarner

log = structlog.get_logger("archfit")

RULES = web.AppKey("webhook_rules", MutationRules)


@dataclass(frozen=True, slots=True)
class Hold:
    """Whether pods whose images are unknown at the deadline are held by the gate."""

    never: frozenset[str]
    """Namespaces never held: archfit's own and kube-system, so that archfit and the
    control plane can always start (a held archfit could never release itself)."""


HOLD = web.AppKey("webhook_hold", Hold)
"""Present when `webhook.unknownImages: gate` and a releaser runs (API access is on)."""

_MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


class WebhookSetupError(RuntimeError):
    """The webhook cannot start as configured; the message names the setting."""


def base_rules(settings: Settings) -> MutationRules:
    """The mutation rules the settings give, before the node index adds its platforms."""
    hook, policy = settings.webhook, settings.policy
    return MutationRules(
        platforms=frozenset(parse_platform(text) for text in hook.architectures),
        arch_preference=policy.arch_preference,
        taints=tuple(TaintRule(t.architecture, t.key, t.value, t.effect) for t in hook.arch_taints),
        rule=Rule.STRICT if policy.matching == "strict" else Rule.LOOSE,
        aarch32=policy.arm32_on_arm64 == "pull-rule",
        scheduler_name=hook.scheduler_name,
    )


def create_webhook_app(settings: Settings, metrics: Metrics, services: Services) -> web.Application:
    """The webhook's own app: POST <webhook.path> only, sharing the extender's services."""
    app = web.Application(client_max_size=settings.webhook.max_body_bytes)
    app[_WARNINGS] = OncePerCause()
    app[_GUARD] = ConnectionGuard(settings.server, metrics, app[_WARNINGS])
    app[_SETTINGS] = settings
    app[_METRICS] = metrics
    app[_SERVICES] = services
    app[RULES] = base_rules(settings)
    hold = _hold_of(settings, services)
    if hold is not None:
        app[HOLD] = hold
    app.router.add_post(settings.webhook.path, mutate_handler)
    if settings.webhook.workload_warnings.enabled:
        # The second admission path: warnings on workloads (extender.workload_admission).
        WorkloadWarner(settings, metrics, services, app[RULES], app[_WARNINGS]).route(app)
    return app


def _hold_of(settings: Settings, services: Services) -> Hold | None:
    if settings.webhook.unknown_images != "gate":
        return None
    if services.kube is None:
        # Nothing could ever release a held pod: never hold one.
        log.warning(
            "webhook_gate_off",
            reason="no API access (kubernetes.mode), so no releaser can run",
            unknown_images="admitted, constrained by the images that did resolve",
        )
        return None
    from extender.kube.client import current_namespace

    return Hold(never=frozenset({"kube-system", current_namespace(settings.kubernetes)}))


async def _release_held(
    settings: Settings, metrics: Metrics, services: Services, rules: MutationRules
) -> None:
    """The releaser, on whichever replica holds the Lease (extender.releaser)."""
    from extender.kube.client import current_namespace
    from extender.kube.gated_pods import GatedPods
    from extender.kube.lease import Lease
    from extender.releaser import Releaser

    api: Any = services.kube  # _hold_of made sure there is one

    async def release() -> None:
        pods = GatedPods(api)
        releaser = Releaser(
            settings.webhook.gate,
            metrics,
            services.resolution,
            lambda: _with_cluster_platforms(rules, services),
            pods,
            steering=services.steering,
        )
        pods.start(releaser.on_change)
        try:
            await releaser.run()
        finally:
            await pods.stop()

    identity = f"{os.environ.get('POD_NAME') or socket.gethostname()}-{uuid.uuid4().hex[:6]}"
    lease = Lease(
        api,
        current_namespace(settings.kubernetes),
        settings.webhook.gate.lease_name,
        identity,
        on_change=metrics.releaser_leader.set,
    )
    await lease.lead(release)


_SETTINGS = web.AppKey("webhook_settings", Settings)
_METRICS = web.AppKey("webhook_metrics", Metrics)
_SERVICES = web.AppKey("webhook_services", Services)
_WARNINGS = web.AppKey("webhook_warnings", OncePerCause)
_GUARD = web.AppKey("webhook_connection_guard", ConnectionGuard)


async def mutate_handler(request: web.Request) -> web.Response:
    started = time.perf_counter()
    app = request.app
    settings, metrics, services = app[_SETTINGS], app[_METRICS], app[_SERVICES]
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(
        request_id=request.headers.get("X-Request-Id") or uuid.uuid4().hex[:16], verb="mutate"
    )
    warnings = app[_WARNINGS]
    try:
        body = await read_body(request, settings.server.body_timeout_seconds)
        review = parse_review(body)
    except WireError as error:
        # kube-apiserver never sends this; failurePolicy Ignore admits the pod anyway.
        client_problem(metrics, warnings, "bad_request", path=request.path, problem=str(error))
        metrics.admissions.labels("bad_request").inc()
        return web.json_response({"error": str(error)}, status=400)
    except web.HTTPRequestEntityTooLarge as error:
        client_problem(metrics, warnings, "bad_request", path=request.path, problem=error.reason)
        metrics.admissions.labels("bad_request").inc()
        return web.json_response({"error": error.reason}, status=413)
    except (BodyTimeout, ConnectionResetError) as error:
        cause = "body_timeout" if isinstance(error, BodyTimeout) else "disconnected"
        client_problem(metrics, warnings, cause, path=request.path)
        return await answer_and_close(
            request, web.json_response({"error": "request body not received"}, status=408)
        )
    try:
        answer = await _admit(
            review, settings, metrics, warnings, services, app[RULES], app.get(HOLD), started
        )
    except Exception as error:
        # archfit's own failure must never stop a pod: allow it unchanged, loudly.
        if warnings.admit(f"admission_internal_error:{type(error).__name__}:{error}") is not None:
            log.exception("admission_internal_error", uid=review.uid)
        metrics.admissions.labels("error").inc()
        answer = render_allowed(review.uid)
    metrics.admission_seconds.observe(time.perf_counter() - started)
    return web.Response(body=answer, content_type="application/json")


async def _admit(
    review: AdmissionRequest,
    settings: Settings,
    metrics: Metrics,
    warnings: OncePerCause,
    services: Services,
    rules: MutationRules,
    hold: Hold | None,
    started: float,
) -> bytes:
    if not review.is_pod_create:
        metrics.admissions.labels("skipped").inc()
        return render_allowed(review.uid)
    pod = _with_namespace(review.object, review.namespace)
    try:
        pod_facts = facts(pod)
    except PodError as error:
        # The API server's validation will answer the client; nothing to add here.
        client_problem(
            metrics, warnings, "admission_unreadable_pod", uid=review.uid, problem=str(error)
        )
        metrics.admissions.labels("skipped").inc()
        return render_allowed(review.uid)
    structlog.contextvars.bind_contextvars(pod=pod_facts.name, namespace=pod_facts.namespace)
    skip = _skip_reason(settings, pod, pod_facts)
    if skip is not None:
        metrics.admissions.labels("skipped").inc()
        metrics.skipped_pods.labels(skip).inc()
        explain.admission_skipped(skip, started)
        return render_allowed(review.uid)
    lookups = tally_request_lookups()
    resolved = await services.resolution.resolve(
        pod_facts.images, pod_facts.pull, settings.webhook.resolve_deadline_seconds
    )
    rules = _with_cluster_platforms(rules, services)
    if services.steering is not None:  # namespace preferences, arm64 shares (docs/webhook.md)
        rules = replace(rules, steering=services.steering.steer(pod, rules.arch_preference))
    dry_run = settings.policy.mode == "dry-run"
    holding = hold is not None and not dry_run and pod_facts.namespace not in hold.never
    try:
        # Held pods get their constraints on release; others fail open, constrained by
        # the images that did resolve.
        mutation = decide_mutation(pod, pod_facts.images, resolved, rules, known_only=not holding)
    except ShapeError as error:
        client_problem(
            metrics, warnings, "admission_unreadable_pod", uid=review.uid, problem=str(error)
        )
        metrics.admissions.labels("skipped").inc()
        return render_allowed(review.uid)
    operations = mutation.operations(dry_run)
    if mutation.unknown and holding:
        operations += gate_operations(pod, _hold_reason(resolved))
        mutation.outcome = "gated"
    # policy dry-run constrains nothing; a dry-run *request* (kubectl --dry-run=server) gets
    # the full answer, so operators can see what archfit would write, but is not counted.
    outcome = "dry_run" if dry_run else mutation.outcome
    metrics.admissions.labels(outcome).inc()
    if not dry_run and not review.dry_run:
        for change in mutation.changes:
            metrics.admission_changes.labels(change).inc()
    if services.steering and mutation.steering and not (dry_run or review.dry_run):
        services.steering.chosen(mutation.steering, mutation.arch_choice)
    if mutation.unknown:
        policy = "gate" if mutation.outcome == "gated" else "fail-open"
        metrics.unknown_images.labels(policy).inc(len(mutation.unknown))
    explain.admitted(pod_facts, resolved, mutation, dry_run, dict(lookups), started)
    try:
        return render_allowed(review.uid, operations, mutation.warnings)
    except JsonError as error:  # nested deeper than JSON allows, or text JSON cannot carry
        client_problem(
            metrics, warnings, "admission_unreadable_pod", uid=review.uid, problem=str(error)
        )
        return render_allowed(review.uid)


def _hold_reason(resolved: Mapping[str, Resolved]) -> str:
    unknown = explain.unknown_images(resolved)
    return "platforms unknown at admission: " + "; ".join(f"{i}: {r}" for i, r in unknown.items())


def _with_namespace(pod: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    """The pod with the request's namespace: a CREATE's object may leave it out."""
    metadata = pod.get("metadata")
    if not namespace or not isinstance(metadata, Mapping) or metadata.get("namespace"):
        return dict(pod)
    return {**pod, "metadata": {**metadata, "namespace": namespace}}


def _skip_reason(settings: Settings, pod: Mapping[str, Any], pod_facts: PodFacts) -> str | None:
    shared = skip_reason(pod_facts, settings.policy.excluded_namespaces)
    if shared is not None:
        return shared
    spec = pod.get("spec") or {}
    if isinstance(spec, Mapping) and spec.get("nodeName"):
        return "bound"  # no scheduler will look at it
    metadata = pod.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    if isinstance(annotations, Mapping) and _MIRROR_ANNOTATION in annotations:
        return "mirror_pod"
    owners = metadata.get("ownerReferences")
    if isinstance(owners, list) and any(
        isinstance(o, Mapping) and o.get("kind") == "DaemonSet" and o.get("controller") is True
        for o in owners
    ):
        # The DaemonSet controller already chose the node; a constraint would leave the
        # pod Pending there forever. The extender still explains a mismatch at
        # scheduling time (docs/webhook.md, "DaemonSets").
        return "daemonset"
    return None


def _with_cluster_platforms(rules: MutationRules, services: Services) -> MutationRules:
    nodes = services.nodes
    if nodes is None:
        return rules
    known: frozenset[Platform] = nodes.known_platforms()
    if known <= rules.platforms:
        return rules
    return MutationRules(
        platforms=rules.platforms | known,
        arch_preference=rules.arch_preference,
        taints=rules.taints,
        rule=rules.rule,
        scheduler_name=rules.scheduler_name,
    )


@contextlib.asynccontextmanager
async def serving(
    settings: Settings, metrics: Metrics, services: Services
) -> AsyncIterator[ReloadingCertificate]:
    """Run the webhook's TLS listener until the block exits."""
    hook = settings.webhook
    certificate = ReloadingCertificate(
        hook.cert_file,
        hook.key_file,
        names=hook.certificate.hosts if hook.certificate.self_managed else (),
        # The expiry alert watches what is served, not what a Secret holds.
        on_loaded=lambda when: metrics.webhook_certificate_expiry.set(when.timestamp()),
        on_refused=metrics.client_problems.labels("certificate_refused").inc,
    )
    if not certificate.reload():
        # Start anyway: the files may appear later (a Secret volume being synced),
        # and the watcher below picks them up. /readyz says so meanwhile.
        log.warning("webhook_certificate_missing", cert_file=hook.cert_file)
    app = create_webhook_app(settings, metrics, services)
    runner = web.AppRunner(app, access_log=None, **handler_options(settings.server))
    await runner.setup()
    watcher = asyncio.create_task(certificate.watch(hook.cert_reload_seconds))
    releasing: asyncio.Task[None] | None = None
    try:
        site = GuardedSite(runner, hook.host, hook.port, app[_GUARD], certificate.context)
        try:
            await site.start()
        except OSError as error:
            raise WebhookSetupError(
                f"cannot listen on webhook.host/port {hook.host}:{hook.port}: {error.strerror}"
            ) from error
        log.info(
            "webhook_listening",
            host=hook.host,
            port=hook.port,
            path=hook.path,
            unknown_images="gate" if HOLD in app else "admit",
        )
        if HOLD in app:
            releasing = asyncio.create_task(_release_held(settings, metrics, services, app[RULES]))
        yield certificate
    finally:
        for task in (watcher, releasing):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await runner.cleanup()
