"""What workload-scoped evidence costs a request that has none: Resolution.resolve with and
without the pod's workload, answered from the recent map (the common path), in process.

    .venv/bin/python -m bench.evidence_cost [--calls 100000] [--rounds 5]

Prints the best round of each, in microseconds per resolve of a two-image pod.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable

from extender.config.registry_settings import CacheSettings
from extender.core.platforms import normalize
from extender.core.pods import PullSecretsRef, WorkloadId
from extender.registry.pure.reference import parse
from extender.registry.resolver import ImageResolution
from extender.registry.verify import Verification
from extender.resolution.evidence_book import EvidenceBook
from extender.resolution.learned_resolver import LearnedResolver
from extender.resolution.within_deadline import Resolution

IMAGES = ("registry.example/app:1", "registry.example/sidecar:1")
BOTH = frozenset({normalize("linux", "amd64"), normalize("linux", "arm64")})


class _Registry:
    async def resolve(self, image: str, pull: PullSecretsRef | None = None) -> ImageResolution:
        return ImageResolution(parse(image), "sha256:" + "a" * 64, "index", BOTH, False)

    async def verify(
        self, image: str, pull: PullSecretsRef | None = None
    ) -> tuple[ImageResolution, Verification]:
        return await self.resolve(image, pull), Verification()

    async def aclose(self) -> None:
        return None


async def _best(call: Callable[[], Awaitable[object]], calls: int, rounds: int) -> float:
    await call()  # fills the recent map
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(calls):
            await call()
        best = min(best, (time.perf_counter() - started) / calls)
    return best * 1e6


async def measure(calls: int, rounds: int) -> dict[str, float]:
    """Microseconds per resolve: without a workload, and with one that has no evidence."""
    learned = LearnedResolver(_Registry(), EvidenceBook(CacheSettings()))
    plain, scoped = Resolution(learned), Resolution(learned, evidence=learned)
    pull, workload = PullSecretsRef("shop"), WorkloadId("shop", "ReplicaSet/web-5d9c")
    return {
        "without_workload_us": await _best(lambda: plain.resolve(IMAGES, pull, 1.0), calls, rounds),
        "with_workload_us": await _best(
            lambda: scoped.resolve(IMAGES, pull, 1.0, workload=workload), calls, rounds
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.evidence_cost", description=__doc__)
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    found = asyncio.run(measure(args.calls, args.rounds))
    for name, value in found.items():
        print(f"{name}: {value:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
