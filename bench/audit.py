"""`archfit audit` of 2,000 workloads sharing 200 images, against a local registry.

Run: `.venv/bin/python -m bench.audit [--workloads 50000] [--output table|json|csv|markdown]`
(needs /usr/bin/docker-registry); with `--clusters 2`, two clusters of 2,000 workloads each
(the second pulls the same images in another order) audited in one run as `archfit audit
--context a --context b` does: one resolver for both, newer-tag hints for the arm64 blockers,
and the multi-cluster JSON. It starts its own registry on 127.0.0.1 and pushes 200 images
(120 OCI indexes, 50 amd64-only, 30 arm64-only).
The fleet is fed to the audit core directly, with no API server: 2,000 Deployments as the
API would serve them, in 20 namespaces, each with a ReplicaSet and two bound pods on 100
nodes. The timed part is everything after the cluster reads: parsing the objects, one
lookup per distinct (image, credentials) pair through the same resolver, cache and single
flight as `archfit serve`, judging, and rendering the JSON report. Registry requests come
from the registry's log; peak RSS from getrusage.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import resource
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from extender.audit.clusters import cluster, fleet_pairs, judge_clusters
from extender.audit.distinct_images import distinct_pairs, resolve_pairs
from extender.audit.output import write
from extender.audit.pure.fleet_report import FleetReport
from extender.audit.pure.options import AuditOptions, Pricing
from extender.audit.pure.report import Report
from extender.audit.registry_answers import metric_remaining, resolve
from extender.audit.run import judge_fleet, parse_workloads
from extender.config.registry_settings import CacheSettings, HostSettings, RegistrySettings
from extender.metrics import Metrics
from extender.registry.resolver import build_resolver
from tests.support.images import Pusher
from tests.support.registry import RegistryProcess

WORKLOADS = 2_000
IMAGES = 200
NAMESPACES = 20
NODES = 100
PODS_PER_WORKLOAD = 2


def push_images(pusher: Pusher) -> list[str]:
    """120 multi-arch indexes, 50 amd64-only and 30 arm64-only images."""
    references = []
    for n in range(IMAGES):
        repo = f"bench/svc{n}"
        if n < 120:
            image, _ = pusher.index(repo, "1.0", ["linux/amd64", "linux/arm64"])
        elif n < 170:
            image = pusher.single(repo, "1.0", "linux/amd64")
        else:
            image = pusher.single(repo, "1.0", "linux/arm64")
        references.append(image.reference)
    return references


def _container(name: str, image: str) -> dict[str, Any]:
    return {"name": name, "image": image, "resources": {"requests": {"cpu": "250m"}}}


def fleet(references: list[str], shift: int = 0) -> dict[str, Any]:
    """Deployments, their ReplicaSets, bound pods and nodes, as raw API objects; `shift`
    rotates which workload pulls which image (another cluster, the same images)."""
    deployments, replica_sets, pods = [], [], []
    references = references[shift:] + references[:shift]
    for i in range(WORKLOADS):
        namespace, name = f"team-{i % NAMESPACES}", f"svc-{i}"
        spec: dict[str, Any] = {"containers": [_container("app", references[i % IMAGES])]}
        if i % 2:
            spec["containers"].append(_container("sidecar", references[(i * 7 + 3) % IMAGES]))
        if i % 3 == 0:
            spec["initContainers"] = [_container("init", references[(i * 13 + 5) % IMAGES])]
        uid = f"deploy-{i}"
        deployments.append({
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "spec": {"replicas": PODS_PER_WORKLOAD, "template": {"spec": spec}},
        })  # fmt: skip
        owner = [{"kind": "Deployment", "uid": uid, "controller": True}]
        replica_sets.append({"metadata": {"uid": f"rs-{i}", "ownerReferences": owner}})
        for p in range(PODS_PER_WORKLOAD):
            pods.append({
                "metadata": {"name": f"{name}-{p}", "namespace": namespace, "uid": f"pod-{i}-{p}",
                             "ownerReferences": [{"kind": "ReplicaSet", "uid": f"rs-{i}",
                                                  "controller": True}]},
                "spec": {"nodeName": f"node-{(i + p) % NODES}", **spec},
                "status": {"phase": "Running"},
            })  # fmt: skip
    nodes = [
        {"metadata": {"name": f"node-{n}",
                      "labels": {"kubernetes.io/arch": "arm64" if n % 2 else "amd64"}}}
        for n in range(NODES)
    ]  # fmt: skip
    return {"deployments": deployments, "intermediates": replica_sets, "pods": pods,
            "nodes": nodes}  # fmt: skip


async def audit(
    registry: RegistryProcess, objects: dict[str, Any], output: str = "json"
) -> tuple[Report, int, float]:
    """Parse, look up, judge and render; returns the report, the distinct pairs, and the
    seconds spent looking images up."""
    settings = RegistrySettings(
        hosts={registry.host: HostSettings(plain_http=True)}, allowed_networks=("127.0.0.1",)
    )
    resolver = await build_resolver(settings, CacheSettings())
    try:
        workloads, _ = parse_workloads({"Deployment": objects["deployments"]})
        pairs = distinct_pairs(workloads)
        started = time.perf_counter()
        lookups = await resolve_pairs(resolver, pairs, settings.max_connections_per_host)
        lookup_seconds = time.perf_counter() - started
    finally:
        await resolver.aclose()
    report = judge_fleet(
        workloads, lookups, objects["intermediates"], objects["pods"], objects["nodes"], [],
        Pricing(price_per_vcpu_hour=0.04),
    )  # fmt: skip
    with open(os.devnull, "w") as sink:  # noqa: ASYNC230 (a real file, as stdout redirected is)
        write(report, output, sink)
    return report, len(pairs), lookup_seconds


async def audit_clusters(
    registry: RegistryProcess, fleets: list[dict[str, Any]]
) -> tuple[FleetReport, int, float]:
    """The multi-cluster audit after the cluster reads: parse, one resolver for every cluster,
    look up, hint at newer tags, judge each cluster, render the fleet's JSON."""
    settings = RegistrySettings(
        hosts={registry.host: HostSettings(plain_http=True)}, allowed_networks=("127.0.0.1",)
    )
    metrics = Metrics()
    resolver = await build_resolver(settings, CacheSettings(), metrics)
    options = AuditOptions(namespace=None, pricing=Pricing(price_per_vcpu_hour=0.04))
    try:
        clusters = [
            cluster(f"cluster-{n}", {"workloads": {"Deployment": objects["deployments"]},
                                     "intermediates": objects["intermediates"],
                                     "pods": objects["pods"], "nodes": objects["nodes"],
                                     "events": [], "left_out": {}})
            for n, objects in enumerate(fleets)
        ]  # fmt: skip
        pairs = fleet_pairs(clusters)
        started = time.perf_counter()
        resolution = await resolve(
            resolver, pairs, per_host=settings.max_connections_per_host,
            remaining=metric_remaining(metrics), say=print, lister=resolver,
            newer_tags=options.newer_tags,
        )  # fmt: skip
        lookup_seconds = time.perf_counter() - started
    finally:
        await resolver.aclose()
    report = judge_clusters(clusters, resolution, options, loose=False)
    write(report, "json", io.StringIO())
    return report, len(pairs), lookup_seconds


def main_clusters(count: int) -> int:
    """Start a registry, push, audit `count` clusters in one run, print the figures, stop."""
    with tempfile.TemporaryDirectory(prefix="archfit-bench-") as workdir:
        registry = RegistryProcess.start(Path(workdir))
        try:
            references = push_images(Pusher(registry.url))
            fleets = [fleet(references, shift=n * 37) for n in range(count)]
            mark = registry.mark()
            started = time.perf_counter()
            report, pairs, lookup_seconds = asyncio.run(audit_clusters(registry, fleets))
            wall = time.perf_counter() - started
            requests = registry.requests_since(mark)
            rss_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        finally:
            registry.stop()
    used = {
        image for c in report.clusters for w in c.report.workloads for image in w.workload.images
    }
    kinds = Counter(f"{r.method} {'tags' if '/tags/list' in r.path else r.path.split('/')[-2]}"
                    for r in requests)  # fmt: skip
    tag_requests = kinds["GET tags"]
    hinted = sum(1 for hint in report.hints.values() if hint.checked)
    s = report.summary
    print(f"{count} clusters x {WORKLOADS} workloads = {s.workloads} workloads, {len(used)} "
          f"distinct images, {pairs} distinct (image, credentials, cluster) lookups")  # fmt: skip
    print(f"verdicts: ready={s.ready} blocked={s.blocked} unknown={s.unknown}")
    print(f"wall time: {wall:.2f} s (parse, look up and hint, judge, render JSON; looking up "
          f"and hinting: {lookup_seconds:.2f} s)")  # fmt: skip
    lookups = len(requests) - tag_requests
    print(f"registry requests: {len(requests)} ({dict(sorted(kinds.items()))}); image lookups "
          f"{lookups} = {lookups / len(used):.2f} per distinct image; newer-tag hints: "
          f"{tag_requests} tag lists for {len(report.blockers)} blockers, {hinted} with "
          "newer tags")  # fmt: skip
    print(f"peak RSS: {rss_peak / 1024:.0f} MiB")
    return 0


def main() -> int:
    """Start a registry, push, audit, print the figures, stop."""
    global WORKLOADS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=WORKLOADS)
    parser.add_argument("--output", default="json", choices=("table", "json", "csv", "markdown"))
    parser.add_argument("--clusters", type=int, default=1, help="clusters audited in one run")
    args = parser.parse_args()
    WORKLOADS = args.workloads
    if args.clusters > 1:
        return main_clusters(args.clusters)
    with tempfile.TemporaryDirectory(prefix="archfit-bench-") as workdir:
        registry = RegistryProcess.start(Path(workdir))
        try:
            references = push_images(Pusher(registry.url))
            objects = fleet(references)
            rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            mark = registry.mark()
            started = time.perf_counter()
            report, pairs, lookup_seconds = asyncio.run(audit(registry, objects, args.output))
            wall = time.perf_counter() - started
            seen = registry.count_since(mark)
            rss_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        finally:
            registry.stop()
    used = {image for w in report.workloads for image in w.workload.images}
    by_kind: Counter[str] = Counter({f"{method} {kind}": n for (method, kind), n in seen.items()})
    s = report.summary
    print(f"{len(report.workloads)} workloads in {NAMESPACES} namespaces, {len(used)} distinct "
          f"images, {pairs} distinct (image, credentials) lookups, "
          f"{len(objects['pods'])} pods on {NODES} nodes")  # fmt: skip
    print(f"verdicts: ready={s.ready} blocked={s.blocked} unknown={s.unknown}")
    print(f"wall time: {wall:.2f} s (parse, look up, judge, render {args.output}; "
          f"looking up: {lookup_seconds:.2f} s)")  # fmt: skip
    total = sum(seen.values())
    print(f"registry requests: {total} = {total / len(used):.2f} per distinct image "
          f"({dict(sorted(by_kind.items()))})")  # fmt: skip
    print(f"peak RSS: {rss_peak / 1024:.0f} MiB (before the audit: {rss_before / 1024:.0f} MiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
