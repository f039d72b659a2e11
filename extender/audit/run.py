"""`archfit audit`: read the fleet, look up each distinct image once, judge, and print.

Kubernetes access comes from the `kubernetes` settings (kubeconfig or in-cluster), image
lookups from the same registry settings, credentials, cache and SSRF guard as `serve`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from extender.audit import output, render
from extender.audit.distinct_images import Pair, distinct_pairs
from extender.audit.pure import breakage
from extender.audit.pure.options import AuditOptions, Pricing
from extender.audit.pure.report import LeftOut, Lookups, Report, build
from extender.audit.pure.workloads import (
    Owners,
    Workload,
    WorkloadError,
    arch_choices,
    from_object,
    node_architectures,
    running,
)
from extender.audit.registry_answers import RegistryAnswers, resolve_with
from extender.config.settings import Settings
from extender.core.capacity import Capacity, cluster_capacity
from extender.core.platforms import Platform

SECRET_LOOKUPS = 4
"""Pull-secret lookups in flight at once per cluster; each reads a ServiceAccount and its
Secrets, cached."""


def run_audit(settings: Settings, options: AuditOptions, out: TextIO, err: TextIO) -> int:
    """Audit the cluster and write the report. Exit status: 0, 1 when `fail_on_blockers`
    and a workload is blocked, 2 when the cluster cannot be read."""
    from extender.kube.connect import KubeConfigError, build_api_client
    from extender.kube.fleet import FleetError, Scope, read_fleet

    try:
        api: Any = build_api_client(settings.kubernetes, required=True)
    except KubeConfigError as error:
        print(f"archfit: cannot reach Kubernetes: {error}", file=err)
        return 2
    if api is None:  # required=True raises instead; this keeps the type checker informed
        return 2
    try:
        scope = Scope(options.namespace, options.selector, settings.policy.excluded_namespaces)
        try:
            fleet = read_fleet(api, scope)
        except FleetError as error:
            print(f"archfit: {error}", file=err)
            return 2
        workloads, skipped = parse_workloads(fleet.workloads)
        pairs = distinct_pairs(workloads)
        with progress(err, len(pairs)) as advance:
            resolution = asyncio.run(_resolve_images(settings, api, pairs, advance, options, err))
        lookups = resolution.lookups
    finally:
        api.close()
    report = judge_fleet(
        workloads,
        lookups,
        fleet.intermediates,
        fleet.pods,
        fleet.nodes,
        fleet.events,
        options.pricing,
        skipped=skipped,
        only_audited=bool(options.selector),
        loose=settings.policy.loose_matching,
        left_out=[LeftOut(kind, reason) for kind, reason in fleet.left_out.items()],
        capacity=fleet_capacity(
            fleet.nodes, fleet.node_pools, fleet.left_out, settings.capacity.declared_platforms
        ),
    )
    report = dataclasses.replace(
        report, hints=resolution.hints, disagreements=resolution.disagreements
    )
    for item in report.summary.left_out:
        print(f"archfit: {render.left_out_line(item)}", file=err)
    output.write(report, options.output, out)
    blocked = report.summary.blocked or report.capacity
    return 1 if options.fail_on_blockers and blocked else 0


def fleet_capacity(
    nodes: Sequence[dict[str, Any]],
    node_pools: Sequence[dict[str, Any]],
    left_out: Mapping[str, object],
    declared: frozenset[Platform],
) -> Capacity | None:
    """What the cluster's capacity offers (its nodes, NodePools and capacity.declared), or
    None when Nodes or NodePools could not be read: then no workload is said not to fit."""
    if "Node" in left_out or "NodePool" in left_out:
        return None
    return cluster_capacity(nodes, node_pools, declared)


def parse_workloads(
    objects: dict[str, list[dict[str, Any]]],
) -> tuple[list[Workload], list[str]]:
    """Workloads from raw objects by kind; the ones that do not parse are skipped, with why."""
    workloads: list[Workload] = []
    skipped: list[str] = []
    for kind, items in objects.items():
        for obj in items:
            try:
                workloads.append(from_object(kind, obj))
            except WorkloadError as error:
                skipped.append(str(error))
    return workloads, skipped


def judge_fleet(
    workloads: Sequence[Workload],
    lookups: Lookups,
    intermediates: Sequence[dict[str, Any]],
    pods: Sequence[dict[str, Any]],
    nodes: Sequence[dict[str, Any]],
    events: Sequence[dict[str, Any]],
    pricing: Pricing,
    *,
    skipped: Sequence[str] = (),
    only_audited: bool = False,
    loose: bool = False,
    left_out: Sequence[LeftOut] = (),
    capacity: Capacity | None = None,
) -> Report:
    """Attribute pods to workloads, find what is broken now, and build the report (with the
    workloads `capacity` cannot run, when given)."""
    owners = Owners(workloads, intermediates)
    arch = node_architectures(nodes)
    broken = breakage.find(pods, events, owners, arch)
    if only_audited:  # a label selector: pods of other workloads are out of scope
        keys = {workload.key for workload in workloads}
        broken = [item for item in broken if item.workload in keys]
    return build(
        workloads,
        lookups,
        running(pods, owners, arch),
        broken,
        pricing,
        skipped=skipped,
        loose=loose,
        left_out=left_out,
        splits=arch_choices(pods, owners),
        capacity=capacity,
    )


async def _resolve_images(
    settings: Settings,
    api: Any,
    pairs: Sequence[Pair],
    advance: Callable[[], None],
    options: AuditOptions,
    err: TextIO,
) -> RegistryAnswers:
    from extender.metrics import Metrics
    from extender.services import registry_resolver

    metrics = Metrics()  # for what registries say of their pull limits (audit.budget)
    async with registry_resolver(
        settings, metrics, api, queue_secret_reads=SECRET_LOOKUPS
    ) as resolver:
        return await resolve_with(resolver, metrics, settings, pairs, advance, options, err)


@contextlib.contextmanager
def progress(err: TextIO, total: int) -> Iterator[Callable[[], None]]:
    """A progress bar on stderr while images resolve, only when stderr is a terminal."""
    if not (err.isatty() and total):
        yield lambda: None
        return
    columns = (TextColumn("resolving images"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())  # fmt: skip
    with Progress(*columns, console=Console(file=err), transient=True) as bar:
        task = bar.add_task("images", total=total)
        yield lambda: bar.advance(task)
