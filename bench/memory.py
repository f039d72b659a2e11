"""archfit's memory with thousands of nodes indexed and images resolved (goal 4 of issue 12).

`archfit serve` with the default settings, except the kubeconfig of a real etcd +
kube-apiserver and one registry entry (the real registry on loopback, plain HTTP):

- nodes: for each node count, a fresh archfit is started against a control plane with
  that many realistic nodes and sampled once its index has synced (VmRSS, VmHWM from
  /proc); bytes per node is the RSS difference between the largest count and none;
- images: the last archfit then resolves distinct multi-arch images, driven by filter
  requests of pods naming ten images each (one amd64 and one arm64 node: an answer
  keeping one node proves the images resolved), sampled after each step;
- what the cache holds: the images are asked for again, newest first; every image the
  registry is asked about again had been evicted.

    .venv/bin/python -m bench.memory [--source DIR] [--quick] [--output json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench import harness
from tests.support.registry import RegistryProcess

NODES = (0, 1000, 5000)
IMAGES = (2500, 5000, 10000)
QUICK_NODES = (0, 200, 1000)
QUICK_IMAGES = (250, 500, 1000)
#: Images per pod: enough to keep archfit's resolver busy, few enough to meet its deadline.
PER_POD = 10
#: Clients resolving at once.
WORKERS = 4
RESOLVE_SECONDS = 60.0
MB = 1024 * 1024


def settings(plane: harness.Plane, registry: RegistryProcess) -> dict[str, Any]:
    """The defaults, plus the control plane and the loopback registry."""
    return {
        "kubernetes": {"mode": "kubeconfig", "kubeconfig": str(plane.kubeconfig)},
        "registry": {
            "hosts": {registry.host: {"plainHttp": True}},
            "allowedNetworks": ["127.0.0.1/32"],
        },
    }


def sample(server: harness.ArchfitServer) -> dict[str, float]:
    """RSS and peak RSS now, in MB."""
    rss, peak = server.memory()
    return {"rss_mb": rss / MB, "peak_mb": peak / MB}


def wait_indexed(server: harness.ArchfitServer, count: int) -> None:
    """Wait until archfit's node index holds `count` nodes, then let the heap settle."""
    deadline = time.monotonic() + 120
    while (server.metric("archfit_node_index_nodes") or 0) != count:
        if time.monotonic() > deadline:
            raise harness.BenchError(f"the node index never reached {count} nodes")
        time.sleep(0.2)
    time.sleep(1.0)


def resolve(server: harness.ArchfitServer, references: Sequence[str]) -> None:
    """Have archfit resolve every reference, ten per filter request, WORKERS at a time."""
    names = [harness.node_name(0), harness.node_name(1)]
    pods = [references[i : i + PER_POD] for i in range(0, len(references), PER_POD)]
    local = threading.local()

    def one(images: Sequence[str]) -> None:
        client = getattr(local, "client", None)
        if client is None:
            client = local.client = harness.Client(server)
        body = harness.names_args(images, names, harness.unique_pod_name())
        deadline = time.monotonic() + RESOLVE_SECONDS
        while True:
            status, answer = client.post("filter", body)
            if status != 200:
                raise harness.BenchError(f"filter answered {status}: {answer}")
            if harness.kept(answer) == 1:  # s390x and amd64: the arm64 node goes
                return
            if time.monotonic() > deadline:
                raise harness.BenchError(f"images never resolved: {images[0]}...: {answer}")
            time.sleep(0.2)

    with ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(one, pods))


def cache_holds(
    server: harness.ArchfitServer, registry: RegistryProcess, references: Sequence[str]
) -> int:
    """How many of `references` archfit still answers from its cache.

    Asked newest first, a hit moves nothing the later questions depend on and a miss only
    evicts what is older still, so the images the registry sees again are the evicted ones.
    """
    mark = registry.mark()
    resolve(server, list(reversed(references)))
    asked = {
        request.path.rsplit("/", 1)[1]
        for request in registry.requests_since(mark)
        if f"/{harness.MANY_REPO}/manifests/i" in request.path
    }
    return len(references) - len(asked)


def run(
    *,
    source: Path | None = None,
    nodes: Sequence[int] = NODES,
    images: Sequence[int] = IMAGES,
    workdir: Path | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, list[dict[str, Any]]]:
    """Rows per part: `nodes` (RSS vs nodes), `images` (RSS vs images), `summary`."""
    if max(nodes) < 2:
        raise ValueError("the image phase needs at least an amd64 and an arm64 node")
    with tempfile.TemporaryDirectory(prefix="archfit-bench-") as tmp:
        root = workdir or Path(tmp)
        plane = harness.Plane(root)
        registry: RegistryProcess | None = None
        server: harness.ArchfitServer | None = None
        try:
            plane.start()
            registry = RegistryProcess.start(root / "registry")
            references, push_seconds = harness.push_many(registry, max(images))
            progress(f"pushed {len(references)} images in {push_seconds:.1f}s")
            base = settings(plane, registry)
            by_nodes = []
            for count in sorted(nodes):
                plane.grow_to(count)
                if server is not None:
                    server.stop()
                server = harness.ArchfitServer(
                    root / f"archfit-{count}", base, source=source, core=None
                )
                server.start()
                wait_indexed(server, count)
                by_nodes.append({"nodes": count, **sample(server)})
                progress(f"{count} nodes: {by_nodes[-1]['rss_mb']:.1f} MB")
            assert server is not None
            by_images = [{"images": 0, **sample(server)}]
            done = 0
            resolve_seconds = 0.0
            for count in sorted(images):
                started = time.monotonic()
                resolve(server, references[done:count])
                resolve_seconds += time.monotonic() - started
                done = count
                by_images.append({"images": count, **sample(server)})
                progress(f"{count} images: {by_images[-1]['rss_mb']:.1f} MB")
            final = sample(server)
            held = cache_holds(server, registry, references)
            most, none = by_nodes[-1], by_nodes[0]
            summary = {
                "nodes": most["nodes"],
                "images": done,
                "rss_mb": final["rss_mb"],
                "peak_mb": final["peak_mb"],
                "rss_after_sync_mb": most["rss_mb"],
                "bytes_per_node": (most["rss_mb"] - none["rss_mb"]) * MB / max(1, most["nodes"]),
                "cache_holds_images": held,
                "push_s": push_seconds,
                "resolve_s": resolve_seconds,
            }
        finally:
            if server is not None:
                server.stop()
            if registry is not None:
                registry.stop()
            plane.stop()
    return {"summary": [summary], "nodes": by_nodes, "images": by_images}


SUMMARY_COLUMNS = (
    "nodes",
    "images",
    "rss_mb",
    "peak_mb",
    "rss_after_sync_mb",
    "bytes_per_node",
    "cache_holds_images",
    "push_s",
    "resolve_s",
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, help="checkout whose extender/ to run")
    parser.add_argument("--nodes", type=int, nargs="+", default=list(NODES))
    parser.add_argument("--images", type=int, nargs="+", default=list(IMAGES))
    parser.add_argument("--quick", action="store_true", help="hundreds, not thousands")
    parser.add_argument("--output", choices=("table", "json"), default="table")
    args = parser.parse_args(argv)
    if args.quick:
        args.nodes, args.images = list(QUICK_NODES), list(QUICK_IMAGES)
    result = run(
        source=args.source,
        nodes=args.nodes,
        images=args.images,
        progress=lambda line: print(line, file=sys.stderr),
    )
    if args.output == "json":
        print(json.dumps(result, indent=2))
        return 0
    print(f"archfit from {harness.imported_from(args.source)}, default settings")
    harness.print_table(result["summary"], SUMMARY_COLUMNS)
    print()
    harness.print_table(result["nodes"], ("nodes", "rss_mb", "peak_mb"))
    print()
    harness.print_table(result["images"], ("images", "rss_mb", "peak_mb"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
