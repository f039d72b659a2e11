"""The workload warnings path: AdmissionReviews of workload kinds answered with warnings only.

A ValidatingWebhookConfiguration sends Deployment, StatefulSet, DaemonSet, ReplicaSet, Job
and CronJob CREATE and UPDATE here, on the webhook's listener (`webhook.workloadWarnings`).
`WorkloadWarner` is an admission policy (extender.admission.skeleton): `admit` decides
(extender.core.workload_warnings does the thinking), the admission skeleton does the HTTP.
Every answer allows: archfit's trouble costs the client a warning at most.
"""

from __future__ import annotations

import time
from collections import Counter

import structlog
from aiohttp import web

from extender import logs
from extender.admission.skeleton import SKIPPED, Admission, Admissions
from extender.config.settings import Settings
from extender.core.mutation import MutationRules
from extender.core.platforms import Platform, Unknown
from extender.core.workload_warnings import WARNED_KINDS, template, template_changed, warnings
from extender.metrics import Metrics
from extender.once import OncePerCause
from extender.services import Services
from extender.wire.admission_api import AdmissionRequest

log = structlog.get_logger("archfit")

_UNCHANGED = Admission("unchanged")
"""An UPDATE that leaves the pod template as it was: nothing new to warn about."""


class WorkloadWarner:
    """Answers workload AdmissionReviews; shares the webhook's services, rules and metrics."""

    verb = "warn"
    unreadable = "admission_unreadable_pod"
    failed = "workload_review_error"

    def __init__(
        self,
        settings: Settings,
        metrics: Metrics,
        services: Services,
        rules: MutationRules,
        once: OncePerCause,
    ) -> None:
        self._settings = settings
        self._metrics = metrics
        self._services = services
        self._rules = rules
        self._once = once

    def route(self, app: web.Application) -> None:
        """Serve POST <webhook.workloadWarnings.path> on `app` (the webhook's), through the
        admission skeleton (extender.admission.skeleton)."""
        settings = self._settings
        path = settings.webhook.workload_warnings.path
        handler = Admissions(self, self._metrics, self._once, settings.server.body_timeout_seconds)
        app.router.add_post(path, handler.serve)

    def count(self, outcome: str, seconds: float | None) -> None:
        self._metrics.workload_reviews.labels(outcome).inc()
        if seconds is not None:
            self._metrics.workload_review_seconds.observe(seconds)

    async def decide(self, review: AdmissionRequest, started: float) -> Admission:
        """The allowed answer for one workload review, with warnings when it needs them.
        Raises InputError (PodError, ShapeError) for a template archfit cannot read."""
        kind = review.kind.get("kind", "")
        if (
            review.operation not in ("CREATE", "UPDATE")
            or review.sub_resource
            or WARNED_KINDS.get(kind) != review.kind.get("group")
        ):
            return SKIPPED
        name = str((review.object.get("metadata") or {}).get("name") or "")
        logs.bind(workload=f"{kind}/{name}", namespace=review.namespace)
        if review.old_object is not None and not template_changed(
            kind, review.old_object, review.object
        ):
            return _UNCHANGED
        # A PodError here, or a ShapeError below: the API server's validation answers the
        # client; the skeleton allows it unchanged.
        workload = template(kind, review.object, review.namespace)
        excluded = review.namespace in self._settings.policy.excluded_namespaces
        if workload.skip or workload.owned or excluded or not workload.images:
            return SKIPPED
        resolved = await self._services.resolution.resolve(
            workload.images, workload.pull, self._settings.webhook.resolve_deadline_seconds
        )
        found = warnings(workload, resolved, self._rules, self._nodes())
        unknown = [image for image, outcome in resolved.items() if isinstance(outcome, Unknown)]
        outcome = "warned" if found else "unknown" if unknown else "clean"
        if found:
            self._metrics.workload_warnings.labels(kind).inc(len(found))
        log.info(
            "workload_reviewed",
            operation=review.operation,
            outcome=outcome,
            warnings=found,
            unknown=unknown,
            duration_ms=round((time.perf_counter() - started) * 1000, 2),
        )
        return Admission(outcome, warnings=found)

    def _nodes(self) -> dict[Platform, int] | None:
        """Today's nodes per platform, from the node index (None without one)."""
        nodes = self._services.nodes
        if nodes is None:
            return None
        counts = Counter(facts[0] for facts in nodes.snapshot().values())
        return {platform: n for platform, n in counts.items() if platform is not None}
