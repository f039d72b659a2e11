"""What one extender request costs archfit, alone on one core (goals 2, 3 and 4 of issue 21).

Starts a real etcd + kube-apiserver with `--nodes` nodes (half amd64, half arm64, as a
kubelet reports them), a real registry with a multi-arch, an amd64-only and an arm64-only
image, and `archfit serve` (kubernetes.mode kubeconfig, node index on, JSON logs at info
to a file) pinned to core 1. The Go load generator (bench/loadgen) sends the bodies in
turn from core 0, over keep-alive connections. Every case is first checked: archfit must
answer 200 and keep the expected number of nodes, or the run fails.

kube-scheduler's parallel filters hand the extender the feasible nodes in a new order on
most calls, so every case sends SHUFFLES orders of the same nodes in turn unless its name
says "same order" (one body, byte for byte the same on every call: the best case).

- cases at `--names` nodes: filter of each image kind by NodeNames, prioritize, and
  filter and prioritize with full v1.Node objects (nodeCacheCapable: false), in a new
  order and in the same order; req/s, p50 and p99 at concurrency 16, p50 and p99 at
  concurrency 1, and archfit's CPU per request (its CPU time over the run / requests);
- sweep: p50, p99 (concurrency 1) and CPU per request against the node count, in both
  orders;
- orders: a fresh archfit with `--names` nodes indexed answers ORDERS filter calls, each
  listing the nodes in an order not seen before; its RSS and peak RSS after (goal 4);
- event loop: the multi-arch filter with `server.eventLoop` asyncio and uvloop (a row
  says so when the archfit under test does not know the setting).

    .venv/bin/python -m bench.request_cost [--source DIR] [--quick] [--output json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import harness
from tests.e2e.archfit import merge
from tests.e2e.processes import ProcessFailed
from tests.support.registry import RegistryProcess

CONCURRENCY = 16
SWEEP = (100, 500, 1000, 5000)
QUICK_SWEEP = (100, 500, 1000)
#: How long a case may take to give the expected answer (its images resolve meanwhile).
WARM_SECONDS = 30.0


@dataclass(frozen=True)
class Case:
    """One request shape: a verb, a pod's image, how nodes are sent, what must come back."""

    name: str
    verb: str
    image: str
    full_nodes: bool = False
    same_order: bool = False
    """One body every call; otherwise each call lists the nodes in another order, as
    kube-scheduler's parallel filters do, so nothing built for the last list applies."""
    new_pod: bool = False
    """Another pod in each body, as kube-scheduler sends one pod per scheduling cycle; otherwise
    every call carries the same pod, so what archfit keeps per pod body is reused."""

    def bodies(self, images: harness.Images, count: int) -> list[bytes]:
        """The bodies to send in turn: SHUFFLES orders of the same nodes, or one."""
        if self.same_order:
            return [self.body(images, count, range(count))]
        bodies = []
        # Full Nodes are kilobytes each, and nothing archfit keeps depends on their order.
        for seed in range(FULL_SHUFFLES if self.full_nodes else SHUFFLES):
            order = list(range(count))
            random.Random(seed).shuffle(order)
            pod_name = f"api-7d9c6b5f4-{seed:05d}" if self.new_pod else ""
            bodies.append(self.body(images, count, order, pod_name))
        return bodies

    def body(
        self, images: harness.Images, count: int, order: Sequence[int], pod_name: str = ""
    ) -> bytes:
        """The request body listing nodes `order` (indices below `count`) for the pod
        `pod_name` (the default pod if "")."""
        image = getattr(images, self.image)
        if self.full_nodes:
            return harness.nodes_args([image], [harness.node_object(i) for i in order])
        return harness.names_args([image], [harness.node_name(i) for i in order], pod_name)

    def expected(self, count: int) -> int | None:
        """Nodes a filter keeps (None: prioritize, any list will do)."""
        if self.verb != "filter":
            return None
        return (
            count
            if self.image == "multi"
            else len([i for i in range(count) if harness.node_arch(i) == self.image])
        )


SAME = ", same order"
CASES = (
    Case("filter multi-arch", "filter", "multi"),
    Case("filter amd64-only", "filter", "amd64"),
    Case("filter arm64-only", "filter", "arm64"),
    Case("prioritize multi-arch", "prioritize", "multi"),
    Case("filter multi-arch" + SAME, "filter", "multi", same_order=True),
    Case("filter amd64-only" + SAME, "filter", "amd64", same_order=True),
    Case("filter arm64-only" + SAME, "filter", "arm64", same_order=True),
    Case("prioritize multi-arch" + SAME, "prioritize", "multi", same_order=True),
    Case("filter multi-arch, full Nodes", "filter", "multi", full_nodes=True),
    Case("filter amd64-only, full Nodes", "filter", "amd64", full_nodes=True),
    Case("prioritize multi-arch, full Nodes", "prioritize", "multi", full_nodes=True),
    Case("filter multi-arch, full Nodes" + SAME, "filter", "multi", True, True),
    Case("filter multi-arch, a new pod each call", "filter", "multi", new_pod=True),
    Case("prioritize multi-arch, a new pod each call", "prioritize", "multi", new_pod=True),
)
SWEEP_CASES = (CASES[0], CASES[1], CASES[4], CASES[5], CASES[8])
SHUFFLES = 256
"""Orders sent in turn (the load generator spreads its workers over them): more than any
cache of recent lists holds, so each call's order is new to archfit."""
FULL_SHUFFLES = 8
ORDERS = 10_000
"""Filter calls in distinct orders before the RSS of the orders part is read (goal 4)."""
QUICK_ORDERS = 1_000


def settings(plane: harness.Plane, registry: RegistryProcess) -> dict[str, Any]:
    """archfit as deployed: enforce, the node index from the apiserver, JSON logs at info."""
    return {
        "policy": {"mode": "enforce", "failurePolicy": "fail-open"},
        "kubernetes": {
            "mode": "kubeconfig",
            "kubeconfig": str(plane.kubeconfig),
            "nodeIndex": True,
            "pullSecrets": False,
        },
        "registry": {
            "hosts": {registry.host: {"plainHttp": True}},
            "allowedNetworks": ["127.0.0.1/32"],
        },
        "logging": {"level": "info", "format": "json"},
    }


def check(server: harness.ArchfitServer, case: Case, body: bytes, count: int) -> None:
    """Ask until archfit keeps the expected nodes (the image resolves), or fail loudly."""
    client = harness.Client(server)
    deadline = time.monotonic() + WARM_SECONDS
    try:
        while True:
            status, answer = client.post(case.verb, body)
            if status != 200:
                raise harness.BenchError(f"{case.name}: archfit answered {status}: {answer}")
            want = case.expected(count)
            if want is None and isinstance(answer, list):
                return
            if want is not None and not answer.get("Error") and harness.kept(answer) == want:
                # A few more, so the first timed request is not the first warm one.
                for _ in range(20):
                    client.post(case.verb, body)
                return
            if time.monotonic() > deadline:
                got = answer if want is None else harness.kept(answer)
                raise harness.BenchError(
                    f"{case.name} at {count} nodes: expected {want} nodes kept, got {got}"
                )
            time.sleep(0.2)
    finally:
        client.close()


def measure_case(
    server: harness.ArchfitServer,
    images: harness.Images,
    case: Case,
    count: int,
    seconds: float,
    concurrencies: Sequence[int],
) -> dict[str, Any]:
    """Check, then load the case at each concurrency; one row."""
    bodies = case.bodies(images, count)
    check(server, case, bodies[0], count)
    row: dict[str, Any] = {"case": case.name, "nodes": count, "body_kb": len(bodies[0]) / 1024}
    for concurrency in concurrencies:
        result = harness.measured_load(server, case.verb, bodies, concurrency, seconds)
        suffix = "" if concurrency == concurrencies[0] else f"_c{concurrency}"
        row[f"req_per_s{suffix}"] = result["req_per_s"]
        row[f"p50_ms{suffix}"] = result["p50_ms"]
        row[f"p99_ms{suffix}"] = result["p99_ms"]
        row[f"cpu_ms{suffix}"] = result["cpu_ms_per_request"]
    return row


def orders_row(
    workdir: Path,
    base: dict[str, Any],
    images: harness.Images,
    names: int,
    calls: int,
    source: Path | None,
) -> dict[str, Any]:
    """A fresh archfit's RSS after `calls` multi-arch filter calls, each in a new order."""
    server = harness.ArchfitServer(workdir / "orders", base, source=source, name="orders")
    case = CASES[0]
    with harness.running(server):
        check(server, case, case.body(images, names, range(names)), names)
        before = server.memory()
        client = harness.Client(server)
        order = list(range(names))
        shuffler = random.Random(names)
        try:
            for _ in range(calls):
                shuffler.shuffle(order)
                status, answer = client.post(case.verb, case.body(images, names, order))
                if status != 200 or harness.kept(answer) != names:
                    raise harness.BenchError(f"orders: archfit answered {status}: {answer}")
        finally:
            client.close()
        rss, peak = server.memory()
    mb = 1024 * 1024
    return {
        "nodes": names,
        "calls": calls,
        "rss_before_mb": before[0] / mb,
        "rss_mb": rss / mb,
        "peak_mb": peak / mb,
    }


def event_loop_rows(
    workdir: Path,
    base: dict[str, Any],
    images: harness.Images,
    names: int,
    seconds: float,
    source: Path | None,
) -> list[dict[str, Any]]:
    """The multi-arch filter under each `server.eventLoop`; a note where it is unknown."""
    rows = []
    for loop in ("asyncio", "uvloop"):
        row: dict[str, Any] = {"event_loop": loop}
        server = harness.ArchfitServer(
            workdir / f"loop-{loop}",
            merge(base, {"server": {"eventLoop": loop}}),
            source=source,
            name=f"archfit-{loop}",
        )
        try:
            server.start(timeout=60)
        except ProcessFailed as error:
            row["note"] = f"not measured: {_refusal(error)}"
            rows.append(row)
            continue
        try:
            row["uvloop_loaded"] = server.loads("uvloop")
            row.update(measure_case(server, images, CASES[0], names, seconds, (CONCURRENCY,)))
        finally:
            server.stop()
        rows.append(row)
    return rows


def _refusal(error: BaseException) -> str:
    """Why archfit would not start, in a table cell."""
    if "eventLoop: unknown setting" in str(error):
        return "this archfit does not know server.eventLoop"
    lines = [line for line in str(error).splitlines() if line.strip()]
    return lines[-1][:100] if lines else type(error).__name__


def run(
    *,
    source: Path | None = None,
    names: int = 500,
    sweep: Sequence[int] = SWEEP,
    seconds: float = 10.0,
    orders: int = ORDERS,
    workdir: Path | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, list[dict[str, Any]]]:
    """Run every part; rows per part: `cases`, `sweep`, `orders`, `event_loop`."""
    harness.loadgen_binary()  # build before anything runs, so a failure costs nothing
    with tempfile.TemporaryDirectory(prefix="archfit-bench-") as tmp:
        root = workdir or Path(tmp)
        plane = harness.Plane(root)
        registry: RegistryProcess | None = None
        try:
            plane.start()
            registry = RegistryProcess.start(root / "registry")
            images = harness.push_kinds(registry)
            base = settings(plane, registry)
            plane.grow_to(names)  # the orders part indexes `names` nodes, no more
            ordered = orders_row(root, base, images, names, orders, source)
            progress(f"{orders} orders: RSS {ordered['rss_mb']:.1f} MB")
            most = max(names, *sweep)
            took = plane.grow_to(most)
            progress(f"{most} nodes created in {took:.1f}s")
            server = harness.ArchfitServer(root / "archfit", base, source=source)
            with harness.running(server):
                cases = []
                for case in CASES:
                    row = measure_case(server, images, case, names, seconds, (CONCURRENCY, 1))
                    progress(f"{case.name}: {row['req_per_s']:.0f} req/s")
                    cases.append(row)
                swept = []
                for count in sweep:
                    for case in SWEEP_CASES:
                        swept.append(measure_case(server, images, case, count, seconds, (1,)))
                    progress(f"sweep at {count} nodes done")
            loops = event_loop_rows(root, base, images, names, seconds, source)
        finally:
            if registry is not None:
                registry.stop()
            plane.stop()
    return {"cases": cases, "sweep": swept, "orders": [ordered], "event_loop": loops}


CASE_COLUMNS = (
    "case",
    "nodes",
    "body_kb",
    "req_per_s",
    "p50_ms",
    "p99_ms",
    "cpu_ms",
    "p50_ms_c1",
    "p99_ms_c1",
    "cpu_ms_c1",
)
SWEEP_COLUMNS = ("case", "nodes", "p50_ms", "p99_ms", "cpu_ms")
ORDERS_COLUMNS = ("nodes", "calls", "rss_before_mb", "rss_mb", "peak_mb")
LOOP_COLUMNS = ("event_loop", "uvloop_loaded", "req_per_s", "p50_ms", "p99_ms", "cpu_ms", "note")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, help="checkout whose extender/ to run")
    parser.add_argument("--names", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=10.0, help="load per measurement")
    parser.add_argument("--sweep", type=int, nargs="*", default=list(SWEEP))
    parser.add_argument("--quick", action="store_true", help="small sweep, 2 s per measurement")
    parser.add_argument("--output", choices=("table", "json"), default="table")
    args = parser.parse_args(argv)
    orders = ORDERS
    if args.quick:
        args.sweep, args.seconds, orders = list(QUICK_SWEEP), 2.0, QUICK_ORDERS
    result = run(
        source=args.source,
        names=args.names,
        sweep=args.sweep,
        seconds=args.seconds,
        orders=orders,
        progress=lambda line: print(line, file=sys.stderr),
    )
    if args.output == "json":
        print(json.dumps(result, indent=2))
        return 0
    print(f"archfit from {harness.imported_from(args.source)}, pinned to one core")
    harness.print_table(result["cases"], CASE_COLUMNS)
    print()
    harness.print_table(result["sweep"], SWEEP_COLUMNS)
    print()
    harness.print_table(result["orders"], ORDERS_COLUMNS)
    print()
    harness.print_table(result["event_loop"], LOOP_COLUMNS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
