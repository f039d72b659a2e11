"""The admission policy's parameter at scale: its size, what it lists and leaves out, and what a
publish costs, at 10,000 and 50,000 images across 100 namespaces; and the RSS of the leader's
pod index at 10,000 and 100,000 pods.

A publish costs the leader one round (extender.controllers.publisher.Publisher.render: the
fairness order over every image's namespaces, evidence believed, each value packed, the spec
within maxBytes) and the JSON it writes; it costs every replica one decode of the object it
watches (extender.core.parameter). The pods are made in process, named as the shared pod
feed (extender.kube.pod_feed) hands them over (a new tuple per pod, as decoding makes); nothing
talks to a registry or an API server. The size cost of the resolved-at times is the spec's
size with and without them (the same entries, the same bound).

    .venv/bin/python -m bench.policy_table [--images 10000 50000] [--pods 10000 100000]
                                           [--namespaces 100] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Any

import orjson

from extender.config.registry_settings import CacheSettings
from extender.config.settings import AdmissionPolicySettings
from extender.controllers.publisher import Publisher
from extender.core.image_table import Switches
from extender.core.image_uses import ImageUses, PodUse
from extender.core.mutation import MutationRules
from extender.core.parameter import PublishedTable, decode_spec
from extender.core.platforms import Platform, parse
from extender.core.pods import PullSecretsRef
from extender.metrics import Metrics
from extender.resolution.evidence_book import EvidenceBook
from extender.resolution.learned_resolver import LearnedResolver
from tests.support.fakes import AnsweringRegistry

NOW = 1_780_000_000.0
PODS_PER_IMAGE = 2
PODS_PER_WORKLOAD = 10
SETS: tuple[frozenset[Platform], ...] = (
    frozenset({parse("linux/amd64"), parse("linux/arm64")}),
    frozenset({parse("linux/amd64")}),
    frozenset({parse("linux/amd64"), parse("linux/arm64"), parse("linux/arm/v7")}),
    frozenset({parse("linux/arm64")}),
    frozenset({parse("linux/amd64"), parse("linux/s390x"), parse("linux/ppc64le")}),
)
"""Platform sets, most common first: a multi-arch index, amd64-only, and a few others."""
RULES = MutationRules(
    platforms=frozenset({parse("linux/amd64"), parse("linux/arm64")}),
    arch_preference={"arm64": 10, "amd64": 0},
)
SWITCHES = Switches(True, True, True, ("kube-system",), ("kube-system", "archfit-system"))
MB = 1024 * 1024


class _Store:
    async def read(self) -> dict[str, Any] | None:
        return None

    async def write(self, spec: dict[str, Any], status: dict[str, Any]) -> None:
        return None


@dataclass
class _Pod:
    uid: str
    made: PodUse

    def use(self) -> PodUse:
        return self.made


def image_of(index: int, namespaces: int) -> str:
    """A realistic reference: about 55 characters."""
    team = index % namespaces
    return f"registry.example.com/team-{team:03d}/service-{index:06d}:v1.{index % 50}.{index % 7}"


def publisher_with(images: int, namespaces: int, *, times: bool) -> Publisher:
    """A leader whose table answers `images` images, each named by PODS_PER_IMAGE pods of its
    team's namespace."""
    book = EvidenceBook(CacheSettings())
    made = Publisher(
        AdmissionPolicySettings(enabled=True),
        LearnedResolver(AnsweringRegistry({}), book),
        book,
        lambda: RULES,
        SWITCHES,
        _Store(),
        Metrics(),
        wall_clock=lambda: NOW,
    )
    made.on_pod("LISTING", _Pod("", PodUse("", (), PullSecretsRef(""), "")))
    for index in range(images):
        image = image_of(index, namespaces)
        namespace = f"team-{index % namespaces:03d}"
        for copy in range(PODS_PER_IMAGE):
            workload = f"ReplicaSet/service-{index:06d}"
            made.on_pod(
                "ADDED",
                _Pod(
                    f"{index}-{copy}",
                    PodUse(namespace, (image,), PullSecretsRef(namespace), workload),
                ),
            )
        resolved = NOW - (index % 300) if times else 0.0
        made.table.answer(image, SETS[index % len(SETS)], f"sha256:{index:064x}", resolved)
    made.on_pod("SYNCED", _Pod("", PodUse("", (), PullSecretsRef(""), "")))
    return made


def best(rounds: int, work: Any) -> tuple[float, Any]:
    found: Any = None
    fastest = float("inf")
    for _ in range(rounds):
        gc.collect()
        started = time.perf_counter()
        found = work()
        fastest = min(fastest, time.perf_counter() - started)
    return fastest, found


def measure_parameter(images: int, namespaces: int, rounds: int) -> dict[str, Any]:
    made = publisher_with(images, namespaces, times=True)
    render_s, published = best(rounds, made.render)
    dumps_s, body = best(rounds, lambda: orjson.dumps(published.spec))
    decode_s, table = best(rounds, lambda: PublishedTable.of(decode_spec(body)))
    untimed = publisher_with(images, namespaces, times=False).render()
    listed_untimed = untimed.images
    bytes_untimed = len(orjson.dumps(untimed.spec))
    return {
        "images": images,
        "namespaces": namespaces,
        "listed": published.images,
        "left_out": published.evicted,
        "namespaces_left_out": len(published.left_out_by_namespace),
        "bytes": len(body),
        "bytes_per_listed": round(len(body) / max(published.images, 1), 1),
        "listed_without_times": listed_untimed,
        "bytes_per_listed_without_times": round(bytes_untimed / max(listed_untimed, 1), 1),
        "render_ms": round(render_s * 1000, 1),
        "json_ms": round(dumps_s * 1000, 1),
        "replica_decode_ms": round(decode_s * 1000, 1),
        "decoded": len(table),
    }


def _rss_kb() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def index_rss(pods: int) -> dict[str, Any]:
    """In this process: the RSS the leader's pod index takes for `pods` pods (10 a workload,
    one or two images each), the uid strings included."""
    gc.collect()
    before = _rss_kb()
    uses = ImageUses(time.monotonic, lambda key: None)
    for index in range(pods):
        workload = index // PODS_PER_WORKLOAD
        namespace = f"team-{workload % 100:03d}"
        images = tuple(
            f"registry.example.com/{namespace}/service-{workload:06d}{part}:v1.{workload % 9}"
            for part in ("", "-sidecar")[: 1 + workload % 2]
        )
        uses.add(
            str(uuid.uuid4()),
            PodUse(
                namespace,
                images,
                PullSecretsRef(namespace),
                f"ReplicaSet/service-{workload:06d}-5d9c",
            ),
        )
    gc.collect()
    after = _rss_kb()
    return {
        "pods": pods,
        "images": sum(1 for _ in uses.followed()),
        "rss_mb": round((after - before) / 1024, 1),
        "bytes_per_pod": round((after - before) * 1024 / pods),
    }


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.policy_table", description=__doc__)
    parser.add_argument("--images", type=int, nargs="+", default=[10_000, 50_000])
    parser.add_argument("--pods", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--namespaces", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--index-rss", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.index_rss:
        print(json.dumps(index_rss(args.index_rss)))
        return 0
    asyncio.set_event_loop(asyncio.new_event_loop())  # the publisher's Event wants a loop
    print(f"parameter (admissionPolicy.maxBytes 1,000,000; best of {args.rounds} rounds)")
    for images in args.images:
        print(json.dumps(measure_parameter(images, args.namespaces, args.rounds)))
    print("leader's pod index (each size in a fresh process)")
    for pods in args.pods:
        done = subprocess.run(
            [sys.executable, "-m", "bench.policy_table", "--index-rss", str(pods)],
            capture_output=True,
            text=True,
            check=True,
        )
        print(done.stdout.strip())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
