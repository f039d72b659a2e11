"""The event loop while archfit lists a big cluster: the worst stall of a 1 ms ticker during
the node index's list of N Nodes and the pod watch's list of M Pods, and RSS after.

A real kube-apiserver and etcd (tests/e2e/controlplane.py) get N Nodes and M Pods (bound to
them, one container each) created through the API by a pool of threads; then, in one process,
archfit's client lists them as `archfit serve` does (extender.kube.nodes.NodeIndex pages of
100, extender.kube.pod_watch.pod_list_watch pages of 500, each in its thread) while a coroutine on
the event loop sleeps 1 ms at a time and records how late it wakes. Printed: the lists' wall
time, the ticker's worst and 99th-percentile lateness during each, and VmRSS before and after.

    .venv/bin/python -m bench.kube_relist [--nodes 5000] [--pods 50000] [--quick]
                                          [--before ../archfit-main]

`--before DIR` measures DIR's client too, against the same control plane and objects: each
client is measured in a fresh process of its own, so RSS is each one's alone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

TICK_SECONDS = 0.001
MB = 1024 * 1024


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _client(kubeconfig: Path) -> Any:
    """archfit's client for the kubeconfig, as `archfit serve` builds it (either layout)."""
    from extender.config.settings import KubernetesSettings

    settings = KubernetesSettings(mode="kubeconfig", kubeconfig=str(kubeconfig))
    try:
        from extender.kube.connect import build_api_client
    except ImportError:  # a checkout from before extender/kube/client/
        from extender.kube.client import build_api_client  # type: ignore[no-redef]
    return build_api_client(settings)


def _populate(api: Any, nodes: int, pods: int) -> None:
    """Create the Nodes, a namespace and the Pods (bound to the nodes) through the API."""

    def node(index: int) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": f"bench-node-{index}",
                "labels": {
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "arm64" if index % 2 else "amd64",
                },
            },
        }
        api.post("/api/v1/nodes", body, timeout=(5, 30))

    def pod(index: int) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"bench-pod-{index}", "labels": {"app": f"app-{index % 300}"}},
            "spec": {
                "nodeName": f"bench-node-{index % nodes}",
                "containers": [{"name": "app", "image": f"registry.example/app-{index % 300}:1"}],
            },
        }
        api.post("/api/v1/namespaces/bench/pods", body, timeout=(5, 30))

    api.post(
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}},
        timeout=(5, 30),
    )
    # No controller-manager makes the namespace's default ServiceAccount, which pods need.
    api.post(
        "/api/v1/namespaces/bench/serviceaccounts",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}},
        timeout=(5, 30),
    )
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(node, range(nodes)))
        list(pool.map(pod, range(pods)))


async def _ticked(done: threading.Event) -> list[float]:
    """How late each 1 ms sleep woke, until `done`."""
    late = []
    while not done.is_set():
        start = time.perf_counter()
        await asyncio.sleep(TICK_SECONDS)
        late.append(time.perf_counter() - start - TICK_SECONDS)
    return late


async def _measure(api: Any) -> dict[str, Any]:
    from extender.kube.nodes import NodeIndex
    from extender.kube.pod_watch import BOUND

    try:
        from extender.kube.pod_watch import pod_list_watch
    except ImportError:  # a checkout from before the shared pod feed: the watcher's own watch
        from extender.kube.pod_watch import PodWatch  # type: ignore[attr-defined]

        def pod_list_watch(api: Any, selector: str, page_size: int = 500) -> Any:
            return PodWatch(api, page_size)

    results: dict[str, Any] = {"rss_before_mb": round(_rss_mb(), 1)}
    index = NodeIndex(api)
    listed = threading.Event()
    ticker = asyncio.ensure_future(_ticked(listed))
    started = time.perf_counter()
    index.start()
    await index.wait_synced(3600)
    results["nodes_list_seconds"] = round(time.perf_counter() - started, 2)
    listed.set()
    results["nodes"] = len(index)
    results.update(_lateness("nodes", await ticker))

    watch = pod_list_watch(api, BOUND)
    seen = threading.Event()
    synced = asyncio.Event()
    told = [0]

    def on_pod(kind: str, _pod: Any) -> None:  # on the loop, as the watcher is told
        told[0] += 1
        if kind == "SYNCED":
            seen.set()
            synced.set()

    ticker = asyncio.ensure_future(_ticked(seen))
    started = time.perf_counter()
    watch.start(on_pod)
    await synced.wait()
    results["pods_list_seconds"] = round(time.perf_counter() - started, 2)
    results["pods_told"] = told[0] - 1
    results.update(_lateness("pods", await ticker))
    results["rss_after_mb"] = round(_rss_mb(), 1)
    await watch.stop()
    await index.stop()
    return results


def _lateness(what: str, late: list[float]) -> dict[str, Any]:
    ordered = sorted(late) or [0.0]
    return {
        f"{what}_ticks": len(late),
        f"{what}_worst_stall_ms": round(ordered[-1] * 1000, 1),
        f"{what}_p99_stall_ms": round(ordered[int(len(ordered) * 0.99) - 1] * 1000, 1),
    }


def run(nodes: int, pods: int, before: Path | None = None) -> list[dict[str, Any]]:
    """Populate a control plane, then measure this checkout's client (and `before`'s)."""
    from bench import harness
    from tests.e2e import binaries
    from tests.e2e.controlplane import Binaries, ControlPlane

    rows = []
    with tempfile.TemporaryDirectory(prefix="kube-relist-") as folder:
        plane = ControlPlane(Binaries(binaries.build()), Path(folder) / "plane").start()
        try:
            started = time.perf_counter()
            _populate(_client(plane.admin_kubeconfig), nodes, pods)
            created = round(time.perf_counter() - started, 1)
            for label, source in (("after", None), ("before", before)):
                if label == "before" and source is None:
                    continue
                done = subprocess.run(
                    # The script, not the module: `bench` may be another checkout's there.
                    [sys.executable, str(Path(__file__).resolve()), "--measure",
                     str(plane.admin_kubeconfig)],
                    env=harness.source_env(source, {"PYTHONPATH": os.pathsep.join(
                        str(p) for p in (source, harness.ROOT) if p is not None)}),
                    capture_output=True, text=True, timeout=3600, check=False, cwd=harness.ROOT,
                )  # fmt: skip
                if done.returncode != 0:  # with what the measuring process said, not only its code
                    raise harness.BenchError(
                        f"the {label} client exited {done.returncode}: {done.stderr[-2000:]}"
                    )
                row = json.loads(done.stdout.splitlines()[-1])
                rows.append({"client": label, "create_seconds": created, **row})
        finally:
            plane.stop()
    return rows


def _table(rows: list[dict[str, Any]], nodes: int, pods: int) -> str:
    lines = [
        f"Relist of {nodes:,} Nodes and {pods:,} Pods from a real kube-apiserver "
        f"(load {os.getloadavg()[0]:.1f} at the end):",
        "",
        "| client | nodes list s | worst stall ms | p99 ms | pods list s | worst stall ms "
        "| p99 ms | RSS before MiB | RSS after MiB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['client']} | {r['nodes_list_seconds']} | {r['nodes_worst_stall_ms']} "
            f"| {r['nodes_p99_stall_ms']} | {r['pods_list_seconds']} | {r['pods_worst_stall_ms']} "
            f"| {r['pods_p99_stall_ms']} | {r['rss_before_mb']} | {r['rss_after_mb']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=50000)
    parser.add_argument("--quick", action="store_true", help="500 nodes, 5,000 pods")
    parser.add_argument("--before", type=Path, help="another checkout's client, measured too")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure is not None:  # the child: one client, one measurement
        print(json.dumps(asyncio.run(_measure(_client(args.measure)))))
        return 0
    nodes, pods = (500, 5000) if args.quick else (args.nodes, args.pods)
    rows = run(nodes, pods, args.before)
    print(json.dumps(rows))
    print(_table(rows, nodes, pods))
    return 0


if __name__ == "__main__":
    sys.exit(main())
