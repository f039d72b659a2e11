"""kube-scheduler throughput (pods/s) for 200 pods on 100 nodes, with and without archfit.

Starts a real etcd, kube-apiserver, registry and archfit on loopback (tests/e2e helpers),
registers 100 nodes (half arm64, half amd64), and for each variant creates 200 pods
while no scheduler runs, starts kube-scheduler with config/scheduler-config.yaml and
times the binds from the scheduler's own log (klog microsecond timestamps of
"Successfully bound"). Throughput is (pods - 1) / (last bind - first bind): scheduler
start-up is not counted. Variants: no extender (the shipped config minus `extenders`), archfit
with nodeCacheCapable true (as shipped), and false (full Node objects per request);
each with the shipped client rate limit and again with qps/burst raised to 1000.

    .venv/bin/python bench/scheduler_throughput.py [--pods 200] [--nodes 100]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e import binaries, cluster  # noqa: E402
from tests.e2e.archfit import Archfit  # noqa: E402
from tests.e2e.controlplane import Binaries, ControlPlane  # noqa: E402
from tests.e2e.scheduler import Scheduler  # noqa: E402
from tests.support.images import Pusher  # noqa: E402
from tests.support.prerequisites import BuildFailed, Unavailable  # noqa: E402
from tests.support.process import free_port  # noqa: E402
from tests.support.registry import RegistryProcess  # noqa: E402

BIND_TIMEOUT = 120.0
KUBERNETES = "v1.36.3"


def adjust(scheduler: Scheduler, extender: bool, qps: int | None) -> None:
    """Rewrite the rendered config: drop the extender, or lift the client rate limit."""
    document: dict[str, Any] = dict(scheduler.config)
    if not extender:
        document.pop("extenders", None)
    if qps is not None:
        document["clientConnection"] = {
            **document["clientConnection"],
            "qps": qps,
            "burst": qps,
        }
    scheduler.config_path.write_text(yaml.safe_dump(document))


def run_variant(
    core: Any,
    plane: ControlPlane,
    bins: Binaries,
    workdir: Path,
    name: str,
    pods: list[dict[str, Any]],
    archfit: Archfit | None,
    node_cache_capable: bool,
    qps: int | None,
) -> tuple[float, float]:
    """Create the pods, start a scheduler, time the binds; return (pods/s, seconds)."""
    namespace = f"bench-{name}"
    cluster.create_namespace(core, namespace)
    for manifest in pods:
        cluster.create_pod(core, namespace, manifest)
    url = archfit.url_prefix if archfit else f"http://127.0.0.1:{free_port()}/unused"
    scheduler = Scheduler(
        bins,
        workdir / name,
        plane.scheduler_kubeconfig,
        url,
        node_cache_capable=node_cache_capable,
        name=f"kube-scheduler-{name}",
    )
    adjust(scheduler, archfit is not None, qps)
    try:
        scheduler.start()
        deadline = time.monotonic() + BIND_TIMEOUT
        while True:
            pending = [p for p in core.list_namespaced_pod(namespace).items if not p.spec.node_name]
            if not pending:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name}: {len(pending)}/{len(pods)} pods still unbound")
            time.sleep(0.2)
    finally:
        scheduler.stop()
    core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
    times = bind_times(scheduler.process.log_path, namespace)
    if len(times) != len(pods):
        raise RuntimeError(f"{name}: {len(times)} binds logged for {len(pods)} pods")
    span = times[-1] - times[0]
    return (len(pods) - 1) / span, span


def bind_times(log: Path, namespace: str) -> list[float]:
    """Seconds since midnight of each "Successfully bound" line (klog, --v=2), sorted."""
    stamps = []
    needle = f'"Successfully bound pod to node" pod="{namespace}/'
    for line in log.read_text(errors="replace").splitlines():
        if needle in line:
            # I1122 02:26:28.632115 ...: the klog header carries microseconds.
            hours, minutes, seconds = line.split()[1].split(":")
            stamps.append(int(hours) * 3600 + int(minutes) * 60 + float(seconds))
    return sorted(stamps)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=200)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--keep", type=Path, help="keep logs and configs in this directory")
    args = parser.parse_args()

    try:
        bins = Binaries(binaries.build())
    except (Unavailable, BuildFailed) as error:
        print(f"cannot build the control plane: {error}", file=sys.stderr)
        return 2

    with tempfile.TemporaryDirectory(prefix="archfit-bench-") as tmp:
        workdir = args.keep or Path(tmp)
        plane = ControlPlane(bins, workdir / "controlplane")
        registry: RegistryProcess | None = None
        archfits: list[Archfit] = []
        try:
            plane.start()
            core = cluster.core_api(plane.admin_kubeconfig)
            for i in range(args.nodes):
                arch = "arm64" if i % 2 else "amd64"
                cluster.create_node(core, cluster.NodeSpec(f"node-{i:03d}-{arch}", arch))

            registry = RegistryProcess.start(workdir / "registry")
            pusher = Pusher(registry.url)
            multi, _ = pusher.index("bench/multi", "1.0", ["linux/amd64", "linux/arm64"])
            images = [
                multi.reference,
                pusher.single("bench/amd64", "1.0", "linux/amd64").reference,
                pusher.single("bench/arm64", "1.0", "linux/arm64").reference,
            ]
            # Three pods in four are multi-arch (filtered and scored); the rest single-arch.
            shapes = [[images[0]], [images[0]], [images[0], images[1]], [images[2]]]
            pods = [
                cluster.pod_manifest(f"pod-{i:03d}", shapes[i % len(shapes)])
                for i in range(args.pods)
            ]
            kubernetes = {
                "mode": "kubeconfig",
                "kubeconfig": str(plane.admin_kubeconfig),
                "nodeIndex": True,
                "pullSecrets": True,
            }
            settings: dict[str, Any] = {
                "policy": {"mode": "enforce", "failurePolicy": "fail-open"},
                "kubernetes": kubernetes,
                "registry": {
                    "hosts": {registry.host: {"plainHttp": True}},
                    "allowedNetworks": ["127.0.0.1/32"],
                },
                # Production logging, written to a file: one line per request is the cost.
                "logging": {"level": "info", "format": "json"},
            }
            results = []
            variants = [
                ("no-extender", None, True),
                ("archfit-nodecache", True, True),
                ("archfit-fullnodes", False, False),
            ]
            # The shipped config keeps client-go's default rate limit (qps 50, burst 100),
            # which caps binds per second; the second round lifts it to expose CPU cost.
            for qps in (None, 1000):
                for name, index, cache_capable in variants:
                    run = f"{name}-qps{qps or 'default'}"
                    archfit = None
                    if index is not None:
                        variant_settings = {
                            **settings,
                            "kubernetes": {**kubernetes, "nodeIndex": index},
                        }
                        archfit = Archfit(workdir / run, variant_settings, name=f"archfit-{run}")
                        archfits.append(archfit.start())
                    rate, span = run_variant(
                        core, plane, bins, workdir, run, pods, archfit, cache_capable, qps
                    )
                    if archfit:
                        archfit.stop()
                    results.append((qps, name, rate, span))
        finally:
            for archfit in archfits:
                archfit.stop()
            if registry is not None:
                registry.stop()
            plane.stop()

    print(
        f"kube-scheduler {KUBERNETES} throughput, {args.pods} pods on {args.nodes} nodes, "
        "config/scheduler-config.yaml (percentageOfNodesToScore: 100)"
    )
    for qps, name, rate, span in results:
        limit = f"client qps {qps}" if qps else "default client qps"
        print(f"  {limit:<18} {name:<18} {rate:7.1f} pods/s  ({span:.2f} s first to last bind)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
