"""Where one extender call's CPU goes, stage by stage (issue 21: what the remaining time is
spent on).

Runs the real app (`extender.server.create_app`) under aiohttp's AppRunner on a loopback
socket, with a node index of `--nodes` nodes (half amd64, half arm64) and the image's
platforms already answered (as after the first call of a Deployment), and posts NodeNames
bodies from a raw keep-alive client in the same process, one at a time, each call listing
the nodes in a new order and, with `--new-pod`, naming a new pod. Each stage of
`verbs.Verbs` is timed with `time.perf_counter_ns` around it (instrumentation added by this
script only; the app is not changed). The client and aiohttp's own work are measured as
the same loop answering a fixed body from a handler that only reads the request
(`floor`), so `serve` and the stages are archfit's own cost per call, and the total is
the process's CPU per call (client included).

Figures are in-situ costs: each stage runs once per call between aiohttp's work and the
kernel's, with cold caches, so they are two to three times what a tight loop of the same
function measures.

    .venv/bin/python -m bench.call_profile [--nodes 500] [--calls 4000] [--new-pod]
        [--source DIR] [--output table|json]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench import harness

IMAGE = "registry.bench.test/app:1"
CASES = (("filter", "multi"), ("filter", "amd64"), ("prioritize", "multi"))
WARM_CALLS = 1000


def _request(verb: str, body: bytes) -> bytes:
    head = (
        f"POST /scheduler/{verb} HTTP/1.1\r\nHost: archfit\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


class Timers:
    """Accumulated nanoseconds and calls per stage."""

    def __init__(self) -> None:
        self.nanoseconds: collections.Counter[str] = collections.Counter()
        self.calls: collections.Counter[str] = collections.Counter()

    def reset(self) -> None:
        self.nanoseconds.clear()
        self.calls.clear()

    def wrap(self, owner: Any, name: str, label: str) -> None:
        """Time `owner.name` (a function or a coroutine function) under `label`."""
        function = getattr(owner, name)
        nanoseconds, calls, clock = self.nanoseconds, self.calls, time.perf_counter_ns

        if asyncio.iscoroutinefunction(function):

            async def timed_coroutine(*args: Any, **kwargs: Any) -> Any:
                started = clock()
                try:
                    return await function(*args, **kwargs)
                finally:
                    nanoseconds[label] += clock() - started
                    calls[label] += 1

            setattr(owner, name, timed_coroutine)
            return

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = clock()
            try:
                return function(*args, **kwargs)
            finally:
                nanoseconds[label] += clock() - started
                calls[label] += 1

        setattr(owner, name, timed)


def instrument(timers: Timers) -> list[str]:
    """Wrap the stages of one call; the labels in the order they run."""
    from extender import explain
    from extender.core import placement
    from extender.metrics import Metrics
    from extender.resolution.within_deadline import Resolution
    from extender.scheduler import verbs

    stages: list[tuple[Any, str, str]] = [
        (verbs, "bind_request", "bind the log context"),
        (verbs, "read_body", "read the body"),
        (verbs, "parse_args", "parse (pod and names)"),
        (getattr(verbs, "RecentPods", None), "decode", "  of which the pod and its facts"),
        (placement.Candidates, "among", "group the names (node index)"),
        (Resolution, "resolve", "resolve (recent answers)"),
        (verbs.Verbs, "_decided", "judge, decide and render"),
        (verbs, "json_answer", "the aiohttp Response"),
        (verbs.Verbs, "serve", "archfit's part of the call"),
        (explain, "filtered", "after the answer: filter's log line"),
        (explain, "scored", "after the answer: prioritize's log line"),
        (Metrics, "extender_call", "after the answer: metrics"),
    ]
    labels = []
    for owner, name, label in stages:
        if owner is not None and hasattr(owner, name):
            timers.wrap(owner, name, label)
            labels.append(label)
    return labels


@contextmanager
def _quiet_logs() -> Iterator[None]:
    """JSON logs at info to /dev/null: the line is built and written as in production."""
    from extender import logs

    with open(os.devnull, "w") as sink:
        logs.configure("info", "json", sink)
        yield


async def _serve_and_post(
    handler_app: Any, requests: list[bytes], calls: int, on_warm: Callable[[], None]
) -> float:
    """Serve `handler_app` on a free port and post `requests` in turn; the process's CPU
    microseconds per call after WARM_CALLS."""
    from aiohttp import web

    runner = web.AppRunner(handler_app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)

    async def one(index: int) -> None:
        writer.write(requests[index % len(requests)])
        head = await reader.readuntil(b"\r\n\r\n")
        if b" 200 " not in head.split(b"\r\n", 1)[0]:
            raise harness.BenchError(f"archfit answered {head[:60]!r}")
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        await reader.readexactly(length)

    try:
        for index in range(WARM_CALLS):
            await one(index)
        on_warm()
        cpu = time.process_time()
        for index in range(calls):
            await one(index)
        return (time.process_time() - cpu) / calls * 1e6
    finally:
        writer.close()
        await runner.cleanup()


def floor_app(answer: bytes) -> Any:
    """aiohttp with the same settings and one pass-through middleware, as archfit's app
    has, answering a fixed body after reading the request."""
    from aiohttp import web

    @web.middleware
    async def passing(request: web.Request, handler: Any) -> web.StreamResponse:
        return await handler(request)  # type: ignore[no-any-return]

    async def handler(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=answer, content_type="application/json")

    app = web.Application(middlewares=[passing])
    app.router.add_post("/scheduler/filter", handler)
    app.router.add_post("/scheduler/prioritize", handler)
    return app


def archfit_app(nodes: int, platforms: str) -> Any:
    from extender.config.loading import from_mapping
    from extender.core.platforms import parse
    from extender.server import create_app
    from tests.support.fakes import FunctionResolver, StaticNodes

    answer = frozenset(parse(p) for p in platforms.split(","))

    async def resolve(image: str, pull: Any) -> frozenset[Any]:
        return answer

    settings = from_mapping(
        {"kubernetes": {"mode": "off"}, "logging": {"level": "info", "format": "json"}}
    )
    index = StaticNodes(*(harness.node_object(i) for i in range(nodes)))
    return create_app(settings, resolver=FunctionResolver(resolve), nodes=index)


PLATFORMS = {"multi": "linux/amd64,linux/arm64", "amd64": "linux/amd64"}


def measure(nodes: int, calls: int, new_pod: bool) -> list[dict[str, Any]]:
    """One row per case and stage: microseconds per call."""
    timers = Timers()
    labels = instrument(timers)
    names = [harness.node_name(i) for i in range(nodes)]
    rows: list[dict[str, Any]] = []
    with _quiet_logs():
        for verb, image_kind in CASES:
            bodies = []
            for seed in range(200):
                order = list(range(nodes))
                random.Random(seed).shuffle(order)
                pod_name = f"api-7d9c6b5f4-{seed:05d}" if new_pod else ""
                body = harness.names_args([IMAGE], [names[i] for i in order], pod_name)
                bodies.append(_request(verb, body))
            app = archfit_app(nodes, PLATFORMS[image_kind])
            cpu = asyncio.run(_serve_and_post(app, bodies, calls, timers.reset))
            stages = {
                label: timers.nanoseconds[label] / max(1, timers.calls[label]) / 1000
                for label in labels
                if timers.calls[label]
            }
            floor = asyncio.run(
                _serve_and_post(floor_app(b'{"Error":""}'), bodies, calls, lambda: None)
            )
            case = f"{verb} {image_kind}"
            rows.append({"case": case, "stage": "whole call, CPU of the process", "us": cpu})
            rows.append({"case": case, "stage": "aiohttp, the loop and the client", "us": floor})
            rows += [{"case": case, "stage": label, "us": us} for label, us in stages.items()]
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--calls", type=int, default=4000)
    parser.add_argument("--new-pod", action="store_true", help="a new pod in every body")
    parser.add_argument("--source", help="checkout whose extender/ to profile")
    parser.add_argument("--output", choices=("table", "json"), default="table")
    args = parser.parse_args(argv)
    if args.source:  # the other checkout's extender first on PYTHONPATH, in a new process
        rest = [a for a in sys.argv[1:] if a != "--source" and a != args.source]
        command = [sys.executable, "-m", "bench.call_profile", *rest]
        return subprocess.run(command, env=harness.source_env(Path(args.source))).returncode
    rows = measure(args.nodes, args.calls, args.new_pod)
    if args.output == "json":
        print(json.dumps(rows))
        return 0
    print(
        f"archfit from {harness.imported_from(None)}, {args.nodes} nodes, a new order on every "
        f"call{', a new pod on every call' if args.new_pod else ''}; microseconds per call"
    )
    harness.print_table(rows, ("case", "stage", "us"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
