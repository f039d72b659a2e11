"""What the node index costs in memory, against a real kube-apiserver holding N realistic Nodes.

Starts etcd and kube-apiserver (tests/e2e's control plane), creates N Nodes as kubelets on
cloud VMs would register them (tests.objects.node: ~6.7 KB of JSON each, images included),
then, in a fresh interpreter per checkout, builds the index and lets it list and sync:

- RSS per node: (RSS once synced - RSS before the first list) / N, after a full collection;
- peak: the high-water mark of RSS during the list, above that same starting RSS
  (VmHWM, reset through /proc/self/clear_refs just before the list).

    .venv/bin/python bench/node_index_memory.py [--nodes 5000] [--before /work/baseline]

`--before` measures another checkout too (its `extender` package found first), such as
the commit before the index read pages with msgspec.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e import binaries  # noqa: E402
from tests.e2e.controlplane import Binaries, ControlPlane  # noqa: E402
from tests.objects import node  # noqa: E402

RUNTIMES = ("containerd://2.0.5", "containerd://2.2.0")
IN_FLIGHT = 32

# Runs in the measured interpreter: imports first, so only the index's own growth counts.
MEASURE = """
import asyncio, gc, json, sys, time
from kubernetes import config
from kubernetes.client import CoreV1Api
from extender.kube.nodes import NodeIndex

def status_kb(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])

api = config.new_client_from_config(config_file=sys.argv[1])
# One small request first: the TLS context, the connection pool and the client's lazy
# imports are a fixed cost of talking to the API at all, not of indexing nodes.
CoreV1Api(api).list_node(limit=1, _preload_content=False).data
index = NodeIndex(api, **json.loads(sys.argv[2]))
gc.collect()
with open("/proc/self/clear_refs", "w") as refs:
    refs.write("5")  # resets VmHWM to the current RSS
before = status_kb("VmRSS")
started = time.perf_counter()
index.start()
synced = asyncio.run(index.wait_synced(300))
took = time.perf_counter() - started
peak = status_kb("VmHWM")
gc.collect()
after = status_kb("VmRSS")
asyncio.run(index.stop())  # a daemon thread still reading at exit can abort the interpreter
print(json.dumps({"synced": synced, "nodes": len(index), "before_kb": before,
                  "after_kb": after, "peak_kb": peak, "list_s": took}))
"""


def creatable(name: str, index: int) -> dict[str, Any]:
    """A realistic Node, without the fields the apiserver sets itself."""
    body = node(name, "arm64" if index % 4 == 0 else "amd64", runtime=RUNTIMES[index // 4 % 2])
    metadata = body["metadata"]
    for key in ("uid", "resourceVersion", "creationTimestamp", "managedFields"):
        metadata.pop(key, None)
    return body


async def create_nodes(plane: ControlPlane, count: int) -> None:
    """POST `count` Nodes, IN_FLIGHT at a time (status included, as a kubelet registers)."""
    url = f"{plane.server}/api/v1/nodes"
    connector = aiohttp.TCPConnector(ssl=plane.admin_ssl_context(), limit=IN_FLIGHT)
    async with aiohttp.ClientSession(connector=connector) as session:
        todo = iter(range(count))

        async def worker() -> None:
            for index in todo:
                body = creatable(f"bench-node-{index:05d}", index)
                async with session.post(url, json=body) as response:
                    if response.status != 201:
                        raise RuntimeError(
                            f"create node: {response.status} {await response.text()}"
                        )

        await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))


def measure(checkout: str, kubeconfig: Path, options: dict[str, Any]) -> dict[str, Any]:
    """Build the index of `checkout` with NodeIndex(api, **options) and report its memory."""
    env = dict(os.environ, PYTHONPATH=checkout)
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(kubeconfig), json.dumps(options)],
        env=env,
        cwd=tempfile.gettempdir(),  # not a checkout: PYTHONPATH decides which extender loads
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the measurement failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def report(name: str, result: dict[str, Any], count: int) -> str:
    grown = (result["after_kb"] - result["before_kb"]) * 1024
    peak = (result["peak_kb"] - result["before_kb"]) * 1024
    return (
        f"| {name} | {result['nodes']} | {grown / count:,.0f} B | {grown / 2**20:.1f} MiB "
        f"| {peak / 2**20:.1f} MiB | {result['before_kb'] / 1024:.0f} MiB "
        f"| {result['list_s']:.2f} s |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--before", help="another checkout to measure alongside")
    parser.add_argument(
        "--page-sizes", type=int, nargs="*", default=[], help="also measure these page sizes"
    )
    options = parser.parse_args()
    checkouts = {"before": options.before} if options.before else {}
    checkouts["after"] = str(ROOT)
    with tempfile.TemporaryDirectory() as workdir:
        plane = ControlPlane(Binaries(binaries.build()), Path(workdir)).start()
        try:
            started = time.perf_counter()
            asyncio.run(create_nodes(plane, options.nodes))
            print(f"created {options.nodes} nodes in {time.perf_counter() - started:.1f} s")
            print(
                "| checkout | nodes | RSS per node | RSS grown | peak above start "
                "| RSS at start | list to synced |"
            )
            print("|---|---|---|---|---|---|---|")
            for name, path in checkouts.items():
                result = measure(path, plane.admin_kubeconfig, {})
                print(report(name, result, options.nodes))
            for size in options.page_sizes:
                result = measure(str(ROOT), plane.admin_kubeconfig, {"page_size": size})
                print(report(f"after, pages of {size}", result, options.nodes))
        finally:
            plane.stop()


if __name__ == "__main__":
    main()
