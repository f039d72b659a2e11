"""How long kube-scheduler waits on archfit per pod when never-seen images queue behind a slow
registry: the worst wait of one pod, and how late a pod of a known image is answered behind
them.

kube-scheduler decides one pod at a time and calls filter, then prioritize, for each; every
second archfit waits, the whole queue waits. This sends what it sends, in that order, over one
kept connection: `--unknown` pods, each naming a never-seen image of a registry that answers
`--delay` seconds late (a real registry behind tests/support/delaying_proxy), then one pod of
an image archfit already resolved. Each archfit (this checkout's, and `--before DIR`'s in the
same run) gets its own fresh images, so neither finds the other's answers.

    .venv/bin/python -m bench.scheduler_waits [--unknown 10] [--delay 4] [--before DIR]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench import harness
from tests.objects import node
from tests.support.delaying_proxy import DelayingProxy
from tests.support.registry import RegistryProcess

NODES = (node("amd-1", "amd64"), node("arm-1", "arm64"))


def _through(front: DelayingProxy, reference: str) -> str:
    """`reference` as pulled through the front."""
    return f"{front.host}/{reference.split('/', 1)[1]}"


def measure(
    label: str,
    source: Path | None,
    images: list[str],
    known: str,
    front: DelayingProxy,
    delay: float,
    workdir: Path,
) -> dict[str, float | str]:
    """One archfit: the known image resolved first, then the queue, timed per pod."""
    settings = {
        "kubernetes": {"mode": "off"},
        "registry": {
            "hosts": {front.host: {"plainHttp": True}},
            "allowedNetworks": ["127.0.0.1/32"],
        },
        "logging": {"level": "warning"},
    }
    server = harness.ArchfitServer(workdir / label, settings, source=source, name=label)
    with harness.running(server):
        client = harness.Client(server)
        try:
            front.delay_each(0)
            client.post("filter", harness.nodes_args([known], NODES))
            front.delay_each(delay)
            waits = []
            started = time.perf_counter()
            for image in images:
                body = harness.nodes_args([image], NODES)
                pod_started = time.perf_counter()
                client.post("filter", body)
                client.post("prioritize", body)
                waits.append(time.perf_counter() - pod_started)
            body = harness.nodes_args([known], NODES)
            client.post("filter", body)
            client.post("prioritize", body)
            known_after = time.perf_counter() - started
        finally:
            client.close()
    return {
        "archfit": label,
        "worst_wait_s": max(waits),
        "queue_wait_s": sum(waits),
        "known_answered_after_s": known_after,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unknown", type=int, default=10, help="never-seen images queued")
    parser.add_argument("--delay", type=float, default=4.0, help="seconds the registry is late")
    parser.add_argument("--before", type=Path, help="another checkout measured in the same run")
    args = parser.parse_args(argv)
    checkouts: list[tuple[str, Path | None]] = [("archfit", None)]
    if args.before is not None:
        checkouts.append((f"before ({harness.git_commit(args.before)})", args.before.resolve()))
    with tempfile.TemporaryDirectory(prefix="archfit-waits-") as tmp:
        workdir = Path(tmp)
        registry = RegistryProcess.start(workdir / "registry")
        try:
            count = (args.unknown + 1) * len(checkouts)
            references, _ = harness.push_many(registry, count)
            with DelayingProxy(registry.url) as front:
                rows = []
                for index, (label, source) in enumerate(checkouts):
                    mine = [_through(front, r) for r in references[index :: len(checkouts)]]
                    rows.append(
                        measure(label, source, mine[1:], mine[0], front, args.delay, workdir)
                    )
        finally:
            registry.stop()
    print(
        f"{args.unknown} pods of never-seen images on a registry {args.delay:g} s late, then one "
        f"pod of a known image; filter and prioritize per pod, one at a time "
        f"(policy.resolveDeadlineSeconds 1.5)\n"
    )
    print("| archfit | worst wait of one pod | the queue's total wait | known pod answered after |")
    print("|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['archfit']} | {row['worst_wait_s']:.2f} s | {row['queue_wait_s']:.2f} s "
            f"| {row['known_answered_after_s']:.2f} s |"
        )
    print(f"\nmachine: {harness.machine()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
