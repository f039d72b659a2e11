"""The aiohttp application: routes, resources under AppKeys, and their lifecycle.

Handlers only translate: the extender verbs are `verbs`, decisions `placement`, explanations
`explain`; domain errors become HTTP answers in one place (`_errors_middleware`).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson
import structlog
from aiohttp import web

from extender.config import Settings
from extender.gc_schedule import collect_periodically
from extender.listener import (
    BodyTimeout,
    ClientNoise,
    ConnectionGuard,
    answer_and_close,
    client_problem,
)
from extender.metrics import Metrics
from extender.once import OncePerCause
from extender.pods import PodError
from extender.resolution import PlatformResolver
from extender.scheduler_api import WireError, render_error
from extender.services import NodeSource, Services, open_services
from extender.tls import CertificateRefused, ReloadingCertificate
from extender.verbs import FILTER, NO_NODE_INDEX, PRIORITIZE, NoNodeIndex, Verbs, json_answer

log = structlog.get_logger("archfit")

SETTINGS = web.AppKey("settings", Settings)
METRICS = web.AppKey("metrics", Metrics)
SERVICES = web.AppKey("services", Services)
WEBHOOK_CERTIFICATE = web.AppKey("webhook_certificate", ReloadingCertificate)
SERVER_CERTIFICATE = web.AppKey("server_certificate", ReloadingCertificate)
WARNINGS = web.AppKey("warnings", OncePerCause)
GUARD = web.AppKey("connection_guard", ConnectionGuard)
VERBS = web.AppKey("verbs", Verbs)
"""filter and prioritize, with the Policy built once at start (extender.verbs)."""

_FIRST_CERTIFICATE_SECONDS = 10.0

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
    app[SETTINGS] = settings
    app[METRICS] = Metrics()
    app[VERBS] = Verbs(settings, app[METRICS])
    app[WARNINGS] = OncePerCause()
    app[GUARD] = ConnectionGuard(settings.server, app[METRICS], app[WARNINGS])

    async def services_ctx(app: web.Application) -> AsyncIterator[None]:
        async with open_services(settings, app[METRICS], resolver, nodes) as services:
            app[SERVICES] = services
            yield

    app.cleanup_ctx.append(services_ctx)
    app.cleanup_ctx.append(_quiet_client_noise)
    app.cleanup_ctx.append(_periodic_gc)
    if settings.server.tls:
        server = settings.server
        try:
            certificate = ReloadingCertificate(
                server.cert_file,
                server.key_file,
                on_refused=app[METRICS].client_problems.labels("certificate_refused").inc,
                client_ca_file=server.client_ca_file,
            )
        except (OSError, ssl.SSLError) as error:
            raise ServerCertificateError(
                f"server.clientCaFile: cannot load {server.client_ca_file}: {error}"
            ) from error
        try:
            certificate.load()
        except (OSError, ssl.SSLError, CertificateRefused) as error:
            raise ServerCertificateError(
                f"server.certFile/keyFile: cannot load {server.cert_file}: {error}"
            ) from error
        app[SERVER_CERTIFICATE] = certificate
        app.cleanup_ctx.append(_watch_server_certificate)
    if settings.webhook.enabled:
        app.cleanup_ctx.append(_webhook_ctx)
    if settings.watcher.enabled:
        app.cleanup_ctx.append(_watcher_ctx)
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


class ServerCertificateError(RuntimeError):
    """The extender's HTTPS certificate cannot be loaded; the message names the setting."""


async def _watch_server_certificate(app: web.Application) -> AsyncIterator[None]:
    """Serve a rotated certificate without a restart (extender.tls)."""
    watcher = asyncio.create_task(
        app[SERVER_CERTIFICATE].watch(app[SETTINGS].server.cert_reload_seconds)
    )
    yield
    watcher.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await watcher


async def _watcher_ctx(app: web.Application) -> AsyncIterator[None]:
    """The mismatch watcher, on whichever replica holds its Lease (extender.watcher)."""
    from extender.watcher import leading

    async with leading(app[SETTINGS], app[METRICS], app[SERVICES]):
        yield


async def _webhook_ctx(app: web.Application) -> AsyncIterator[None]:
    """The admission webhook's TLS listener, and its self-managed certificate if asked."""
    from extender.webhook import serving

    settings, metrics, services = app[SETTINGS], app[METRICS], app[SERVICES]
    async with contextlib.AsyncExitStack() as stack:
        if settings.webhook.certificate.self_managed:
            await stack.enter_async_context(_self_managed_certificate(settings, metrics, services))
        app[WEBHOOK_CERTIFICATE] = await stack.enter_async_context(
            serving(settings, metrics, services)
        )
        yield


@contextlib.asynccontextmanager
async def _self_managed_certificate(
    settings: Settings, metrics: Metrics, services: Services
) -> AsyncIterator[None]:
    from extender.kube.webhook_certs import SelfManagedCertificate
    from extender.webhook import WebhookSetupError

    if services.kube is None:
        raise WebhookSetupError(
            "webhook.certificate.selfManaged needs API access (kubernetes.mode is off "
            "or found no cluster)"
        )
    manager = SelfManagedCertificate(services.kube, settings.webhook)

    def expiry(when: datetime.datetime) -> None:
        # The gauge follows the certificate the listener serves (extender.webhook.serving),
        # which may be an older one if this one is refused.
        pass

    task = asyncio.create_task(manager.keep(expiry))
    # The listener's first handshake should already have a certificate: give the first
    # pass a moment, but never block start-up on it (the extender must come up).
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(manager.first_pass.wait(), _FIRST_CERTIFICATE_SECONDS)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def healthz(request: web.Request) -> web.Response:
    return _health({"status": "ok"}, 200)


async def readyz(request: web.Request) -> web.Response:
    services = request.app.get(SERVICES)
    checks: dict[str, bool] = {"started": services is not None}
    if services is not None and services.nodes is not None:
        checks["nodeIndexSynced"] = services.nodes.synced
    if request.app[SETTINGS].webhook.enabled:
        certificate = request.app.get(WEBHOOK_CERTIFICATE)
        checks["webhookCertificate"] = certificate is not None and certificate.ready
    ready = all(checks.values())
    answer: dict[str, object] = {"ready": ready, "checks": checks}
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
    except (WireError, PodError) as error:
        # The client's mistake: answer 400 and warn, once per cause.
        _problem(request, "bad_request", problem=str(error))
        return web.json_response({"error": str(error)}, status=400)
    except NoNodeIndex:
        # Misconfiguration, not a rejection: Error makes it an extender error
        # that shows in the scheduler's log and the pod's event.
        _problem(request, "no_node_index", hint=NO_NODE_INDEX)
        return json_answer(render_error(NO_NODE_INDEX))
    except BodyTimeout:
        _problem(request, "body_timeout")
        return await answer_and_close(
            request, web.json_response({"error": "request body too slow"}, status=408)
        )
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
        if app[WARNINGS].admit(f"internal_error:{type(error).__name__}:{error}") is not None:
            log.exception("internal_error", path=request.path)
        _count_bad(request, "internal_error")
        return web.json_response({"error": "internal error"}, status=500)


def _problem(request: web.Request, cause: str, **fields: Any) -> None:
    app = request.app
    client_problem(app[METRICS], app[WARNINGS], cause, path=request.path, **fields)
    _count_bad(request)


async def _quiet_client_noise(app: web.Application) -> AsyncIterator[None]:
    """aiohttp logs malformed HTTP and lost clients as errors with tracebacks: make them
    throttled warnings, counted, while this app runs."""
    noise = ClientNoise(app[METRICS], app[WARNINGS])
    server_log = logging.getLogger("aiohttp.server")
    server_log.addFilter(noise)
    yield
    server_log.removeFilter(noise)


async def _periodic_gc(app: web.Application) -> AsyncIterator[None]:
    interval = app[SETTINGS].server.gc_interval_seconds
    task = asyncio.create_task(collect_periodically(interval)) if interval > 0 else None
    yield
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _count_bad(request: web.Request, outcome: str = "bad_request") -> None:
    verb = request.path.rsplit("/", 1)[-1]
    if verb in ("filter", "prioritize"):
        request.app[METRICS].extender_call(verb, outcome)
