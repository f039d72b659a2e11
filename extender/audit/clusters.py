"""`archfit audit --context a --context b` (or `--all-contexts`): several clusters, one run.

Each cluster is read on its own thread and judged on its own; the images of all of them are
looked up together, through one resolver, so an image that several clusters run costs one
lookup. Pull secrets are read from the cluster whose workload names them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TextIO

from extender.audit import output
from extender.audit.distinct_images import Pair, distinct_pairs
from extender.audit.pure.fleet_report import ClusterReport, FleetReport, combine
from extender.audit.pure.options import AuditOptions
from extender.audit.pure.report import LeftOut, Report
from extender.audit.pure.workloads import Workload
from extender.audit.registry_answers import RegistryAnswers, resolve_with
from extender.audit.render import left_out_line
from extender.audit.run import (
    SECRET_LOOKUPS,
    fleet_capacity,
    judge_fleet,
    parse_workloads,
    progress,
)
from extender.config.settings import Settings
from extender.core.platforms import Platform
from extender.core.pods import PullSecretsRef
from extender.metrics import Metrics
from extender.registry.keychain import QueuedSecretSource, SecretSource
from extender.registry.pure.credentials import PullSecret
from extender.registry.resolver import build_resolver
from extender.resolution.within_deadline import PlatformResolver

_READERS = 8
"""Clusters read at once (each read is a few paged lists, on its own thread)."""


class ClusterSecrets:
    """A SecretSource that reads each workload's pull secrets from its own cluster."""

    def __init__(self, sources: Mapping[str, SecretSource]) -> None:
        self._sources = sources

    async def pull_secrets(self, pull: PullSecretsRef) -> Sequence[PullSecret]:
        source = self._sources.get(pull.cluster)
        return [] if source is None else await source.pull_secrets(pull)


@dataclass(frozen=True)
class Cluster:
    """One cluster as read: its workloads (pulls naming the cluster) and raw objects."""

    name: str
    workloads: list[Workload]
    skipped: list[str]
    intermediates: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    nodes: list[dict[str, Any]]
    events: list[dict[str, Any]]
    left_out: list[LeftOut]
    only_audited: bool = False
    node_pools: list[dict[str, Any]] = field(default_factory=list)


def cluster(name: str, objects: Mapping[str, Any], *, only_audited: bool = False) -> Cluster:
    """A cluster from its raw objects (an extender.kube.fleet.Fleet's fields by name)."""
    workloads, skipped = parse_workloads(objects["workloads"])
    return Cluster(
        name=name,
        workloads=[dataclasses.replace(w, pull=w.pull._replace(cluster=name)) for w in workloads],
        skipped=skipped,
        intermediates=objects["intermediates"],
        pods=objects["pods"],
        nodes=objects["nodes"],
        events=objects["events"],
        left_out=[LeftOut(kind, reason) for kind, reason in objects["left_out"].items()],
        only_audited=only_audited,
        node_pools=objects.get("node_pools") or [],
    )


def judge_clusters(
    clusters: Sequence[Cluster],
    resolution: RegistryAnswers,
    options: AuditOptions,
    *,
    loose: bool,
    declared: frozenset[Platform] = frozenset(),
) -> FleetReport:
    """Each cluster judged on its own (against its own capacity, with `declared`), then the
    fleet's total."""
    reports = []
    for item in clusters:
        report: Report = judge_fleet(
            item.workloads,
            resolution.lookups,
            item.intermediates,
            item.pods,
            item.nodes,
            item.events,
            options.pricing,
            skipped=item.skipped,
            only_audited=item.only_audited,
            loose=loose,
            left_out=item.left_out,
            capacity=fleet_capacity(
                item.nodes, item.node_pools, {i.kind: i for i in item.left_out}, declared
            ),
        )
        reports.append(
            ClusterReport(item.name, dataclasses.replace(report, hints=resolution.hints))
        )
    return combine(reports)


def fleet_pairs(clusters: Sequence[Cluster]) -> list[Pair]:
    """Every cluster's distinct (image, credentials) pairs."""
    return distinct_pairs(w for item in clusters for w in item.workloads)


@contextlib.asynccontextmanager
async def fleet_resolver(
    settings: Settings, metrics: Metrics, apis: Mapping[str, Any]
) -> AsyncIterator[PlatformResolver]:
    """One resolver for every cluster: one cache and single flight, each cluster's secrets."""
    from extender.kube.pull_secrets import KubeSecretSource

    readers: dict[str, KubeSecretSource] = {}
    if settings.kubernetes.pull_secrets:
        ttl = settings.registry.pull_secret_ttl_seconds
        readers = {name: KubeSecretSource(api, ttl_seconds=ttl) for name, api in apis.items()}
    queued: dict[str, SecretSource] = {
        name: QueuedSecretSource(reader, SECRET_LOOKUPS) for name, reader in readers.items()
    }
    resolver = await build_resolver(
        settings.registry, settings.cache, metrics, ClusterSecrets(queued)
    )
    try:
        yield resolver
    finally:
        await resolver.aclose()
        for reader in readers.values():
            await reader.aclose()


def run_fleet_audit(
    settings: Settings,
    namespaces: Mapping[str, str | None],
    options: AuditOptions,
    out: TextIO,
    err: TextIO,
) -> int:
    """Audit each context's cluster (`namespaces`: context → namespace, None for all) and
    write one report. Exit status as `run_audit`."""
    from extender.kube.connect import KubeConfigError, build_api_client
    from extender.kube.fleet import FleetError, Scope, read_fleet

    apis: dict[str, Any] = {}
    try:
        for name in namespaces:
            kube = dataclasses.replace(settings.kubernetes, mode="kubeconfig", context=name)
            try:
                apis[name] = build_api_client(kube, required=True)
            except KubeConfigError as error:
                print(f"archfit: context {name}: cannot reach Kubernetes: {error}", file=err)
                return 2
        excluded = settings.policy.excluded_namespaces

        def read(name: str) -> Cluster:
            scope = Scope(namespaces[name], options.selector, excluded)
            fleet = read_fleet(apis[name], scope)
            objects = {f.name: getattr(fleet, f.name) for f in dataclasses.fields(fleet)}
            return cluster(name, objects, only_audited=bool(options.selector))

        with ThreadPoolExecutor(min(_READERS, len(apis))) as pool:
            futures = {name: pool.submit(read, name) for name in apis}
            clusters = []
            for name, future in futures.items():
                try:
                    clusters.append(future.result())
                except FleetError as error:
                    print(f"archfit: context {name}: {error}", file=err)
                    return 2
        pairs = fleet_pairs(clusters)
        with progress(err, len(pairs)) as advance:
            resolution = asyncio.run(_resolve_images(settings, apis, pairs, advance, options, err))
    finally:
        for api in apis.values():
            api.close()
    fleet = judge_clusters(
        clusters,
        resolution,
        options,
        loose=settings.policy.loose_matching,
        declared=settings.capacity.declared_platforms,
    )
    for item in fleet.summary.left_out:
        print(f"archfit: {left_out_line(item)}", file=err)
    for lie in resolution.disagreements or ():  # the fleet's formats have no section for them
        print(f"archfit: --verify: {lie.image} entry {lie.digest}: {lie.problem}", file=err)
    output.write(fleet, options.output, out)
    blocked = fleet.summary.blocked or any(c.report.capacity for c in fleet.clusters)
    return 1 if options.fail_on_blockers and blocked else 0


async def _resolve_images(
    settings: Settings,
    apis: Mapping[str, Any],
    pairs: Sequence[Pair],
    advance: Callable[[], None],
    options: AuditOptions,
    err: TextIO,
) -> RegistryAnswers:
    metrics = Metrics()
    async with fleet_resolver(settings, metrics, apis) as resolver:
        return await resolve_with(resolver, metrics, settings, pairs, advance, options, err)
