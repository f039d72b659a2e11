"""What aiohttp itself costs per request, routed (web.Application) and low-level (web.Server).

Issue 21 asked whether the two hot verbs should skip aiohttp's router and middleware by
answering from aiohttp's low-level server. This measures the difference with nothing else
in the way: each server, pinned to core 1, reads a 500-name NodeNames body and answers a
fixed filter result; the Go load generator (bench/loadgen) posts from core 0 at
concurrency 1 and 16. `cpu_ms` is the server's CPU time per request. Both servers run
under the same `web.AppRunner`/`web.ServerRunner` settings archfit's listener uses
(no access log).

    .venv/bin/python -m bench.server_floor [--seconds 5]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import psutil

from bench import harness
from tests.e2e.processes import Process, http_ok

SERVER = """
import asyncio, sys
from aiohttp import web

ANSWER = (
    b'{"Nodes":null,"NodeNames":[],"FailedNodes":{},"FailedAndUnresolvableNodes":{},"Error":""}'
)


async def handler(request):
    await request.read()
    return web.Response(body=ANSWER, content_type="application/json")


async def main(kind, port):
    if kind == "application":
        @web.middleware
        async def passing(request, handler):  # archfit's app has one middleware
            return await handler(request)

        app = web.Application(middlewares=[passing])
        app.router.add_post("/scheduler/filter", handler)
        app.router.add_get("/healthz", handler)
        runner = web.AppRunner(app, access_log=None)
    else:
        runner = web.ServerRunner(web.Server(handler, access_log=None), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    await asyncio.Event().wait()


asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""
KINDS = ("application", "low-level server")
COLUMNS = ("server", "concurrency", "req_per_s", "p50_ms", "p99_ms", "cpu_ms")


def run(seconds: float = 5.0) -> list[dict[str, Any]]:
    """One row per server and concurrency."""
    body = harness.names_args(["acme/multi:1"], [harness.node_name(i) for i in range(500)])
    rows = []
    with tempfile.TemporaryDirectory(prefix="archfit-floor-") as tmp:
        script = Path(tmp) / "server.py"
        script.write_text(SERVER)
        for kind in KINDS:
            port = harness.free_port()
            argv = ["taskset", "-c", str(harness.ARCHFIT_CORE), sys.executable, str(script)]
            process = Process(
                kind.replace(" ", "-"), [*argv, kind.split()[0], str(port)], Path(tmp)
            )
            process.start()
            try:
                health = f"http://127.0.0.1:{port}/healthz"
                process.wait_ready(lambda: http_ok(health), 30)  # noqa: B023 (used at once)
                assert process.pid is not None
                ps = psutil.Process(process.pid)
                url = f"http://127.0.0.1:{port}/scheduler/filter"
                for concurrency in (1, 16):
                    before = sum(ps.cpu_times()[:2])
                    result = harness.load(url, [body], concurrency, seconds)
                    spent = sum(ps.cpu_times()[:2]) - before
                    rows.append(
                        {
                            "server": kind,
                            "concurrency": concurrency,
                            "req_per_s": result["req_per_s"],
                            "p50_ms": result["p50_ms"],
                            "p99_ms": result["p99_ms"],
                            "cpu_ms": spent * 1000 / max(1, result["requests"]),
                        }
                    )
            finally:
                process.stop()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args(argv)
    harness.print_table(run(args.seconds), COLUMNS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
