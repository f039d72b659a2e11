"""The mutating admission webhook's Application and its policy: pod CREATEs get affinity.

kube-apiserver calls webhooks over HTTPS only, so the webhook has a listener of its own
(extender.server opens it). The request path is the admission skeleton's
(`extender.admission.skeleton.Admissions`); `PodMutation` is what it admits by: skip or resolve,
`mutation.decide_mutation`, explain, count.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import structlog
from aiohttp import web

from extender import explain, logs
from extender.admission.skeleton import SKIPPED, Admission, Admissions
from extender.admission.workload_webhook import WorkloadWarner
from extender.app_keys import WEBHOOK_GUARD, WEBHOOK_HOLDS
from extender.config.rules import mutation_rules_of
from extender.config.settings import Settings
from extender.core.gates import gate_operations, lift_operations, never_held
from extender.core.mutation import decide_mutation
from extender.core.platforms import Resolved
from extender.core.pod_rules import steered_rules, with_cluster_platforms
from extender.core.pods import PodView, read_pod, skip_reason
from extender.metrics import Metrics, tally_request_lookups
from extender.once import OncePerCause
from extender.services import Services
from extender.serving.listener import ConnectionGuard
from extender.wire.admission_api import AdmissionRequest

log = structlog.get_logger("archfit")


@dataclass(frozen=True, slots=True)
class Hold:
    """Whether pods whose images are unknown at the deadline are held by the gate."""

    never: frozenset[str]
    """Namespaces never held (extender.core.gates.never_held)."""


_MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def create_webhook_app(settings: Settings, metrics: Metrics, services: Services) -> web.Application:
    """The webhook's own app: POST <webhook.path> only, sharing the extender's services."""
    app = web.Application(client_max_size=settings.webhook.max_body_bytes)
    warnings = OncePerCause()
    app[WEBHOOK_GUARD] = ConnectionGuard(settings.server, metrics, warnings)
    app[WEBHOOK_GUARD].install(app)
    mutation = PodMutation(settings, metrics, services)
    app[WEBHOOK_HOLDS] = mutation.hold is not None
    handler = Admissions(mutation, metrics, warnings, settings.server.body_timeout_seconds)
    app.router.add_post(settings.webhook.path, handler.serve)
    if settings.webhook.workload_warnings.enabled:
        # The second admission path: warnings on workloads (extender.admission.workload_webhook).
        WorkloadWarner(settings, metrics, services, mutation.rules, warnings).route(app)
    return app


class PodMutation:
    """The admission policy for pod CREATEs: the constraints their images need
    (extender.core.mutation), or the scheduling gate while they are unknown
    (extender.core.gates)."""

    verb = "mutate"
    unreadable = "admission_unreadable_pod"
    failed = "admission_internal_error"

    def __init__(self, settings: Settings, metrics: Metrics, services: Services) -> None:
        self.settings = settings
        self.metrics = metrics
        self.services = services
        self.rules = mutation_rules_of(settings)
        """Before the node index adds the platforms it knows (with_cluster_platforms)."""
        self.hold = _hold_of(settings, services)
        """Set when `webhook.unknownImages: gate` and a releaser can run (API access is on)."""
        self.dry_run = settings.policy.mode == "dry-run"

    async def decide(self, review: AdmissionRequest, started: float) -> Admission:
        """skip or resolve → decide → explain, and count what only pods have."""
        if not review.pod_create:
            return SKIPPED
        settings, metrics, dry_run = self.settings, self.metrics, self.dry_run
        pod = read_pod(_with_namespace(review.object, review.namespace))
        pod_facts = pod.facts
        logs.bind(pod=pod_facts.name, namespace=pod_facts.namespace)
        skip = _skip_reason(settings, pod)
        if skip is not None:
            metrics.child(metrics.skipped_pods, skip).inc()
            explain.admission_skipped(skip, started)
            return SKIPPED
        lookups = tally_request_lookups()
        resolved = await self.services.resolution.resolve(
            pod_facts.images,
            pod_facts.pull,
            settings.webhook.resolve_deadline_seconds,
            workload=pod_facts.workload,
        )
        services = self.services
        rules = steered_rules(
            with_cluster_platforms(self.rules, services.nodes), pod.obj, services.steering
        )
        hold = self.hold
        holding = hold is not None and not dry_run and pod_facts.namespace not in hold.never
        # Held pods get their constraints on release; others fail open, constrained by
        # the images that did resolve.
        mutation = decide_mutation(pod, pod_facts.images, resolved, rules, known_only=not holding)
        operations = mutation.operations(dry_run)
        if mutation.unknown and holding:
            operations += gate_operations(pod, _hold_reason(resolved))
            mutation.outcome = "gated"
        elif not mutation.unknown and not dry_run:
            # The admission policy held what it did not know; this webhook knows it now.
            operations += lift_operations(pod)
        # policy dry-run constrains nothing; a dry-run *request* (kubectl --dry-run=server)
        # gets the full answer, so operators can see what archfit would write, but is not
        # counted.
        if not dry_run and not review.dry_run:
            for change in mutation.changes:
                metrics.child(metrics.admission_changes, change).inc()
        if services.steering and mutation.steering and not (dry_run or review.dry_run):
            services.steering.chosen(mutation.steering, mutation.arch_choice)
        if mutation.unknown:
            policy = "gate" if mutation.outcome == "gated" else "fail-open"
            metrics.child(metrics.unknown_images, policy).inc(len(mutation.unknown))
        explain.admitted(pod_facts, resolved, mutation, dry_run, lookups, started)
        outcome = "dry_run" if dry_run else mutation.outcome
        return Admission(outcome, operations, mutation.warnings)

    def count(self, outcome: str, seconds: float | None) -> None:
        metrics = self.metrics
        metrics.child(metrics.admissions, outcome).inc()
        if seconds is not None:
            metrics.admission_seconds.observe(seconds)


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
    from extender.kube.connect import current_namespace

    own = current_namespace(settings.kubernetes)
    return Hold(never=never_held(settings.policy.excluded_namespaces, own))


def _hold_reason(resolved: Mapping[str, Resolved]) -> str:
    unknown = explain.unknown_images(resolved)
    return "platforms unknown at admission: " + "; ".join(f"{i}: {r}" for i, r in unknown.items())


def _with_namespace(pod: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    """The pod with the request's namespace: a CREATE's object may leave it out."""
    metadata = pod.get("metadata")
    if not namespace or not isinstance(metadata, Mapping) or metadata.get("namespace"):
        return dict(pod)
    return {**pod, "metadata": {**metadata, "namespace": namespace}}


def _skip_reason(settings: Settings, pod: PodView) -> str | None:
    shared = skip_reason(pod.facts, settings.policy.excluded_namespaces)
    if shared is not None:
        return shared
    if pod.spec.get("nodeName"):
        return "bound"  # no scheduler will look at it
    if _MIRROR_ANNOTATION in pod.annotations:
        return "mirror_pod"
    owners = pod.metadata.get("ownerReferences")
    if isinstance(owners, list) and any(
        isinstance(o, Mapping) and o.get("kind") == "DaemonSet" and o.get("controller") is True
        for o in owners
    ):
        # The DaemonSet controller already chose the node; a constraint would leave the
        # pod Pending there forever. The extender still explains a mismatch at
        # scheduling time (docs/webhook.md, "Pods it leaves alone").
        return "daemonset"
    return None
