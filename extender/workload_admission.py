"""The workload warnings path: AdmissionReviews of workload kinds answered with warnings only.

A ValidatingWebhookConfiguration sends Deployment, StatefulSet, DaemonSet, ReplicaSet, Job
and CronJob CREATE and UPDATE here, on the webhook's listener (`webhook.workloadWarnings`).
`WorkloadWarner.review` decides (extender.workload_warnings does the thinking); `handle` is
the HTTP glue. Every answer allows: archfit's trouble costs the client a warning at most.
"""

from __future__ import annotations

import time
from collections import Counter

import structlog
from aiohttp import web

from extender.admission_api import AdmissionRequest, WireError, parse_review, render_allowed
from extender.config import Settings
from extender.listener import BodyTimeout, answer_and_close, client_problem, read_body
from extender.logs import bind_request
from extender.metrics import Metrics
from extender.mutation import MutationRules, ShapeError
from extender.once import OncePerCause
from extender.platforms import Platform, Unknown
from extender.pods import PodError
from extender.services import Services
from extender.wire_json import JsonError
from extender.workload_warnings import KINDS, template, template_changed, warnings

log = structlog.get_logger("archfit")


class WorkloadWarner:
    """Answers workload AdmissionReviews; shares the webhook's services, rules and metrics."""

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
        """Serve POST <webhook.workloadWarnings.path> on `app` (the webhook's)."""
        app.router.add_post(self._settings.webhook.workload_warnings.path, self.handle)

    async def handle(self, request: web.Request) -> web.Response:
        """HTTP in, AdmissionReview out: bad input is a 4xx, any failure of archfit's an
        allowed answer without warnings."""
        started = time.perf_counter()
        bind_request(request.headers.get("X-Request-Id"), "warn")
        metrics = self._metrics
        try:
            body = await read_body(request, self._settings.server.body_timeout_seconds)
            review = parse_review(body)
        except (WireError, web.HTTPRequestEntityTooLarge) as error:
            problem = error.reason if isinstance(error, web.HTTPException) else str(error)
            client_problem(metrics, self._once, "bad_request", path=request.path, problem=problem)
            metrics.workload_reviews.labels("bad_request").inc()
            status = 413 if isinstance(error, web.HTTPException) else 400
            return web.json_response({"error": problem}, status=status)
        except (BodyTimeout, ConnectionResetError) as error:
            cause = "body_timeout" if isinstance(error, BodyTimeout) else "disconnected"
            client_problem(metrics, self._once, cause, path=request.path)
            gone = web.json_response({"error": "request body not received"}, status=408)
            return await answer_and_close(request, gone)
        try:
            answer = await self.review(review)
        except Exception as error:
            # archfit's own failure must never stop a deploy: allow it, loudly.
            if self._once.admit(f"workload_review_error:{type(error).__name__}") is not None:
                log.exception("workload_review_error", uid=review.uid)
            metrics.workload_reviews.labels("error").inc()
            answer = render_allowed(review.uid)
        metrics.workload_review_seconds.observe(time.perf_counter() - started)
        return web.Response(body=answer, content_type="application/json")

    async def review(self, review: AdmissionRequest) -> bytes:
        """The allowed answer for one workload review, with warnings when it needs them."""
        started = time.perf_counter()
        count = self._metrics.workload_reviews.labels
        kind = review.kind.get("kind", "")
        if (
            review.operation not in ("CREATE", "UPDATE")
            or review.sub_resource
            or KINDS.get(kind) != review.kind.get("group")
        ):
            count("skipped").inc()
            return render_allowed(review.uid)
        name = str((review.object.get("metadata") or {}).get("name") or "")
        structlog.contextvars.bind_contextvars(
            workload=f"{kind}/{name}", namespace=review.namespace
        )
        if review.old_object is not None and not template_changed(
            kind, review.old_object, review.object
        ):
            count("unchanged").inc()
            return render_allowed(review.uid)
        try:
            workload = template(kind, review.object, review.namespace)
        except PodError as error:
            # The API server's validation answers the client; nothing to add here.
            client_problem(
                self._metrics, self._once, "admission_unreadable_pod", problem=str(error)
            )
            count("skipped").inc()
            return render_allowed(review.uid)
        excluded = review.namespace in self._settings.policy.excluded_namespaces
        if workload.skip or workload.owned or excluded or not workload.images:
            count("skipped").inc()
            return render_allowed(review.uid)
        resolved = await self._services.resolution.resolve(
            workload.images, workload.pull, self._settings.webhook.resolve_deadline_seconds
        )
        try:
            found = warnings(workload, resolved, self._rules, self._nodes())
        except ShapeError as error:
            client_problem(
                self._metrics, self._once, "admission_unreadable_pod", problem=str(error)
            )
            count("skipped").inc()
            return render_allowed(review.uid)
        unknown = [image for image, outcome in resolved.items() if isinstance(outcome, Unknown)]
        outcome = "warned" if found else "unknown" if unknown else "clean"
        count(outcome).inc()
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
        try:
            return render_allowed(review.uid, warnings=found)
        except JsonError:  # a warning carries text JSON cannot: answer without them
            return render_allowed(review.uid)

    def _nodes(self) -> dict[Platform, int] | None:
        """Today's nodes per platform, from the node index (None without one)."""
        nodes = self._services.nodes
        if nodes is None:
            return None
        counts = Counter(facts[0] for facts in nodes.snapshot().values())
        return {platform: n for platform, n in counts.items() if platform is not None}
