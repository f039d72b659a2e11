"""archfit's composition root: both apps, the services they share, signals, drain and GC.

Nothing of archfit imports this module but the command line; it sits above both apps.
`create_app` builds the extender's Application (scheduler.app.create_extender_app) and
`attach` gives it the process's resources and their lifecycle, in the order they start:
services, the server certificate's watcher, the webhook's listener (its Application is
admission.pod_webhook.create_webhook_app's) with its certificate and releaser, the
controllers, and the periodic GC. Whatever runner starts the app starts them all, `serve`'s
or a test's `aiohttp_client(create_app(settings))`. `serve` is the process: the event loop,
the main listener, signals, and the drain on SIGTERM. What each listener answers is its
Application's business: a handler can be swapped there without touching this module.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import faulthandler
import gc
import logging
import os
import platform
import signal
import ssl
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import structlog
from aiohttp import web

from extender import __version__
from extender.app_keys import (
    GUARD,
    METRICS,
    SERVER_CERTIFICATE,
    SERVICES,
    SETTINGS,
    WARNINGS,
    WEBHOOK_CERTIFICATE,
    WEBHOOK_GUARD,
    WEBHOOK_HOLDS,
)
from extender.config.settings import Settings
from extender.errors import SetupError, WebhookSetupError
from extender.event_loop import in_background, loop_factory
from extender.logs import configure
from extender.metrics import Metrics
from extender.once import OncePerCause
from extender.registry import system_cas
from extender.resolution.within_deadline import PlatformResolver
from extender.scheduler.app import create_extender_app
from extender.services import NodeSource, Services, open_services
from extender.serving import addresses
from extender.serving.addresses import listen_error
from extender.serving.client_problems import ClientNoise
from extender.serving.listener import ConnectionGuard, GuardedSite, handler_options
from extender.serving.tls import CertificateRefused, ReloadingCertificate

log = structlog.get_logger("archfit")

_FIRST_CERTIFICATE_SECONDS = 10.0


class ServerCertificateError(SetupError):
    """The extender's HTTPS certificate cannot be loaded; the message names the setting."""


def create_app(
    settings: Settings,
    *,
    resolver: PlatformResolver | None = None,
    nodes: NodeSource | None = None,
) -> web.Application:
    """The extender's app with the process's resources attached (the webhook's listener and
    the controllers the settings turn on among them). `resolver` and `nodes` replace the
    ones the settings would build.

    Raises ServerCertificateError when server.tls is on and its certificate cannot load.
    """
    app = create_extender_app(settings, Metrics(), OncePerCause())
    attach(app, resolver, nodes)
    return app


def serve(
    settings: Settings,
    source: Path | None,
    *,
    withheld: str = "",
    on_listening: Callable[[], None] | None = None,
) -> None:
    """Run `create_app(settings)` until SIGTERM or SIGINT, then drain.

    `withheld`: the controllers the command line kept from running, and why (start-up line).
    `on_listening` is called once the extender's listener is open (`archfit serve --detach`).
    Raises SetupError (the settings cannot work) or ListenError (a port cannot be opened).
    """
    configure(settings.logging.level, settings.logging.format)
    # A crash inside a C extension (the TLS library, the event loop) then leaves every
    # thread's stack on stderr, the container's log, instead of only an exit status.
    faulthandler.enable()
    server, hook = settings.server, settings.webhook
    loop_name, new_loop = loop_factory(server.event_loop)
    log.info(
        "archfit_starting",
        event_loop=loop_name,
        version=__version__,
        python=platform.python_version(),
        config=str(source.resolve()) if source else None,
        listen=f"{'https' if server.tls else 'http'}://{server.host}:{server.port}",
        prefix=server.prefix,
        webhook=f"https://{hook.host}:{hook.port}{hook.path}" if hook.enabled else None,
        mode=settings.policy.mode,
        controllers=writing_controllers(settings),
        controllers_withheld=withheld or None,
        pid=os.getpid(),
    )
    app = create_app(settings)
    tune_gc()
    with asyncio.Runner(loop_factory=new_loop) as runner:
        runner.run(_run_until_signalled(app, on_listening))


def writing_controllers(settings: Settings) -> list[str]:
    """The controllers this process runs that write to the cluster: the watcher (with
    `+evictions` under watcher.remediate), the capacity check (Events), and with the webhook
    its certificate keeper and the releaser of held pods. None without API access."""
    from extender.kube.connect import resolved_mode

    if resolved_mode(settings.kubernetes) == "off":
        return []
    found = []
    if settings.watcher.enabled:
        found.append("watcher+evictions" if settings.watcher.remediate else "watcher")
    if settings.capacity.enabled:
        found.append("capacity")
    hook = settings.webhook
    if hook.enabled and hook.certificate.self_managed:
        found.append("webhook-certificate")
    if hook.enabled and hook.unknown_images == "gate":
        found.append("releaser")
    return found


async def _run_until_signalled(
    app: web.Application, on_listening: Callable[[], None] | None
) -> None:
    """What web.run_app does, except that the listener is extender.serving.listener's, which caps
    connections and times out slow headers."""
    settings = app[SETTINGS]
    server = settings.server
    # Before the runner starts the services: a taken port is then the only line, not one
    # after `services_ready` that says all is well.
    addresses.check_listeners(settings)
    runner = web.AppRunner(
        app,
        access_log=None,  # the summary line per request says more
        shutdown_timeout=server.shutdown_grace_seconds,
        handle_signals=False,
        **handler_options(server),
    )
    received: list[str] = []
    try:
        # Inside the try: a start-up that fails half-way (the webhook's port taken) closes
        # what it had started, so the process ends on one line, not on asyncio's complaints
        # about generators left open.
        await runner.setup()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, _on_signal, stop, received, signum.name)
        certificate = app.get(SERVER_CERTIFICATE)
        context = certificate.context if certificate else None
        site = GuardedSite(runner, server.host, server.port, app[GUARD], context)
        await _listen(site, settings, addresses.EXTENDER)
        if on_listening is not None:
            on_listening()
        # Ready: now read the CA store that cli's import of aiohttp left (registry.system_cas).
        reading = asyncio.create_task(system_cas.loaded())
        await stop.wait()
        log.info("archfit_stopping", signal=received[0], grace_s=server.shutdown_grace_seconds)
        await reading  # done long since, unless the stop came as soon as it was ready
    finally:
        await runner.cleanup()
    log.info("archfit_stopped")


def _on_signal(stop: asyncio.Event, received: list[str], name: str) -> None:
    received.append(name)
    stop.set()


async def _listen(site: GuardedSite, settings: Settings, section: str) -> None:
    """Start `site`, the listener of settings `section`; ListenError says why not."""
    try:
        await site.start()
    except OSError as error:
        raise listen_error(settings, section, error) from error


def attach(
    app: web.Application,
    resolver: PlatformResolver | None = None,
    nodes: NodeSource | None = None,
) -> None:
    """Put the process's resources under `app`'s keys, and their lifecycle in its
    cleanup_ctx, for the settings, metrics and warnings `app` holds. `resolver` and `nodes`
    replace the ones the settings would build.

    Raises ServerCertificateError when server.tls is on and its certificate cannot load.
    """
    settings, metrics = app[SETTINGS], app[METRICS]
    app[GUARD] = ConnectionGuard(settings.server, metrics, app[WARNINGS])
    app[GUARD].install(app)

    async def services_ctx(app: web.Application) -> AsyncIterator[None]:
        async with open_services(settings, metrics, resolver, nodes) as services:
            app[SERVICES] = services
            yield

    app.cleanup_ctx.append(services_ctx)
    app.cleanup_ctx.append(_quiet_client_noise)
    app.cleanup_ctx.append(_periodic_gc)
    app.cleanup_ctx.append(_timed_gc)
    if settings.server.tls:
        app[SERVER_CERTIFICATE] = _server_certificate(settings, metrics)
        app.cleanup_ctx.append(_watch_server_certificate)
    if settings.webhook.enabled:
        app.cleanup_ctx.append(_webhook_listener)
    if settings.watcher.enabled:
        app.cleanup_ctx.append(_watcher)
    if settings.admission_policy.enabled:
        app.cleanup_ctx.append(_admission_policy)
    if settings.capacity.enabled:
        app.cleanup_ctx.append(_capacity_check)


def _server_certificate(settings: Settings, metrics: Metrics) -> ReloadingCertificate:
    server = settings.server
    try:
        certificate = ReloadingCertificate(
            server.cert_file,
            server.key_file,
            on_refused=metrics.client_problems.labels("certificate_refused").inc,
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
    return certificate


async def _watch_server_certificate(app: web.Application) -> AsyncIterator[None]:
    """Serve a rotated certificate without a restart (extender.serving.tls)."""
    async with in_background(
        app[SERVER_CERTIFICATE].watch(app[SETTINGS].server.cert_reload_seconds)
    ):
        yield


async def _webhook_listener(app: web.Application) -> AsyncIterator[None]:
    """The admission webhook's TLS listener, its self-managed certificate if asked, and the
    releaser of held pods."""
    # Imported here: a serve without the webhook (the default) never loads its modules.
    from extender.admission.pod_webhook import create_webhook_app

    settings, metrics, services = app[SETTINGS], app[METRICS], app[SERVICES]
    hook = settings.webhook
    async with contextlib.AsyncExitStack() as stack:
        if hook.certificate.self_managed:
            await stack.enter_async_context(_self_managed_certificate(settings, services))
        certificate = ReloadingCertificate(
            hook.cert_file,
            hook.key_file,
            names=hook.certificate.hosts if hook.certificate.self_managed else (),
            # The expiry alert watches what is served, not what a Secret holds.
            on_loaded=lambda when: metrics.webhook_certificate_expiry.set(when.timestamp()),
            on_refused=metrics.client_problems.labels("certificate_refused").inc,
        )
        # Start anyway if it cannot serve: the files may appear later (a Secret volume being
        # synced) and the watcher below picks them up. The listening line and /readyz say why.
        certificate.reload()
        webhook = create_webhook_app(settings, metrics, services)
        runner = web.AppRunner(webhook, access_log=None, **handler_options(settings.server))
        await runner.setup()
        stack.push_async_callback(runner.cleanup)
        await stack.enter_async_context(in_background(certificate.watch(hook.cert_reload_seconds)))
        site = GuardedSite(
            runner, hook.host, hook.port, webhook[WEBHOOK_GUARD], certificate.context
        )
        await _listen(site, settings, addresses.WEBHOOK)
        holds = webhook[WEBHOOK_HOLDS]
        # Every handshake fails until a certificate is in use: at warning, with the fix.
        (log.info if certificate.problem is None else log.warning)(
            "webhook_listening",
            host=hook.host,
            port=hook.port,
            path=hook.path,
            unknown_images="gate" if holds else "admit",
            certificate=certificate.problem or f"in use until {certificate.not_after}",
        )
        if holds:
            from extender.controllers.releaser import releasing

            await stack.enter_async_context(releasing(settings, metrics, services))
        app[WEBHOOK_CERTIFICATE] = certificate
        yield


async def _watcher(app: web.Application) -> AsyncIterator[None]:
    """The mismatch watcher, on whichever replica holds its Lease (extender.controllers.watcher)."""
    from extender.controllers.watcher import watching

    async with watching(app[SETTINGS], app[METRICS], app[SERVICES]):
        yield


async def _capacity_check(app: web.Application) -> AsyncIterator[None]:
    """The capacity check, on whichever replica holds its Lease (extender.controllers.capacity)."""
    from extender.controllers.capacity import checking

    async with checking(app[SETTINGS], app[METRICS], app[SERVICES]):
        yield


async def _admission_policy(app: web.Application) -> AsyncIterator[None]:
    """The admission policy's parameter, on whichever replica holds its Lease
    (extender.controllers.publisher); and, without the webhook, the releaser of the pods the policy
    holds."""
    from extender.controllers.publisher import publishing

    settings, metrics, services = app[SETTINGS], app[METRICS], app[SERVICES]
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(publishing(settings, metrics, services))
        hold = settings.webhook.unknown_images == "gate" and settings.policy.mode != "dry-run"
        if not settings.webhook.enabled and hold and services.kube is not None:
            from extender.controllers.releaser import releasing

            await stack.enter_async_context(releasing(settings, metrics, services))
        yield


@contextlib.asynccontextmanager
async def _self_managed_certificate(settings: Settings, services: Services) -> AsyncIterator[None]:
    from extender.kube.webhook_certs import SelfManagedCertificate

    if services.kube is None:
        raise WebhookSetupError(
            "webhook.certificate.selfManaged needs API access (kubernetes.mode is off "
            "or found no cluster)"
        )
    manager = SelfManagedCertificate(services.kube, settings.webhook)

    def expiry(when: datetime.datetime) -> None:
        # The gauge follows the certificate the listener serves (_webhook_listener), which
        # may be an older one if this one is refused.
        pass

    async with in_background(manager.keep(expiry)):
        # The listener's first handshake should already have a certificate: give the first
        # pass a moment, but never block start-up on it (the extender must come up).
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(manager.first_pass.wait(), _FIRST_CERTIFICATE_SECONDS)
        yield


async def _quiet_client_noise(app: web.Application) -> AsyncIterator[None]:
    """aiohttp logs malformed HTTP and lost clients as errors with tracebacks: make them
    throttled warnings, counted, while this app runs."""
    noise = ClientNoise(app[METRICS], app[WARNINGS])
    server_log = logging.getLogger("aiohttp.server")
    server_log.addFilter(noise)
    yield
    server_log.removeFilter(noise)


def tune_gc() -> None:
    """Make garbage collection rare and cheap for a server that parses big JSON bodies.

    A full Node list allocates hundreds of thousands of acyclic objects, which
    refcounting frees anyway; with the default thresholds they set off collections
    that scan every live object mid-request (p99 of a 100-node filter: ~35 ms
    against ~4 ms with this; bench/request_cost.py measures today's). Freezing moves start-up
    objects out of the collector's way for good.
    """
    gc.set_threshold(10_000, 50, 1_000)
    gc.freeze()


async def _periodic_gc(app: web.Application) -> AsyncIterator[None]:
    """Full collections on a timer (server.gcIntervalSeconds), between requests.

    With tune_gc's thresholds the oldest generation is, in practice, never collected, and
    cycles (exceptions with their tracebacks, for one: about five objects per failing
    lookup) pile up. A collection on the event loop runs between two requests, never inside
    one; bench/fuzz.py's soak measured 10-50 ms each, every 5 s at 200 calls a second.
    """
    interval = app[SETTINGS].server.gc_interval_seconds
    if interval <= 0:
        yield
        return
    async with in_background(_collect_periodically(interval)):
        yield


async def _timed_gc(app: web.Application) -> AsyncIterator[None]:
    """Every collection's pause in archfit_gc_pause_seconds while the app runs: what tells an
    operator whether a slow call met the collector."""
    pauses = GcPauses(app[METRICS])
    gc.callbacks.append(pauses)
    try:
        yield
    finally:
        gc.callbacks.remove(pauses)


class GcPauses:
    """A gc.callbacks entry that times each collection, in whichever thread it runs."""

    __slots__ = ("_by_generation", "_started")

    def __init__(self, metrics: Metrics) -> None:
        self._by_generation = tuple(
            metrics.child(metrics.gc_pause_seconds, str(generation)) for generation in range(3)
        )
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        # Collections never overlap (the interpreter runs one at a time), so one start
        # time serves every thread.
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self._by_generation[info["generation"]].observe(time.perf_counter() - self._started)


async def _collect_periodically(interval: float) -> None:
    """Run a full collection every `interval` seconds until cancelled."""
    while True:
        await asyncio.sleep(interval)
        started = time.perf_counter()
        freed = gc.collect()
        log.debug(
            "gc_collected", freed=freed, duration_ms=round((time.perf_counter() - started) * 1e3, 3)
        )
