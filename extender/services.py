"""The app's long-lived services (resolver, node index) and how settings turn into them."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from extender.config.settings import Settings
from extender.core.node_facts import NodeFacts
from extender.core.platforms import Platform
from extender.core.steering import SteeringSource
from extender.errors import ResolverSetupError
from extender.metrics import Metrics
from extender.registry.keychain import QueuedSecretSource, SecretSource
from extender.resolution.evidence_book import EvidenceBook, SharedEvidence, evidence_book
from extender.resolution.learned_resolver import LearnedResolver, runs_on_some_node
from extender.resolution.shared_tier import SharedTier
from extender.resolution.within_deadline import PlatformResolver, Resolution

if TYPE_CHECKING:
    from extender.kube.client.api import KubeApi
    from extender.kube.pod_feed import PodFeed
    from extender.registry.resolver import RegistryResolver

log = structlog.get_logger("archfit")


class NodeSource(Protocol):
    """Knows the platform and runtime rule of nodes by name (for NodeNames-only requests)."""

    @property
    def synced(self) -> bool: ...

    @property
    def problem(self) -> str | None:
        """Why the nodes known cannot stay current (a watch that keeps failing), or None."""
        ...

    def snapshot(self) -> Mapping[str, NodeFacts]:
        """Node name → facts, as of now: an immutable view a request reads without locks.

        Names it lacks are unknown (node_facts.UNKNOWN_NODE)."""
        ...

    def known_platforms(self) -> frozenset[Platform]:
        """The distinct platforms of the nodes known now."""
        ...

    async def wait_synced(self, seconds: float) -> bool: ...


@dataclass(frozen=True, slots=True)
class Services:
    resolution: Resolution
    nodes: NodeSource | None
    kube: KubeApi | None = None
    """The Kubernetes API client, when API access is on (extender.kube uses it)."""
    evidence: EvidenceBook | None = None
    """Learned evidence the resolver believes (extender.resolution.evidence_book); None with a given
    resolver."""
    steering: SteeringSource | None = None
    """Namespace preferences and arm64 shares (webhook.steering with API access)."""
    learned: LearnedResolver | None = None
    """The resolver that believes learned evidence (cache, then registry): what the mismatch
    watcher and the policy's publisher resolve with. None with a given resolver."""
    shared: SharedTier | None = None
    """The published ImagePlatforms object as a cache tier (admissionPolicy.enabled, with API
    access): what any replica's leader resolved, this one answers at once."""
    pods: PodFeed | None = None
    """The one list-watch of pods the mismatch watcher and the policy's publisher read
    (extender.kube.pod_feed), with API access when either is on; it lists once one joins."""


@asynccontextmanager
async def open_services(
    settings: Settings,
    metrics: Metrics,
    resolver: PlatformResolver | None = None,
    nodes: NodeSource | None = None,
) -> AsyncIterator[Services]:
    """Build what the settings ask for (unless given), and close it all on exit."""
    async with AsyncExitStack() as stack:
        api: KubeApi | None = None
        wants_kube = (
            (nodes is None and settings.kubernetes.node_index)
            or (resolver is None and settings.kubernetes.pull_secrets)
            or (settings.webhook.enabled and settings.webhook.certificate.self_managed)
            or settings.watcher.enabled
            or settings.capacity.enabled
            or (settings.webhook.enabled and settings.webhook.steering)
            or settings.admission_policy.enabled
        )
        kube_off = ""
        if wants_kube:
            # Imported here: with access off, not even archfit's own API client is loaded
            # (docs/architecture.md).
            from extender.kube.connect import access, build_api_client

            kube_off = access(settings.kubernetes)[1]
            api = build_api_client(settings.kubernetes)
            if api is not None:
                stack.callback(api.close)
        if nodes is None and api is not None and settings.kubernetes.node_index:
            from extender.kube.nodes import NodeIndex

            index = NodeIndex(api, on_change=metrics.nodes_known.set)
            index.start()
            stack.push_async_callback(index.stop)
            nodes = index
        book = None
        learned = None
        steering = None
        if settings.webhook.enabled and settings.webhook.steering and api is not None:
            from extender.kube.steering_watches import FleetSteering

            steering = FleetSteering(api)
            steering.start()
            stack.push_async_callback(steering.stop)
        if resolver is None:
            try:
                registry = await stack.enter_async_context(
                    registry_resolver(settings, metrics, api)
                )
            except ValueError as error:  # a CA bundle, plugin config or proxy that is unusable
                raise ResolverSetupError(str(error)) from error
            book = await stack.enter_async_context(
                evidence_book(
                    settings.cache,
                    settings.watcher.evidence_sync_seconds,
                    metrics,
                    corroborating_namespaces=settings.watcher.evidence_namespaces,
                    store=None if settings.cache.is_redis else evidence_config_map(settings, api),
                )
            )
            known_nodes = nodes
            runnable = (
                runs_on_some_node(lambda: known_nodes.snapshot().values())
                if known_nodes is not None
                else None
            )
            resolver = learned = LearnedResolver(
                registry,
                book,
                runnable=runnable,
                metrics=metrics,
                max_entries=settings.cache.max_entries,
            )
        if settings.webhook.enabled and api is not None:
            from extender.kube.nodes import check_registries_served

            # A one-off read; a hung API server delays nothing but this warning.
            check = asyncio.ensure_future(check_registries_served(api, settings.registry))
            stack.callback(check.cancel)

        pods = None
        if api is not None and (settings.watcher.enabled or settings.admission_policy.enabled):
            from extender.kube.pod_feed import PodFeed

            pods = PodFeed(api, settings.watcher.page_size)
            stack.push_async_callback(pods.stop)
        shared = None
        if settings.admission_policy.enabled and api is not None and learned is not None:
            # Watched once the policy's API is known to be there (controllers.publisher).
            shared = SharedTier(
                learned,
                learned,
                on_answer=lambda where: metrics.policy_table_lookups.labels(where).inc(),
            )
        resolution = Resolution(
            shared or resolver,
            max_recent=settings.cache.max_entries,
            on_recent=functools.partial(metrics.cache_lookup, "answer", "hit"),
            evidence=shared or learned,
        )
        stack.push_async_callback(resolution.aclose)
        if book is not None:
            book.on_change = resolution.forget_recent
        # Why NodeNames requests would fail with "no node index": said once, at start.
        node_index_off = None
        if nodes is None:
            node_index_off = (
                kube_off if settings.kubernetes.node_index else "kubernetes.nodeIndex is false"
            )
        log.info(
            "services_ready",
            resolver=type(resolver).__name__,
            node_index=nodes is not None,
            node_index_off=node_index_off,
            mode=settings.policy.mode,
            failure_policy=settings.policy.failure_policy,
        )
        yield Services(
            resolution=resolution,
            nodes=nodes,
            kube=api,
            evidence=book,
            steering=steering,
            learned=learned,
            shared=shared,
            pods=pods,
        )


def evidence_config_map(settings: Settings, api: Any, namespace: str = "") -> SharedEvidence | None:
    """The ConfigMap that shares evidence without Redis, with API access; else None (the
    evidence stays in this replica's memory). In archfit's namespace (the pod's own, or the
    kubeconfig context's) unless `namespace` names it."""
    if api is None:
        return None
    from extender.kube.connect import current_namespace
    from extender.kube.evidence_store import ConfigMapEvidence

    namespace = namespace or current_namespace(settings.kubernetes)
    return ConfigMapEvidence(api, namespace, settings.watcher.evidence_config_map)


@asynccontextmanager
async def registry_resolver(
    settings: Settings, metrics: Metrics | None, api: Any | None, *, queue_secret_reads: int = 0
) -> AsyncIterator[RegistryResolver]:
    """The registry-backed resolver, reading pull secrets through the API when it can.

    `queue_secret_reads`: when above 0, at most that many pull-secret lookups run at once and
    the rest wait (a batch such as `archfit audit`); 0 fails fast past the thread limit.
    """
    from extender.registry.resolver import build_resolver

    secrets = None
    if api is not None and settings.kubernetes.pull_secrets:
        from extender.kube.pull_secrets import KubeSecretSource

        secrets = KubeSecretSource(api, ttl_seconds=settings.registry.pull_secret_ttl_seconds)
    source: SecretSource | None = secrets
    if secrets is not None and queue_secret_reads > 0:
        source = QueuedSecretSource(secrets, queue_secret_reads)
    resolver = await build_resolver(settings.registry, settings.cache, metrics, source)
    try:
        yield resolver
    finally:
        await resolver.aclose()
        if secrets is not None:
            await secrets.aclose()
