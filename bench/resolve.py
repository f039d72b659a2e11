"""Cold and warm resolution latency for 100 pods sharing 20 images, against a local registry.

Run: `.venv/bin/python -m bench.resolve` (needs /usr/bin/docker-registry). It starts its own
registry on 127.0.0.1, pushes 20 images, then resolves every pod's images concurrently,
twice: once with an empty cache, once warm. Registry requests come from the registry's log.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from extender.config.registry_settings import CacheSettings, HostSettings, RegistrySettings
from extender.core.pods import PullSecretsRef
from extender.registry.resolver import RegistryResolver, build_resolver
from tests.support.images import Pusher
from tests.support.registry import RegistryProcess

PODS = 100
IMAGES = 20
PER_POD = 3


def push_images(pusher: Pusher) -> list[str]:
    """10 OCI indexes, 5 Docker manifest lists, 5 single-arch manifests."""
    references = []
    for n in range(IMAGES):
        repo = f"bench/app{n}"
        if n < 10:
            image, _ = pusher.index(repo, "1.0", ["linux/amd64", "linux/arm64", "linux/arm/v7"])
        elif n < 15:
            image, _ = pusher.index(repo, "1.0", ["linux/amd64", "linux/arm64"], docker=True)
        else:
            image = pusher.single(repo, "1.0", "linux/amd64")
        references.append(image.reference)
    return references


def pods(references: list[str]) -> list[list[str]]:
    """Each pod uses up to three of the images; together they use all twenty."""
    chosen = []
    for i in range(PODS):
        picks = {i % IMAGES, (i * 7 + 3) % IMAGES, (i * 13 + 5) % IMAGES}
        chosen.append([references[p] for p in sorted(picks)][:PER_POD])
    return chosen


async def resolve_all(resolver: RegistryResolver, workload: list[list[str]]) -> list[float]:
    """Resolve every pod concurrently; return each pod's latency in seconds."""
    pull = PullSecretsRef("bench")

    async def one(images: list[str]) -> float:
        started = time.perf_counter()
        await asyncio.gather(*(resolver.platforms(image, pull) for image in images))
        return time.perf_counter() - started

    return list(await asyncio.gather(*(one(images) for images in workload)))


def report(label: str, latencies: list[float], wall: float, requests: int) -> None:
    """One line of figures."""
    ms = sorted(x * 1000 for x in latencies)
    p95 = ms[int(len(ms) * 0.95) - 1]
    print(
        f"{label:5} pods={len(ms)} wall={wall * 1000:8.1f} ms  "
        f"p50={statistics.median(ms):7.2f} ms  p95={p95:7.2f} ms  max={ms[-1]:7.2f} ms  "
        f"registry_requests={requests}"
    )


async def bench(registry: RegistryProcess, workload: list[list[str]]) -> None:
    """Cold, then warm, on one resolver with the default in-memory cache."""
    settings = RegistrySettings(
        hosts={registry.host: HostSettings(plain_http=True)}, allowed_networks=("127.0.0.1",)
    )
    resolver = await build_resolver(settings, CacheSettings())
    try:
        for label in ("cold", "warm"):
            mark = registry.mark()
            started = time.perf_counter()
            latencies = await resolve_all(resolver, workload)
            wall = time.perf_counter() - started
            seen = registry.count_since(mark)
            report(label, latencies, wall, sum(seen.values()))
            if label == "cold":
                print(f"      by kind: {dict(sorted(seen.items()))}")
    finally:
        await resolver.aclose()


def main() -> int:
    """Start a registry, push, measure, stop."""
    with tempfile.TemporaryDirectory(prefix="archfit-bench-") as workdir:
        registry = RegistryProcess.start(Path(workdir))
        try:
            references = push_images(Pusher(registry.url))
            workload = pods(references)
            distinct = len({image for images in workload for image in images})
            print(f"{PODS} pods, {distinct} distinct images, {sum(map(len, workload))} lookups")
            asyncio.run(bench(registry, workload))
        finally:
            registry.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
