"""How one AdmissionReview travels through archfit's modules in the pod webhook's decision.

Runs `PodMutation.decide` (extender.admission.pod_webhook) on one pod CREATE, as
kube-apiserver sends a Deployment's pod after its defaulting (bench/webhook_cost's review),
under `sys.setprofile`: the
pod's image already answered (warm, as for every pod of a Deployment after its first), a
node index of an amd64 and an arm64 node, so the answer is archfit's full patch (required
and preferred affinity, the platforms annotation). Only frames of archfit's own modules
count (`extender.*`); a call into another library and back is inside the module that made
it. Counted:

- calls: Python calls of archfit's functions;
- modules: the distinct modules they run in;
- returns to a module already left: returns that land in another module than the one
  returning, i.e. back in a module the request left for a call;
- entries per module: calls into a module from another (the call that starts the
  decision included).

The decision runs in a child process whose `extender` (and `tests`) comes from `--source DIR`
(a checkout: main's, say) or, without it, from this checkout; it reads the reviews on its
stdin, and checks the answer is the full patch before it counts.

    .venv/bin/python -m bench.module_trace [--source DIR] [--output table|json]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import subprocess
import sys
from pathlib import Path
from types import FrameType
from typing import Any

HERE = Path(__file__).resolve().parent.parent
IMAGE = "registry.bench.test/web:1"
PACKAGE = "extender"


class Trace:
    """The profile hook: module transitions of archfit's frames."""

    def __init__(self) -> None:
        self.calls = 0
        self.returns_to_left = 0
        self.entries: collections.Counter[str] = collections.Counter()
        self.modules: set[str] = set()

    def hook(self, frame: FrameType, event: str, arg: object) -> None:
        if event not in ("call", "return"):
            return
        module = _module(frame)
        if module is None:
            return
        outer = _caller_module(frame)
        if event == "call":
            self.calls += 1
            self.modules.add(module)
            if outer != module:
                self.entries[module] += 1
        elif outer is not None and outer != module:
            self.returns_to_left += 1


def _module(frame: FrameType) -> str | None:
    name = frame.f_globals.get("__name__", "")
    return name if name == PACKAGE or name.startswith(PACKAGE + ".") else None


def _caller_module(frame: FrameType) -> str | None:
    """The module of the nearest archfit frame that called this one (None at the top)."""
    outer = frame.f_back
    while outer is not None:
        module = _module(outer)
        if module is not None:
            return module
        outer = outer.f_back
    return None


async def _traced(warm: bytes, traced: bytes) -> dict[str, Any]:
    """In the child: decide `warm`, then `traced` (a pod of the same images) under the
    profile hook."""
    from extender.admission.pod_webhook import PodMutation
    from extender.config.loading import from_mapping
    from extender.core.platforms import parse
    from extender.core.pods import PullSecretsRef
    from extender.metrics import Metrics
    from extender.services import open_services
    from extender.wire.admission_api import parse_review
    from tests.objects import node

    try:
        from tests.support.fakes import FunctionResolver, StaticNodes
    except ImportError:  # a checkout from before the fakes had one home
        from tests.support.function_resolver import FunctionResolver  # type: ignore[no-redef]
        from tests.support.static_nodes import StaticNodes  # type: ignore[no-redef]

    async def platforms(image: str, pull: PullSecretsRef) -> frozenset[Any]:
        return frozenset({parse("linux/amd64"), parse("linux/arm64")})

    settings = from_mapping({"kubernetes": {"mode": "off"}, "webhook": {"enabled": True}})
    metrics = Metrics()
    nodes = StaticNodes(node("amd-1", "amd64"), node("arm-1", "arm64"))
    async with open_services(settings, metrics, FunctionResolver(platforms), nodes) as services:
        mutation = PodMutation(settings, metrics, services)
        await mutation.decide(parse_review(warm), 0.0)
        request = parse_review(traced)
        trace = Trace()
        sys.setprofile(trace.hook)
        try:
            admission = await mutation.decide(request, 0.0)
        finally:
            sys.setprofile(None)
    changes = sorted(op["path"] for op in admission.patch)
    if admission.outcome != "mutated" or "/spec/affinity" not in changes:
        raise SystemExit(f"the traced review was not answered with the full patch: {admission}")
    return {
        "calls": trace.calls,
        "modules": len(trace.modules),
        "returns_to_a_module_left": trace.returns_to_left,
        "entries": dict(trace.entries.most_common()),
        "patch_paths": changes,
    }


def measure(source: Path | None) -> dict[str, Any]:
    """The trace of the child whose archfit comes from `source` (this checkout when None)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(source or HERE), env.get("PYTHONPATH", "")) if p
    )
    from bench.webhook_cost import review_body

    reviews = b"\n".join(review_body(index, IMAGE) for index in range(2))
    done = subprocess.run(
        [sys.executable, "-P", str(Path(__file__).resolve()), "--child"],
        input=reviews,
        env=env,
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the traced child failed:\n{done.stderr.decode()}")
    # The last line: archfit's start-up logs come before it.
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["source"] = str(source or HERE)
    result["commit"] = _commit(source or HERE)
    return result


def _commit(directory: Path) -> str:
    done = subprocess.run(
        ["git", "-C", str(directory), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or "unknown"


def _print_table(results: list[dict[str, Any]]) -> None:
    for result in results:
        print(f"{result['source']} ({result['commit']}): patch {', '.join(result['patch_paths'])}")
        print(
            f"  calls {result['calls']}, modules {result['modules']}, "
            f"returns to a module left {result['returns_to_a_module_left']}"
        )
        print("  entries: " + ", ".join(f"{m} {n}" for m, n in result["entries"].items()))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, help="also trace this checkout's archfit")
    parser.add_argument("--output", choices=("table", "json"), default="table")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        warm, traced = sys.stdin.buffer.read().split(b"\n")
        print(json.dumps(asyncio.run(_traced(warm, traced))))
        return
    results = [measure(source) for source in ([args.source] if args.source else []) + [None]]
    if args.output == "json":
        print(json.dumps(results, indent=2))
    else:
        _print_table(results)


if __name__ == "__main__":
    main()
