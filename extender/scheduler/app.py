"""The extender's aiohttp Application: routes, handlers, and errors mapped to answers.

Handlers only translate: the extender verbs are `verbs`, decisions `placement`, explanations
`explain`; domain errors become HTTP answers in one place (`_errors_middleware`). The
resources the app shares with the webhook, and their lifecycle, are extender.server's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import structlog
from aiohttp import web

from extender.config.settings import Settings
from extender.errors import InputError
from extender.lookups.resolution import PlatformResolver
from extender.scheduler.verbs import (
    FILTER,
    NO_NODE_INDEX,
    PRIORITIZE,
    NoNodeIndex,
    Verbs,
    json_answer,
)
from extender.server import METRICS as METRICS
from extender.server import SERVICES as SERVICES
from extender.server import SETTINGS as SETTINGS
from extender.server import WARNINGS as WARNINGS
from extender.server import WEBHOOK_CERTIFICATE as WEBHOOK_CERTIFICATE
from extender.server import attach
from extender.services import NodeSource
from extender.serving.listener import BodyTimeout, answer_and_close, client_problem
from extender.wire.scheduler_api import render_error

log = structlog.get_logger("archfit")

VERBS = web.AppKey("verbs", Verbs)
"""filter and prioritize, with the Policy built once at start (extender.scheduler.verbs)."""

_JSON = "application/json"


def create_app(
    settings: Settings,
    *,
    resolver: PlatformResolver | None = None,
    nodes: NodeSource | None = None,
) -> web.Application:
    """Build the app. `resolver` and `nodes` replace the ones the settings would build."""
    app = web.Application(
        client_max_size=settings.server.max_body_bytes,
        middlewares=[_errors_middleware],
    )
    attach(app, settings, resolver, nodes)
    app[VERBS] = Verbs(settings, app[METRICS])
    prefix = settings.server.prefix.rstrip("/")
    app.router.add_post(f"{prefix}/filter", filter_handler)
    app.router.add_post(f"{prefix}/prioritize", prioritize_handler)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_handler)
    return app


async def filter_handler(request: web.Request) -> web.Response:
    return await request.app[VERBS].serve(request, FILTER, request.app[SERVICES])


async def prioritize_handler(request: web.Request) -> web.Response:
    return await request.app[VERBS].serve(request, PRIORITIZE, request.app[SERVICES])


async def healthz(request: web.Request) -> web.Response:
    return _health({"status": "ok"}, 200)


async def readyz(request: web.Request) -> web.Response:
    services = request.app.get(SERVICES)
    checks: dict[str, bool] = {"started": services is not None}
    if services is not None and services.nodes is not None:
        checks["nodeIndexSynced"] = services.nodes.synced
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


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def _errors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Map domain errors to HTTP answers, in one place.

    Every error is answered here, none left to aiohttp: its 500 closes the connection, and
    requests pipelined behind would get no answer.
    """
    app = request.app
    try:
        return await handler(request)
    except BodyTimeout:
        _problem(request, "body_timeout")
        return await answer_and_close(
            request, web.json_response({"error": "request body too slow"}, status=408)
        )
    except InputError as error:
        # The client's mistake: answer 400 and warn, once per cause.
        _problem(request, "bad_request", problem=str(error))
        return web.json_response({"error": str(error)}, status=400)
    except NoNodeIndex:
        # Misconfiguration, not a rejection: Error makes it an extender error
        # that shows in the scheduler's log and the pod's event.
        _problem(request, "no_node_index", hint=NO_NODE_INDEX)
        return json_answer(render_error(NO_NODE_INDEX))
    except ConnectionResetError:
        # The client went away mid-body: nobody is left to answer.
        _problem(request, "disconnected")
        response = web.Response(status=400)
        response.force_close()
        return response
    except web.HTTPException as error:
        if error.status in (405, 413):
            _problem(request, "bad_request", problem=error.reason)
            return web.json_response({"error": error.reason}, status=error.status)
        raise
    except Exception as error:
        # archfit's own defect: say so loudly, but keep the connection for what follows.
        if app[WARNINGS].log_now(f"internal_error:{type(error).__name__}:{error}") is not None:
            log.exception("internal_error", path=request.path)
        _count_bad(request, "internal_error")
        return web.json_response({"error": "internal error"}, status=500)


def _problem(request: web.Request, cause: str, **fields: Any) -> None:
    app = request.app
    client_problem(app[METRICS], app[WARNINGS], cause, path=request.path, **fields)
    _count_bad(request)


def _count_bad(request: web.Request, outcome: str = "bad_request") -> None:
    verb = request.path.rsplit("/", 1)[-1]
    if verb in ("filter", "prioritize"):
        request.app[METRICS].extender_call(verb, outcome)
