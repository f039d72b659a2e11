"""The extender's aiohttp Application: routes and handlers.

Handlers only translate: the extender verbs are `verbs`, decisions `placement`, explanations
`explain`; errors become HTTP answers at the one boundary both apps share
(extender.serving.error_answers), counted here by verb. The composition root
(extender.server) builds this app and gives it the resources it shares with the webhook,
and their lifecycle.
"""

from __future__ import annotations

import orjson
from aiohttp import web

from extender.app_keys import METRICS, SERVICES, SETTINGS, VERBS, WARNINGS, WEBHOOK_CERTIFICATE
from extender.config.settings import Settings
from extender.errors import UnknownPath
from extender.metrics import Metrics
from extender.once import OncePerCause
from extender.scheduler.verbs import FILTER, PRIORITIZE, Verbs
from extender.serving.error_answers import ErrorAnswers

_JSON = "application/json"


def create_extender_app(
    settings: Settings, metrics: Metrics, warnings: OncePerCause
) -> web.Application:
    """The extender's own app: its verbs, probes and metrics, counted into `metrics`; a
    client's problem is logged once per cause in `warnings`, which the webhook shares."""
    app = web.Application(client_max_size=settings.server.max_body_bytes)
    app[SETTINGS] = settings
    app[METRICS] = metrics
    app[WARNINGS] = warnings
    app.middlewares.append(ErrorAnswers(metrics, warnings, _count).middleware)
    app[VERBS] = Verbs(settings, metrics)
    prefix = settings.server.prefix.rstrip("/")
    app.router.add_post(f"{prefix}/filter", filter_handler)
    app.router.add_post(f"{prefix}/prioritize", prioritize_handler)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_handler)
    # Last: a POST anywhere else is a urlPrefix without the prefix, most likely; say so.
    app.router.add_post("/{path:.*}", unknown_path_handler)
    return app


async def filter_handler(request: web.Request) -> web.Response:
    return await request.app[VERBS].serve(request, FILTER, request.app[SERVICES])


async def prioritize_handler(request: web.Request) -> web.Response:
    return await request.app[VERBS].serve(request, PRIORITIZE, request.app[SERVICES])


async def unknown_path_handler(request: web.Request) -> web.Response:
    prefix = request.app[SETTINGS].server.prefix.rstrip("/")
    raise UnknownPath(
        f"archfit serves no POST {request.path}: its verbs are POST {prefix}/filter and "
        f"{prefix}/prioritize (server.prefix {prefix or '/'!r}); end kube-scheduler's urlPrefix "
        f"in {prefix or '/'}"
    )


async def healthz(request: web.Request) -> web.Response:
    return _health({"status": "ok"}, 200)


async def readyz(request: web.Request) -> web.Response:
    services = request.app.get(SERVICES)
    checks: dict[str, bool] = {"started": services is not None}
    stale = None
    if services is not None and services.nodes is not None:
        checks["nodeIndexSynced"] = services.nodes.synced
        stale = services.nodes.problem
    problem = None
    if request.app[SETTINGS].webhook.enabled:
        certificate = request.app.get(WEBHOOK_CERTIFICATE)
        checks["webhookCertificate"] = certificate is not None and certificate.ready
        if certificate is not None and not certificate.ready:
            problem = certificate.problem or f"expired at {certificate.not_after}"
    ready = all(checks.values())
    answer: dict[str, object] = {"ready": ready, "checks": checks}
    if problem:
        # Why every TLS handshake with the webhook fails, and the fix.
        answer["webhookCertificateProblem"] = problem
    if stale:
        # Not a check: answers from the last list beat none, so archfit stays in service;
        # but its node index lags the cluster by up to a minute, and this says why.
        answer["nodeIndexCurrent"] = False
        answer["nodeIndexProblem"] = stale
    if request.app[SETTINGS].webhook.enabled:
        # Not a check (zero is no reason to stop traffic), but the one sign, seen from the
        # pod, that the API server reaches the webhook at all (deploy/README.md).
        answer["webhookCalls"] = request.app[METRICS].admission_reviews_received()
    return _health(answer, 200 if ready else 503)


def _health(answer: dict[str, object], status: int) -> web.Response:
    """/healthz and /readyz speak one encoder (orjson, compact), so probes and scripts that
    compare bodies see one format."""
    return web.Response(body=orjson.dumps(answer), status=status, content_type=_JSON)


async def metrics_handler(request: web.Request) -> web.Response:
    body = request.app[METRICS].render()
    return web.Response(body=body, headers={"Content-Type": "text/plain; version=0.0.4"})


def _count(request: web.Request, failed: bool) -> None:
    """Count a call the error boundary answered, by its verb (other paths have no counter)."""
    verb = request.path.rsplit("/", 1)[-1]
    if verb in ("filter", "prioritize"):
        request.app[METRICS].extender_call(verb, "internal_error" if failed else "bad_request")
