"""The aiohttp application: routes, resources under AppKeys, and their lifecycle.

Handlers only translate; decisions are in `placement`, explanations in `explain`.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import random
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from itertools import repeat
from typing import Any, Protocol

import orjson
import structlog
from aiohttp import web

from extender import explain
from extender.config import Settings
from extender.gc_schedule import collect_periodically
from extender.listener import (
    BodyTimeout,
    ClientNoise,
    ConnectionGuard,
    answer_and_close,
    client_problem,
    read_body,
)
from extender.metrics import Metrics, tally_request_lookups
from extender.node_parts import FactsOf
from extender.once import OncePerCause
from extender.placement import (
    Candidates,
    FilterDecision,
    Policy,
    Resolved,
    ScoreDecision,
    decide_filter,
    decide_scores,
)
from extender.pods import PodError, PodFacts, facts, skip_reason
from extender.resolution import PlatformResolver
from extender.runtimes import UNKNOWN_NODE, NodeFacts
from extender.scheduler_api import (
    ExtenderArgs,
    NameLists,
    WireError,
    parse_args,
    render_error,
    render_filter,
    render_priorities,
)
from extender.services import NodeSource, Services, open_services
from extender.tls import ReloadingCertificate
from extender.ttlmap import TTLMap

log = structlog.get_logger("archfit")

SETTINGS = web.AppKey("settings", Settings)
METRICS = web.AppKey("metrics", Metrics)
SERVICES = web.AppKey("services", Services)
WEBHOOK_CERTIFICATE = web.AppKey("webhook_certificate", ReloadingCertificate)
SERVER_CERTIFICATE = web.AppKey("server_certificate", ReloadingCertificate)
WARNINGS = web.AppKey("warnings", OncePerCause)
GUARD = web.AppKey("connection_guard", ConnectionGuard)
POLICY = web.AppKey("policy", Policy)
FACTS = web.AppKey("node_facts", FactsOf)
"""Shares NodeFacts between full-Node requests, so their nodes compare by identity."""
DEBUG = web.AppKey("debug", bool)
NAME_LISTS = web.AppKey("name_lists", NameLists)
CANDIDATES = web.AppKey("candidates", TTLMap[tuple[int, int], tuple[object, object, Candidates]])
_CANDIDATES_SECONDS = 60.0
DECISIONS = web.AppKey("decisions", TTLMap[tuple[Any, ...], tuple[Any, ...]])
"""How long an unused Candidates is kept; a snapshot change makes it unreachable anyway."""

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
    app[POLICY] = policy_of(settings)
    app[FACTS] = FactsOf()
    app[NAME_LISTS] = NameLists()
    app[CANDIDATES] = TTLMap(64)
    app[DECISIONS] = TTLMap(256)
    app[DEBUG] = settings.logging.level == "debug"
    app[METRICS] = Metrics()
    app[WARNINGS] = OncePerCause()
    app[GUARD] = ConnectionGuard(
        settings.server.header_timeout_seconds,
        settings.server.max_connections,
        app[METRICS],
        app[WARNINGS],
    )

    async def services_ctx(app: web.Application) -> AsyncIterator[None]:
        async with open_services(settings, app[METRICS], resolver, nodes) as services:
            app[SERVICES] = services
            yield

    app.cleanup_ctx.append(services_ctx)
    app.cleanup_ctx.append(_quiet_client_noise)
    app.cleanup_ctx.append(_periodic_gc)
    if settings.server.tls:
        certificate = ReloadingCertificate(settings.server.cert_file, settings.server.key_file)
        try:
            certificate.load()
        except (OSError, ssl.SSLError) as error:
            raise ServerCertificateError(
                f"server.certFile/keyFile: cannot load {settings.server.cert_file}: {error}"
            ) from error
        app[SERVER_CERTIFICATE] = certificate
        app.cleanup_ctx.append(_watch_server_certificate)
    if settings.webhook.enabled:
        app.cleanup_ctx.append(_webhook_ctx)
    prefix = settings.server.prefix.rstrip("/")
    app.router.add_post(f"{prefix}/filter", filter_handler)
    app.router.add_post(f"{prefix}/prioritize", prioritize_handler)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_handler)
    return app


@dataclass(frozen=True, slots=True)
class _Call:
    """One verb call, decoded: the wire args, the pod's facts and each candidate's facts."""

    args: ExtenderArgs
    pod: PodFacts
    skip: str | None
    """Why the pod is not examined (annotation, excluded_namespace, no_images), or None."""
    candidates: Candidates
    """The offered nodes and what archfit knows of each; no facts when the pod is skipped."""
    started: float
    """`time.perf_counter()` when the request arrived."""
    deadline: float
    """`time.monotonic()` by which registry lookups must be done."""
    dry_run: bool
    debug: bool
    """Whether per-node debug lines are wanted (explain)."""

    @property
    def count(self) -> int:
        """How many nodes the scheduler offered."""
        return len(self.args.names)

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def elapsed_ms(self) -> float:
        return round(self.elapsed() * 1000, 3)


async def _decode(request: web.Request, verb: str) -> _Call:
    """Parse the body, bind the log context and find each candidate's facts."""
    started = time.perf_counter()
    app = request.app
    settings = app[SETTINGS]
    # One budget per request: waiting for the node index spends it too.
    deadline = time.monotonic() + settings.policy.resolve_deadline_seconds
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(
        request_id=request.headers.get("X-Request-Id") or _request_id(), verb=verb
    )
    body = await read_body(request, settings.server.body_timeout_seconds)
    args = parse_args(body, app[FACTS], app[NAME_LISTS])
    pod = facts(args.pod)
    structlog.contextvars.bind_contextvars(pod=pod.name, namespace=pod.namespace)
    skip = skip_reason(pod, settings.policy.excluded_namespaces)
    candidates = _UNEXAMINED
    if args.facts is not None:
        candidates = Candidates.of(args.names, args.facts)
    elif skip is None:  # a skipped pod's names are echoed unexamined: no facts needed
        nodes = app[SERVICES].nodes
        if nodes is None:
            raise _NoNodeIndex
        if not nodes.synced:
            await nodes.wait_synced(max(0.0, deadline - time.monotonic()))
        candidates = _candidates(app[CANDIDATES], args.names, nodes.snapshot())
    dry_run = settings.policy.mode == "dry-run"
    return _Call(args, pod, skip, candidates, started, deadline, dry_run, app[DEBUG])


_UNEXAMINED = Candidates.of((), ())


def _candidates(
    memo: TTLMap[tuple[int, int], tuple[object, object, Candidates]],
    names: list[str],
    known: Mapping[str, NodeFacts],
) -> Candidates:
    """The Candidates of `names` under the node index snapshot `known`, built once per pair.

    kube-scheduler offers pod after pod the same feasible nodes, and NameLists hands out
    the same list object for the same bytes; a new snapshot (a node came or changed) is a
    new object. So the pair's identities are the key, and the entry holds both objects,
    which keeps their ids from being reused while it lives.
    """
    key = (id(names), id(known))
    hit = memo.get(key)
    if hit is not None and hit[0] is names and hit[1] is known:
        return hit[2]
    candidates = Candidates.of(names, list(map(known.get, names, repeat(UNKNOWN_NODE))))
    memo.put(key, (names, known, candidates), _CANDIDATES_SECONDS)
    return candidates


class _Verb(Protocol):
    """What differs between filter and prioritize; `_serve` is the skeleton they share."""

    name: str

    def decide(self, call: _Call, resolved: Mapping[str, Resolved], policy: Policy) -> Any: ...

    def explain(
        self,
        call: _Call,
        decision: Any,
        resolved: Mapping[str, Resolved],
        policy: Policy,
        lookups: Mapping[str, int],
    ) -> None: ...

    def count(
        self,
        metrics: Metrics,
        call: _Call,
        decision: Any,
        resolved: Mapping[str, Resolved],
        policy: Policy,
    ) -> None: ...

    def render(self, call: _Call, decision: Any) -> bytes: ...

    def neutral(self, call: _Call) -> bytes:
        """The answer that changes nothing: on skip, dry-run and archfit's own errors."""
        ...


class _Filter:
    name = "filter"

    def decide(
        self, call: _Call, resolved: Mapping[str, Resolved], policy: Policy
    ) -> FilterDecision:
        return decide_filter(call.pod.images, resolved, call.candidates, policy)

    def explain(
        self,
        call: _Call,
        decision: FilterDecision,
        resolved: Mapping[str, Resolved],
        policy: Policy,
        lookups: Mapping[str, int],
    ) -> None:
        explain.filtered(call, decision, resolved, policy, lookups)

    def count(
        self,
        metrics: Metrics,
        call: _Call,
        decision: FilterDecision,
        resolved: Mapping[str, Resolved],
        policy: Policy,
    ) -> None:
        metrics.extender_call(
            self.name,
            "ok",
            call.elapsed(),
            nodes=(len(decision.passed), decision.rejected, len(decision.failed)),
            unknown_images=len(explain.unknown_images(resolved)),
            failure_policy=policy.failure_policy,
            dry_run=call.dry_run,
        )

    def render(self, call: _Call, decision: FilterDecision) -> bytes:
        # kube-scheduler gives every node an extender drops without naming the status
        # UnschedulableAndUnresolvable (framework NewDefaultNodeToStatus), the very status
        # it gives FailedAndUnresolvableNodes (schedule_one.go findNodesThatPassExtenders).
        # The reasons only reach the pod's FailedScheduling event when no node is left; while
        # some pass, naming the rest would only cost both sides encoding and decoding them.
        # The logs name every rejected node either way (explain.filtered).
        unresolvable = decision.unresolvable if not decision.passed else {}
        return render_filter(call.args, decision.passed, decision.failed, unresolvable)

    def neutral(self, call: _Call) -> bytes:
        # Archfit's own failure must never reject a node: pass everything.
        return render_filter(call.args, call.args.names, {}, {})


class _Prioritize:
    name = "prioritize"

    def decide(
        self, call: _Call, resolved: Mapping[str, Resolved], policy: Policy
    ) -> ScoreDecision:
        pod = call.pod
        return decide_scores(pod.images, resolved, call.candidates, policy, pod.prefer_arch)

    def explain(
        self,
        call: _Call,
        decision: ScoreDecision,
        resolved: Mapping[str, Resolved],
        policy: Policy,
        lookups: Mapping[str, int],
    ) -> None:
        explain.scored(call, call.pod, decision)

    def count(
        self,
        metrics: Metrics,
        call: _Call,
        decision: ScoreDecision,
        resolved: Mapping[str, Resolved],
        policy: Policy,
    ) -> None:
        metrics.extender_call(self.name, "ok", call.elapsed())

    def render(self, call: _Call, decision: ScoreDecision) -> bytes:
        return render_priorities(decision.scores)

    def neutral(self, call: _Call) -> bytes:
        # No scores at all: kube-scheduler counts a host the list leaves out as 0.
        return render_priorities({})


_FILTER = _Filter()
_PRIORITIZE = _Prioritize()


async def _serve(request: web.Request, verb: _Verb) -> web.Response:
    """decode → resolve → decide → explain → count → render, the same for every verb."""
    app = request.app
    metrics = app[METRICS]
    call = await _decode(request, verb.name)
    if call.skip is not None:
        explain.skipped(verb.name, call, call.skip)
        metrics.extender_call(verb.name, "skipped", skipped=call.skip)
        return _json(verb.neutral(call))
    policy = app[POLICY]
    lookups = tally_request_lookups()
    try:
        resolved = await app[SERVICES].resolution.resolve(
            call.pod.images, call.pod.pull, call.remaining()
        )
        decision, answer = _decided(app[DECISIONS], verb, call, resolved, policy)
    except Exception:
        log.exception(f"{verb.name}_internal_error", candidates=call.count)
        metrics.extender_call(verb.name, "internal_error")
        return _json(verb.neutral(call))
    verb.explain(call, decision, resolved, policy, lookups)
    verb.count(metrics, call, decision, resolved, policy)
    return _json(verb.neutral(call) if call.dry_run else answer)


_Decided = tuple[Candidates, tuple[Resolved, ...], Any, bytes]
"""What `_decided` keeps: the inputs it was decided from (held, so their ids stay theirs),
the decision and the rendered answer."""
_DECISIONS_SECONDS = 60.0


def _decided(
    memo: TTLMap[tuple[Any, ...], _Decided],
    verb: _Verb,
    call: _Call,
    resolved: Mapping[str, Resolved],
    policy: Policy,
) -> tuple[Any, bytes]:
    """The verb's decision and rendered answer, reused for the same nodes and images.

    A Deployment's pods come one after another with the same images, and the scheduler
    offers them the same nodes: Candidates (app._candidates) and resolved platforms (the
    resolution's recent answers and the cache share one object per answer) are then the
    very same objects, so identity is the key, and deciding and rendering 500 nodes is
    done once per distinct question. Unknown images and full Node lists are decided anew.
    """
    values = tuple(resolved[image] for image in call.pod.images)
    key = None
    if call.args.full is None and all(type(v) is frozenset for v in values):
        key = (verb.name, id(call.candidates), call.pod.images, *map(id, values))
        key += call.pod.prefer_arch
        hit = memo.get(key)
        if (
            hit is not None
            and hit[0] is call.candidates
            and all(a is b for a, b in zip(hit[1], values, strict=True))
        ):
            return hit[2], hit[3]
    decision = verb.decide(call, resolved, policy)
    answer = verb.render(call, decision)
    if key is not None:
        memo.put(key, (call.candidates, values, decision, answer), _DECISIONS_SECONDS)
    return decision, answer


async def filter_handler(request: web.Request) -> web.Response:
    return await _serve(request, _FILTER)


async def prioritize_handler(request: web.Request) -> web.Response:
    return await _serve(request, _PRIORITIZE)


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
        metrics.webhook_certificate_expiry.set(when.timestamp())

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
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    services = request.app.get(SERVICES)
    checks: dict[str, bool] = {"started": services is not None}
    if services is not None and services.nodes is not None:
        checks["nodeIndexSynced"] = services.nodes.synced
    if request.app[SETTINGS].webhook.enabled:
        certificate = request.app.get(WEBHOOK_CERTIFICATE)
        checks["webhookCertificate"] = certificate is not None and certificate.ready
    ready = all(checks.values())
    return web.Response(
        body=orjson.dumps({"ready": ready, "checks": checks}),
        status=200 if ready else 503,
        content_type=_JSON,
    )


async def metrics_handler(request: web.Request) -> web.Response:
    body = request.app[METRICS].render()
    return web.Response(body=body, headers={"Content-Type": "text/plain; version=0.0.4"})


class _NoNodeIndex(Exception):
    """NodeNames arrived but archfit list-watches no Nodes."""


_NO_NODE_INDEX = (
    "archfit got NodeNames (nodeCacheCapable: true) but has no node index: "
    "enable kubernetes.nodeIndex with API access, or set nodeCacheCapable: false"
)

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
    except _NoNodeIndex:
        # Misconfiguration, not a rejection: Error makes it an extender error
        # that shows in the scheduler's log and the pod's event.
        _problem(request, "no_node_index", hint=_NO_NODE_INDEX)
        return _json(render_error(_NO_NODE_INDEX))
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


def policy_of(settings: Settings) -> Policy:
    """The decision knobs, built once per app (POLICY)."""
    return Policy(
        failure_policy=settings.policy.failure_policy,
        matching=settings.policy.matching,
        arch_preference=settings.policy.arch_preference,
    )


def _request_id() -> str:
    """16 hex digits to find one request's lines: unique enough, and cheaper than uuid4's
    system randomness on every call."""
    return f"{random.getrandbits(64):016x}"


def _json(body: bytes) -> web.Response:
    return web.Response(body=body, content_type=_JSON)
