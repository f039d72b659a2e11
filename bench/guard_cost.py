"""What the connection guard costs per request on a kept-alive connection, this checkout
against another, in one run.

Each run is a fresh process serving a do-nothing GET through `serving/listener.py`'s guarded
site (plain HTTP, the guard installed where the checkout has `ConnectionGuard.install`), and
a client on the same loop sending `--requests` requests one at a time over one connection;
the process's CPU time over them, per request, client included (the same client for both
checkouts, so the difference is the server's). Runs alternate between the checkouts, on
each loop, and the median per checkout and loop is reported.

    .venv/bin/python -m bench.guard_cost --before DIR [--requests 20000] [--runs 5]
        [--output table|json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench import harness

CHILD = """
import asyncio, json, sys, time
from aiohttp import web
from extender.config.settings import ServerSettings
from extender.event_loop import loop_factory
from extender.metrics import Metrics
from extender.once import OncePerCause
from extender.serving.listener import ConnectionGuard, GuardedSite
from tests.support.process import free_port

REQUEST = b"GET / HTTP/1.1\\r\\nHost: a\\r\\n\\r\\n"

async def ok(request):
    return web.Response(text="ok")

async def main(requests):
    app = web.Application()
    app.router.add_get("/", ok)
    guard = ConnectionGuard(ServerSettings(), Metrics(), OncePerCause())
    if hasattr(guard, "install"):
        guard.install(app)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await GuardedSite(runner, "127.0.0.1", port, guard).start()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    async def one():
        writer.write(REQUEST)
        head = await reader.readuntil(b"\\r\\n\\r\\n")
        length = int(head.lower().split(b"content-length: ")[1].split(b"\\r\\n")[0])
        await reader.readexactly(length)
    for _ in range(1000):
        await one()
    start = time.process_time()
    for _ in range(requests):
        await one()
    spent = time.process_time() - start
    writer.close()
    await runner.cleanup()
    return spent / requests

_, factory = loop_factory(sys.argv[1])
with asyncio.Runner(loop_factory=factory) as runner:
    print(json.dumps(runner.run(main(int(sys.argv[2])))))
"""


def one_run(checkout: Path, loop: str, requests: int) -> float:
    """CPU seconds per request of one fresh process serving `checkout`'s guard."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, loop, str(requests)],
        env=harness.source_env(checkout),
        cwd=checkout,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise harness.BenchError(f"{checkout} on {loop} failed:\n{done.stderr[-2000:]}")
    seconds: float = json.loads(done.stdout)
    return seconds


def run(before: Path, requests: int, runs: int) -> list[dict[str, Any]]:
    checkouts = {"this": harness.ROOT, "before": before}
    rows = []
    for loop in ("asyncio", "uvloop"):
        spent: dict[str, list[float]] = {name: [] for name in checkouts}
        for _ in range(runs):
            for name, checkout in checkouts.items():
                spent[name].append(one_run(checkout, loop, requests))
        for name, checkout in checkouts.items():
            rows.append(
                {
                    "event_loop": loop,
                    "checkout": f"{name} {harness.git_commit(checkout)}",
                    "cpu_us_median": round(statistics.median(spent[name]) * 1e6, 1),
                    "cpu_us_runs": [round(value * 1e6, 1) for value in spent[name]],
                }
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="checkout to compare with")
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--output", choices=("table", "json"), default="table")
    args = parser.parse_args(argv)
    rows = run(args.before.resolve(), args.requests, args.runs)
    if args.output == "json":
        print(json.dumps(rows, indent=2))
    else:
        print(f"CPU per request, one kept-alive connection, {args.requests} requests per run")
        harness.print_table(rows, ("event_loop", "checkout", "cpu_us_median", "cpu_us_runs"))
        print(json.dumps(harness.machine()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
