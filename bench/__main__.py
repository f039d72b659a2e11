"""`python -m bench`: run every benchmark once and write docs/benchmarks.md with its plots.

    .venv/bin/python -m bench [--source DIR] [--quick] [--only NAME ...]
                              [--doc docs/benchmarks.md] [--baseline results.json]
                              [--reuse results.json]
                              [--before DIR [--no-scale-before]] [--peer NAME=BINARY ...]

`--source DIR` measures the archfit of another checkout with these scripts (its
`extender` first on PYTHONPATH); `--baseline` takes the results.json of such a run and
puts its figures beside this run's in the goals table. `--reuse` takes the results.json
of an earlier run for the parts `--only` leaves out, so one part that failed is measured
again without the others (the document names the parts kept and their run). `--before DIR`
runs another checkout's archfit beside this one in the same run, in the benchmarks that can
(scheduler throughput's archfit-before rows, the webhook's `--before` rows, scale's before
rows); `--no-scale-before` keeps it out of the scale benchmark, whose before rows double its
time.
`--peer NAME=BINARY` (with `--peer-arg`, `--peer-env`: bench/peers.py) measures another
admission webhook beside archfit in bench/webhook_latency's run; bench/build-peers.sh builds
noe and k8smultiarcher from their sources. `--quick` shrinks every benchmark to prove the
pipeline in a few minutes; its figures are not the ones to quote. The scale benchmark
(bench/scale.py) takes the longest: about 45 minutes for its three sizes on 2 shared
cores (creating 100,000 pods with statuses takes 10 of them), about 70 with `--before`,
which measures two archfits at each; a few minutes with `--quick`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import harness, memory, peers, report, request_cost, scale, startup

DOC = harness.ROOT / "docs" / "benchmarks.md"
THROUGHPUT_RUNS = 3
NAMES = ("scheduler_throughput", "request_cost", "memory", "startup", "scale", "others")
#: The older scripts that still measure something the new ones do not, with their
#: arguments (full, quick). bench/filter_latency.py, bench/node_index_memory.py and
#: bench/start_to_ready.py were folded into request_cost, memory and startup.
OTHERS: dict[str, tuple[list[str], list[str]]] = {
    "resolve.py": ([], []),
    "audit.py": ([], []),
    "lint.py": ([], ["--runs", "1"]),
    "webhook_latency.py": (["--pods", "100"], ["--pods", "20", "--cpu-pods", "200"]),
    "webhook_cost.py": (["--seconds", "5"], ["--seconds", "1"]),
    "policy_latency.py": (["--pods", "200"], ["--pods", "20", "--rounds", "1"]),
    "workload_warnings_latency.py": (["--rounds", "40"], ["--rounds", "10"]),
    "pod_watch.py": ([], ["--quick"]),
    "policy_table.py": ([], ["--images", "2000", "10000", "--pods", "10000", "--rounds", "1"]),
    "kube_relist.py": ([], ["--quick"]),
    "server_floor.py": ([], ["--seconds", "1"]),
    "call_profile.py": (["--new-pod"], ["--new-pod", "--calls", "500"]),
    "scheduler_waits.py": ([], ["--unknown", "3"]),
}


class Skipped(Exception):
    """A benchmark that cannot run here; its message goes into the document."""


def throughput(source: Path | None, quick: bool, before: Path | None) -> list[dict[str, Any]]:
    """bench.scheduler_throughput.run(pods, nodes, source, runs=...), when that module has it."""
    try:
        from bench import scheduler_throughput

        run = scheduler_throughput.run  # type: ignore[attr-defined]
    except (ImportError, AttributeError) as error:
        raise Skipped(
            "scheduler throughput not measured: bench/scheduler_throughput.py has no "
            f"run(pods, nodes, source) yet ({error})"
        ) from None
    pods, nodes = (100, 100) if quick else (500, 500)
    # Three runs: the goal's figure is their median, quoted with the spread.
    rows = run(pods, nodes, source, runs=1 if quick else THROUGHPUT_RUNS, before=before)
    return [
        dataclasses.asdict(r)
        if dataclasses.is_dataclass(r) and not isinstance(r, type)
        else dict(r)
        for r in rows
    ]


#: The older scripts that take `--before DIR` (another checkout measured in the same run).
TAKE_BEFORE = frozenset({"webhook_latency.py", "scheduler_waits.py", "kube_relist.py"})


def others(
    source: Path | None, quick: bool, before: Path | None, peers: list[str] | None = None
) -> dict[str, str]:
    """Run the older scripts from the measured checkout; their stdout by name. `peers`: the
    `--peer`, `--peer-arg` and `--peer-env` arguments, for bench/webhook_latency."""
    checkout = source or harness.ROOT
    found = {}
    for script, (full, small) in OTHERS.items():
        path = checkout / "bench" / script
        if not path.exists():
            found[script] = f"(not in {checkout})"
            continue
        # As a module of the checkout's bench package: its `tests` imports resolve from there.
        beside = ["--before", str(before)] if before is not None and script in TAKE_BEFORE else []
        if script == "webhook_latency.py":
            beside += peers or []
        done = subprocess.run(
            [sys.executable, "-m", f"bench.{path.stem}", *(small if quick else full), *beside],
            env=harness.source_env(source),
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
            cwd=checkout,
        )
        found[script] = done.stdout
        if done.returncode != 0:
            found[script] += f"\n(exited {done.returncode})\n{done.stderr[-1500:]}"
    return found


def kept_from(earlier: dict[str, Any], kept: list[str]) -> list[dict[str, Any]]:
    """Where each kept part was measured, grouped by run: a part the earlier run had itself
    kept (`--reuse` twice) names the run that measured it, not the one that passed it on."""
    meta = earlier["meta"]
    origin = {"archfit": meta["archfit"], "date": meta["machine"]["date"]}
    groups: dict[tuple[str, str], list[str]] = {}
    for part in kept:
        source = next((g for g in meta.get("reused") or () if part in g["parts"]), origin)
        groups.setdefault((source["archfit"], source["date"]), []).append(part)
    return [
        {"parts": parts, "archfit": archfit, "date": date}
        for (archfit, date), parts in groups.items()
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, help="checkout whose extender/ to measure")
    parser.add_argument("--quick", action="store_true", help="small sizes, short loads")
    parser.add_argument("--only", nargs="+", choices=NAMES, help="run only these")
    parser.add_argument("--doc", type=Path, default=DOC, help="where to write the Markdown")
    parser.add_argument("--baseline", type=Path, help="results.json of a run to compare with")
    parser.add_argument(
        "--reuse", type=Path, help="results.json whose parts fill in those not run (--only)"
    )
    parser.add_argument("--before", type=Path, help="a checkout whose archfit runs beside")
    parser.add_argument(
        "--scale-before",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="measure --before's archfit in the scale benchmark too (default: yes)",
    )
    for flag, metavar in (
        ("--peer", "NAME=BINARY"),
        ("--peer-arg", "NAME=ARG"),
        ("--peer-env", "NAME=KEY=VALUE"),
    ):
        parser.add_argument(
            flag, action="append", default=[], metavar=metavar, help="bench/webhook_latency"
        )
    args = parser.parse_args(argv)
    peer_args = [
        f"{flag}={value}"
        for flag, values in (
            ("--peer", args.peer),
            ("--peer-arg", args.peer_arg),
            ("--peer-env", args.peer_env),
        )
        for value in values
    ]
    try:  # a peer that cannot start fails now, not an hour in, when its rounds begin
        peers.parse_peers(args.peer, args.peer_arg, args.peer_env)
    except ValueError as error:
        parser.error(str(error))
    source = args.source.resolve() if args.source else None
    before = args.before.resolve() if args.before else None
    selected = args.only or list(NAMES)

    def say(line: str) -> None:
        print(f"bench: {line}", file=sys.stderr, flush=True)

    arguments = " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    results: dict[str, Any] = {
        "meta": {
            "machine": harness.machine(),
            "archfit": f"{harness.git_commit(source or harness.ROOT)}",
            "archfit_path": harness.imported_from(source),
            "bench": harness.git_commit(harness.ROOT),
            "arguments": arguments,
            "quick": args.quick,
            "before": harness.git_commit(before) if before is not None else None,
            "peers": [value.partition("=")[0] for value in args.peer],
            "problems": [],
        }
    }
    say(f"measuring archfit from {results['meta']['archfit_path']}")
    if args.reuse is not None:
        earlier = json.loads(args.reuse.read_text())
        kept = [name for name in NAMES if name not in selected and name in earlier]
        results.update({name: earlier[name] for name in kept})
        results["meta"]["reused"] = kept_from(earlier, kept)
    quick = args.quick
    runners: dict[str, Callable[[], Any]] = {
        "scheduler_throughput": lambda: throughput(source, quick, before),
        "request_cost": lambda: request_cost.run(
            source=source,
            sweep=request_cost.QUICK_SWEEP if quick else request_cost.SWEEP,
            seconds=2.0 if quick else 10.0,
            orders=request_cost.QUICK_ORDERS if quick else request_cost.ORDERS,
            progress=say,
        ),
        "memory": lambda: memory.run(
            source=source,
            nodes=memory.QUICK_NODES if quick else memory.NODES,
            images=memory.QUICK_IMAGES if quick else memory.IMAGES,
            progress=say,
        ),
        "startup": lambda: startup.run(source=source, runs=5 if quick else 10, progress=say),
        "scale": lambda: scale.run(
            sizes=scale.QUICK_SIZES if quick else scale.SIZES,
            patches=scale.QUICK_PATCHES if quick else scale.PATCHES,
            progress=say,
            before=before if args.scale_before else None,
        ),
        "others": lambda: others(source, quick, before, peer_args),
    }
    failed = False
    for name in NAMES:
        if name not in selected:
            continue
        say(f"{name}…")
        try:
            results[name] = runners[name]()
        except Skipped as skipped:
            say(str(skipped))
            results["meta"]["problems"].append(str(skipped))
        except Exception as error:  # one broken benchmark must not lose the others' figures
            traceback.print_exc()
            failed = True
            results["meta"]["problems"].append(f"{name} failed: {type(error).__name__}: {error}")

    pictures_dir = args.doc.parent / args.doc.stem
    baseline = json.loads(args.baseline.read_text()) if args.baseline else None
    pictures = report.plots(results, pictures_dir, baseline)
    pictures_dir.mkdir(parents=True, exist_ok=True)
    (pictures_dir / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    args.doc.write_text(report.render(results, pictures, pictures_dir.name, baseline))
    say(f"wrote {args.doc} and {len(pictures)} plots under {pictures_dir}")
    return 1 if failed else 0


if __name__ == "__main__":
    os.environ.setdefault("MPLBACKEND", "Agg")
    sys.exit(main())
