"""Filter and prioritize latency for 100 and 1000 candidate nodes, warm resolver, one core.

The server runs the real app in a child process pinned to CPU 0 with
production logging (JSON to /dev/null); this process pins itself to CPU 1 and
sends requests one at a time, as kube-scheduler does. Prints median and p99.

    .venv/bin/python bench/filter_latency.py [--requests 300]
    BENCH_DEFAULT_GC=1 .venv/bin/python bench/filter_latency.py   # without archfit's GC tuning
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.objects import args_full, args_names, node, pod  # noqa: E402
from tests.support.archfit_process import wait_listening  # noqa: E402
from tests.support.process import free_port  # noqa: E402

MULTI = "registry.example.com/acme/api:1.2"
AMD = "registry.example.com/acme/worker:3.1"


def nodes(count: int) -> list[dict]:
    # A realistic mix: one node in four is arm64.
    return [
        node(f"ip-10-0-{i // 250}-{i % 250}", "arm64" if i % 4 == 0 else "amd64")
        for i in range(count)
    ]


def serve(port: int, count: int) -> None:
    """Child process: the real app with a warm table resolver and a synced node index."""
    from aiohttp import web

    from extender.app import create_app
    from extender.cli import tune_gc
    from extender.config import from_mapping
    from extender.logs import configure
    from extender.platforms import parse
    from tests.support.function_resolver import FunctionResolver
    from tests.support.static_nodes import StaticNodes

    os.sched_setaffinity(0, {0})
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - JSON log lines go nowhere, but are built
    configure("info", "json")
    table = {
        MULTI: frozenset({parse("linux/amd64"), parse("linux/arm64")}),
        AMD: frozenset({parse("linux/amd64")}),
    }

    async def resolve(image, pull):
        return table[image]

    settings = from_mapping({"kubernetes": {"mode": "off"}, "server": {"port": port}})
    app = create_app(settings, resolver=FunctionResolver(resolve), nodes=StaticNodes(*nodes(count)))
    if not os.environ.get("BENCH_DEFAULT_GC"):
        tune_gc()  # as `archfit serve` does
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


async def measure(port: int, verb: str, body: bytes, requests: int) -> list[float]:
    url = f"http://127.0.0.1:{port}/scheduler/{verb}"
    timings = []
    async with aiohttp.ClientSession() as session:
        for i in range(requests + 20):
            start = time.perf_counter()
            async with session.post(
                url, data=body, headers={"Content-Type": "application/json"}
            ) as response:
                await response.read()
                assert response.status == 200
            if i >= 20:  # warm-up: caches, connection, JIT-free but allocator warm
                timings.append((time.perf_counter() - start) * 1000)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--serve", type=int, nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(*args.serve)
        return
    os.sched_setaffinity(0, {1})
    print(f"{'nodes':>6} {'mode':>10} {'verb':>11} {'image':>10} {'median ms':>10} {'p99 ms':>8}")
    for count in (100, 1000):
        port = free_port()
        child = subprocess.Popen([sys.executable, __file__, "--serve", str(port), str(count)])
        try:
            wait_listening(port, child)
            all_nodes = nodes(count)
            names = [n["metadata"]["name"] for n in all_nodes]
            cases = [
                ("NodeNames", "filter", "amd64-only", args_names(pod(AMD), *names)),
                ("NodeNames", "filter", "multi", args_names(pod(MULTI), *names)),
                ("NodeNames", "prioritize", "multi", args_names(pod(MULTI), *names)),
                ("Nodes", "filter", "amd64-only", args_full(pod(AMD), *all_nodes)),
                ("Nodes", "prioritize", "multi", args_full(pod(MULTI), *all_nodes)),
            ]
            for mode, verb, image, body in cases:
                timings = asyncio.run(measure(port, verb, orjson.dumps(body), args.requests))
                p99 = statistics.quantiles(timings, n=100)[98]
                print(
                    f"{count:>6} {mode:>10} {verb:>11} {image:>10} "
                    f"{statistics.median(timings):>10.2f} {p99:>8.2f}"
                )
        finally:
            child.terminate()
            child.wait(10)


if __name__ == "__main__":
    main()
