"""docs/benchmarks.md from the results of one `python -m bench` run: tables and PNG plots.

The results are a JSON-able mapping: `meta` (machine, commits, command) and one entry per
benchmark holding its rows. A second run's results (`baseline`) add a before column to
the goals table, so before and after come from the same machine and the same scripts.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.harness import format_cell

Results = Mapping[str, Any]

# Issue 21's goals: (goal, target text, how to read the figure, whether lower is better,
# bound; None: shown for comparison, judged by nothing).
GOALS: tuple[tuple[str, str, str, bool, float | None], ...] = (
    (
        "1. scheduler throughput, archfit / do-nothing extender (median of runs)",
        "≥ 0.9",
        "throughput",
        False,
        0.9,
    ),
    (
        "1. the same, archfit's mismatch watcher off (the extender alone)",
        "≥ 0.9",
        "throughput_no_watcher",
        False,
        0.9,
    ),
    (
        "2. CPU per call, 500 names, new order, worst case, concurrency 1 (ms)",
        "≤ 0.3",
        "cpu_names_c1",
        True,
        0.3,
    ),
    ("2. the same at concurrency 16 (ms)", "≤ 0.3", "cpu_names", True, 0.3),
    (
        "2. p99 at concurrency 1, 500 names, new order, worst case (ms)",
        "≤ 1",
        "p99_names",
        True,
        1.0,
    ),
    ("2. CPU per call, 5,000 names, new order, worst case (ms)", "≤ 1.5", "cpu_5000", True, 1.5),
    (
        "2. for comparison: 500 names, same order, worst case, concurrency 1 (ms)",
        "-",
        "cpu_same_c1",
        True,
        None,
    ),
    (
        "3. full-Node call CPU, 500 nodes, worst case, concurrency 1 (ms)",
        "≤ 2.5",
        "cpu_full",
        True,
        2.5,
    ),
    (
        "4. RSS after 10,000 calls in distinct orders, 500 nodes (MB)",
        "≤ 100",
        "rss_orders",
        True,
        100,
    ),
    ("4. RSS, 5000 nodes + 10,000 images (MB)", "≤ 110", "rss", True, 110),
    ("5. exec to ready, median (ms)", "≤ 300", "startup", True, 300),
    ("6. webhook's added latency per pod CREATE, warm, p50 (ms)", "≤ 1", "webhook", True, 1.0),
    (
        "6. of which archfit's share: less a Go webhook giving archfit's very answer (ms)",
        "-",
        "webhook_share",
        True,
        None,
    ),
    (
        "32. webhook CPU per 1,000 warm pods, archfit / Go do-nothing webhook",
        "≤ 2",
        "webhook_cpu_times_go",
        True,
        2.0,
    ),
    ("32. RSS of archfit serve after the webhook's pods (MiB)", "≤ 70", "webhook_rss", True, 70),
    (
        "32. cold added p50 less (warm added p50 + one registry round trip) (ms)",
        "≤ 0",
        "webhook_cold_over",
        True,
        0.0,
    ),
    (
        "43. webhook warm added p50, archfit less the lowest peer's, same run (ms)",
        "≤ 0",
        "peer_warm_over",
        True,
        0.0,
    ),
    (
        "43. webhook cold added p50, archfit less the lowest peer's, same run (ms)",
        "≤ 0",
        "peer_cold_over",
        True,
        0.0,
    ),
    (
        "43. webhook CPU per 1,000 warm pods, archfit less the lowest peer's (s)",
        "≤ 0",
        "peer_cpu_over",
        True,
        0.0,
    ),
    ("43. largest scale size: peak RSS (MiB)", "≤ 100", "scale_peak", True, 100.0),
    ("43. largest scale size: exec to ready (s)", "≤ 2", "scale_ready", True, 2.0),
    ("43. largest scale size: CPU per pod event (µs)", "≤ 50", "scale_event", True, 50.0),
    (
        "43. largest scale size: longest /healthz round trip, start, relist, events (ms)",
        "≤ 10",
        "scale_stall",
        True,
        10.0,
    ),
    (
        "43. largest scale size: webhook p99 during a relist / quiet p99",
        "≤ 2",
        "scale_webhook",
        True,
        2.0,
    ),
    ("43. largest scale size: CPU of a pod list (µs a pod)", "≤ 25", "scale_list", True, 25.0),
)

NO_WATCHER = "archfit-no-watcher"
BEFORE_PROFILED = "archfit-before-profiled"
"""The `--before` checkout's profiled throughput row: the breakdown's before column."""
"""bench/scheduler_throughput's variant without the mismatch watcher."""
_WARM_WEBHOOK = re.compile(
    r"^(?:archfit|webhook), warm cache\s+[\d.]+\s+[\d.]+\s+(-?[\d.]+)\s*$", re.M
)
_WEBHOOK_SHARE = re.compile(r"archfit's share \(warm less Go with its answer\): ([+-]?[\d.]+) ms")
# bench/webhook_latency's process cost table: archfit's row (CPU s per 1,000 pods, x Go,
# system share, idle, RSS MiB), and its cold target line (the bound, then the figure).
_WEBHOOK_COST = re.compile(r"^archfit\s+[\d.]+\s+([\d.]+)\s+\d+%\s+[\d.]+\s+([\d.]+)\s*$", re.M)
_WEBHOOK_COLD = re.compile(
    r"^  archfit: cold added p50 <= warm added p50 \+ one round trip \((-?[\d.]+) ms\): "
    r"(-?[\d.]+) ms",
    re.M,
)


def goal_figures(results: Results) -> dict[str, float | None]:
    """The figure each goal is judged by, or None when that benchmark did not run."""
    figures: dict[str, float | None] = dict.fromkeys((g[2] for g in GOALS), None)
    cost = results.get("request_cost")
    if cost:
        from bench.request_cost import SAME

        names = [r for r in cost["cases"] if "full Nodes" not in r["case"]]
        new = [r for r in names if SAME not in r["case"]]
        same = [r for r in names if SAME in r["case"]]
        full = [r for r in cost["cases"] if "full Nodes" in r["case"]]
        figures["cpu_names_c1"] = max((r["cpu_ms_c1"] for r in new), default=None)
        figures["cpu_names"] = max((r["cpu_ms"] for r in new), default=None)
        figures["p99_names"] = max((r["p99_ms_c1"] for r in new), default=None)
        figures["cpu_same_c1"] = max((r["cpu_ms_c1"] for r in same), default=None)
        figures["cpu_full"] = max((r["cpu_ms_c1"] for r in full), default=None)
        most = [
            r
            for r in cost["sweep"]
            if r["nodes"] == 5000 and "full Nodes" not in r["case"] and SAME not in r["case"]
        ]
        figures["cpu_5000"] = max((r["cpu_ms"] for r in most), default=None)
        if cost.get("orders"):
            figures["rss_orders"] = cost["orders"][0]["rss_mb"]
    memory = results.get("memory")
    if memory:
        figures["rss"] = memory["summary"][0]["rss_mb"]
    startup = results.get("startup")
    if startup:
        figures["startup"] = startup["startup"][0]["median_ms"]
    webhook = (results.get("others") or {}).get("webhook_latency.py") or ""
    if found := _WARM_WEBHOOK.search(webhook):
        figures["webhook"] = float(found.group(1))
    if found := _WEBHOOK_SHARE.search(webhook):
        figures["webhook_share"] = float(found.group(1))
    if found := _WEBHOOK_COST.search(webhook):
        figures["webhook_cpu_times_go"] = float(found.group(1))
        figures["webhook_rss"] = float(found.group(2))
    if found := _WEBHOOK_COLD.search(webhook):
        figures["webhook_cold_over"] = float(found.group(2)) - float(found.group(1))
    figures.update(peer_figures(webhook))
    figures.update(scale_figures(results))
    for key, ratios in throughput_ratios(results).items():
        figures[key] = statistics.median(ratios) if ratios else None
    return figures


_PEER_TARGET = re.compile(
    r"^  archfit: (.+?) <= every peer's \(lowest [-\d.]+\): [-\d.]+ \(([+-][\d.]+)\)", re.M
)
_PEER_KEYS = {
    "warm added p50": "peer_warm_over",
    "cold added p50": "peer_cold_over",
    "CPU per 1,000 warm pods": "peer_cpu_over",
}


def peer_figures(webhook: str) -> dict[str, float]:
    """bench/webhook_latency's issue 43 lines: archfit less the lowest peer, when peers ran."""
    return {
        _PEER_KEYS[found.group(1)]: float(found.group(2))
        for found in _PEER_TARGET.finditer(webhook)
        if found.group(1) in _PEER_KEYS
    }


def scale_figures(results: Results) -> dict[str, float | None]:
    """bench/scale's largest size (most pods, then most nodes), as its goals read it."""
    rows = (results.get("scale") or {}).get("rows") or []
    if not rows:
        return {}
    top = max(rows, key=lambda r: (r["pods"], r["nodes"]))
    stalls = [top.get(k) for k in ("stall_start_ms", "stall_relist_ms", "stall_events_ms")]
    quiet, relist = top.get("webhook_quiet_p99_ms"), top.get("webhook_relist_p99_ms")
    return {
        "scale_peak": top.get("peak_mib"),
        "scale_ready": top.get("ready_s"),
        "scale_event": top.get("event_cpu_us"),
        "scale_stall": max((s for s in stalls if s is not None), default=None),
        "scale_webhook": round(relist / quiet, 2) if quiet and relist else None,
        "scale_list": top.get("relist_cpu_us_per_pod"),
    }


def throughput_ratios(results: Results) -> dict[str, list[float]]:
    """Each throughput goal's ratio per run, lowest first: in each run the best of the
    variant's rounds (the round at the shipped qps limit caps every fast variant alike)."""
    rows = results.get("scheduler_throughput") or []
    found: dict[str, list[float]] = {}
    for key, variant in (("throughput", "archfit"), ("throughput_no_watcher", NO_WATCHER)):
        best: dict[int, float] = {}
        for r in rows:
            if r.get("variant") == variant and r.get("ratio_noop") is not None:
                number = r.get("run", 1)
                best[number] = max(best.get(number, 0.0), r["ratio_noop"])
        found[key] = sorted(best.values())
    return found


def _spread_note(results: Results, key: str) -> str:
    """What follows a figure measured in more than one run: its range and how many runs."""
    ratios = throughput_ratios(results).get(key) or []
    if len(ratios) < 2:
        return ""
    return f" ({format_cell(ratios[0])} to {format_cell(ratios[-1])}, {len(ratios)} runs)"


def _figure(key: str, value: float | None) -> str:
    if value is None:
        return "-"
    return format_cell(float(value))


def _met(value: float | None, lower: bool, bound: float | None) -> str:
    if value is None or bound is None:
        return "-"
    return "yes" if (value <= bound if lower else value >= bound) else "no"


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """Rows as a Markdown table; dict cells (CPU per process) become `name ms, …`."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = []
        for column in columns:
            value = row.get(column)
            if isinstance(value, Mapping):
                value = ", ".join(f"{k} {format_cell(float(v))}" for k, v in value.items())
            cells.append(format_cell(value))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plots(
    results: Results, directory: Path, baseline: Results | None = None
) -> list[tuple[str, str]]:
    """Draw the PNGs into `directory`; (title, file name) of each drawn. The CPU plot shows
    the `baseline` run's sweep too, dashed, when it has one."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    drawn = []

    def save(figure: Any, name: str, title: str) -> None:
        figure.tight_layout()
        figure.savefig(directory / name, dpi=110)
        plt.close(figure)
        drawn.append((title, name))

    cost = results.get("request_cost")
    if cost and cost["sweep"]:
        by_case: dict[str, list[Mapping[str, Any]]] = {}
        for row in cost["sweep"]:
            by_case.setdefault(row["case"], []).append(row)
        figure, axis = plt.subplots(figsize=(7, 4.2))
        for case, rows in by_case.items():
            xs = [r["nodes"] for r in rows]
            (line,) = axis.plot(xs, [r["p50_ms"] for r in rows], marker="o", label=f"{case} p50")
            axis.plot(
                xs,
                [r["p99_ms"] for r in rows],
                marker="x",
                linestyle="--",
                color=line.get_color(),
                label=f"{case} p99",
            )
        counts = sorted({r["nodes"] for r in cost["sweep"]})
        _node_axes(axis, "latency at concurrency 1 (ms)", counts)
        save(figure, "latency-vs-nodes.png", "Latency against node count")
        before: dict[str, list[Mapping[str, Any]]] = {}
        for row in ((baseline or {}).get("request_cost") or {}).get("sweep", []):
            before.setdefault(row["case"], []).append(row)
        figure, axis = plt.subplots(figsize=(7, 5.2) if before else (7, 4.2))
        for case, rows in by_case.items():
            (line,) = axis.plot(
                [r["nodes"] for r in rows], [r["cpu_ms"] for r in rows], marker="o", label=case
            )
            if case in before:
                axis.plot(
                    [r["nodes"] for r in before[case]],
                    [r["cpu_ms"] for r in before[case]],
                    marker="x",
                    linestyle="--",
                    color=line.get_color(),
                    label=f"{case}, before",
                )
        _node_axes(axis, "archfit CPU per request (ms)", counts)
        save(figure, "cpu-vs-nodes.png", "CPU per request against node count")
    memory = results.get("memory")
    if memory:
        for key, name, title in (
            ("nodes", "rss-vs-nodes.png", "RSS against nodes indexed"),
            ("images", "rss-vs-images.png", "RSS against images resolved (with the most nodes)"),
        ):
            rows = memory[key]
            figure, axis = plt.subplots(figsize=(7, 4.2))
            xs = [r[key] for r in rows]
            axis.plot(xs, [r["rss_mb"] for r in rows], marker="o", label="RSS")
            axis.plot(
                xs, [r["peak_mb"] for r in rows], marker="x", linestyle="--", label="peak (VmHWM)"
            )
            most = memory["summary"][0]["nodes"]
            axis.set_xlabel(
                "nodes indexed" if key == "nodes" else f"images resolved ({most} nodes)"
            )
            axis.axhline(110, color="grey", linestyle=":", label="goal: RSS ≤ 110 MB")
            axis.axhline(130, color="grey", linestyle="-.", label="goal: peak ≤ 130 MB")
            axis.set_ylabel("MB")
            axis.set_ylim(0, max(140, *(r["peak_mb"] * 1.1 for r in rows)))
            axis.grid(True, alpha=0.3)
            axis.legend()
            save(figure, name, title)
    return drawn


def _node_axes(axis: Any, ylabel: str, counts: Sequence[int]) -> None:
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_xticks(list(counts), [str(c) for c in counts])
    axis.minorticks_off()
    axis.set_xlabel("nodes in the request")
    axis.set_ylabel(ylabel)
    axis.grid(True, which="both", alpha=0.3)
    axis.legend(fontsize="small")


def render(
    results: Results,
    pictures: Sequence[tuple[str, str]],
    picture_dir: str,
    baseline: Results | None = None,
) -> str:
    """The whole Markdown document."""
    meta = results["meta"]
    out = [
        "# Benchmarks",
        "",
        "Written by `python -m bench` (bench/__main__.py); do not edit by hand. What each "
        "benchmark starts and measures is in its script's docstring; the parts are real "
        "(docs/architecture.md): etcd and kube-apiserver, a docker-registry, `archfit "
        "serve` in its own process, and a Go load generator (bench/loadgen).",
        "",
        "## How to reproduce",
        "",
        *reproduce(meta, baseline),
        "",
        "Each benchmark also runs alone: `.venv/bin/python -m bench.request_cost --help` "
        "(and `memory`, `startup`, `scheduler_throughput`, `scale`).",
        "",
        "Other admission webhooks run beside archfit in bench/webhook_latency's rounds when "
        "given: bring each one's public source (adevinta/noe, arturhoo/k8smultiarcher), build "
        "it into the bench cache with `bash bench/build-peers.sh ../noe ../k8smultiarcher` "
        "(its dependencies from the Go module proxy; it prints `NAME=BINARY` per peer) and "
        "pass each line as `--peer NAME=BINARY`. bench/peers.py holds how each is started "
        "(flags, environment, certificates, kubeconfig); `--peer-arg NAME=ARG` and "
        "`--peer-env NAME=KEY=VALUE` describe a webhook it has no recipe for.",
        "",
        "## This run",
        "",
        table(
            [meta["machine"] | {"archfit": meta["archfit"], "bench": meta["bench"]}],
            ["cores", "cpu", "kernel", "python", "load", "date", "archfit", "bench"],
        ),
        "",
        "`archfit` is the checkout measured (`--source`), `bench` the one whose scripts ran; "
        "`load` is the 1, 5 and 15 minute load average when the run began.",
    ]
    for reused in meta.get("reused") or ():
        out += [
            "",
            f"Kept from an earlier run (archfit {reused['archfit']}, {reused['date']}, "
            "the same machine): " + ", ".join(f"`{part}`" for part in reused["parts"]) + ". "
            "This run measured the other parts again (`--only ... --reuse`).",
        ]
    if baseline is not None:
        out += [
            "",
            f"The before column is archfit {baseline['meta']['archfit']}, measured by "
            f"the same scripts on {baseline['meta']['machine']['date']}.",
        ]
    out += ["", "## Goals (issues 21, 32 and 43)", ""]
    if meta.get("quick"):
        out += [
            "**A `--quick` run**: fewer nodes and images and shorter loads than the goals "
            "name, on whatever else the machine was doing. It proves the pipeline; its "
            "figures are not the ones to quote.",
            "",
        ]
    now, before = goal_figures(results), goal_figures(baseline) if baseline else None
    columns = ["goal", "target", *(["before"] if before else []), "this run", "met"]
    rows = []
    for goal, target, key, lower, bound in GOALS:
        row = {
            "goal": goal,
            "target": target,
            "this run": _figure(key, now[key]) + _spread_note(results, key),
        }
        if before and baseline is not None:
            row["before"] = _figure(key, before[key]) + _spread_note(baseline, key)
        row["met"] = _met(now[key], lower, bound)
        rows.append(row)
    out.append(table(rows, columns))
    out += _sections(results, pictures, picture_dir, baseline)
    for problem in meta.get("problems", []):
        out += ["", f"> {problem}"]
    return "\n".join(out) + "\n"


def reproduce(meta: Mapping[str, Any], baseline: Results | None) -> list[str]:
    """The commands that make this document, in the clone, with no path of the machine
    that ran them: the run's own paths (--doc, --baseline) are left out."""
    quick = " --quick" if meta.get("quick") else ""
    lines = [
        "```sh",
        "python3 -m venv .venv && .venv/bin/pip install --require-hashes -r requirements-test.lock",
        ".venv/bin/pip install --no-deps -e .",
        "# Go >= 1.26 on PATH builds the control plane and the load generator once",
    ]
    beside = ""
    if meta.get("before"):
        lines += [
            f"# the archfit-before rows: archfit {meta['before']}, run beside this one",
            f"git worktree add ../archfit-beside {meta['before']}",
        ]
        beside = " --before ../archfit-beside"
    if meta.get("peers"):
        lines += [
            "# the peers: each one's source checked out by hand, built into the bench cache",
            "peers=$(bash bench/build-peers.sh "
            + " ".join(f"../{name}" for name in meta["peers"])
            + " | sed 's/^/--peer=/')",
        ]
        beside += " $peers"
    if baseline is None:
        return [*lines, f".venv/bin/python -m bench{quick}{beside}", "```"]
    before = baseline["meta"]["archfit"]
    return [
        *lines,
        f"# the before column: these scripts measure archfit {before}, checked out beside",
        f"git worktree add ../archfit-before {before} && mkdir -p ../bench-before",
        f".venv/bin/python -m bench{quick} --source ../archfit-before"
        " --doc ../bench-before/benchmarks.md",
        "# this run, beside it",
        f".venv/bin/python -m bench{quick}{beside}"
        " --baseline ../bench-before/benchmarks/results.json",
        "```",
    ]


def _sections(
    results: Results,
    pictures: Sequence[tuple[str, str]],
    picture_dir: str,
    baseline: Results | None = None,
) -> list[str]:
    from bench import memory, request_cost, startup

    out: list[str] = []
    pictured = {name: title for title, name in pictures}

    def picture(name: str) -> list[str]:
        return [f"![{pictured[name]}]({picture_dir}/{name})", ""] if name in pictured else []

    throughput = results.get("scheduler_throughput")
    if throughput:
        out += [
            "",
            "## Scheduler throughput (goal 1)",
            "",
            "bench/scheduler_throughput.py: a real kube-scheduler binding pods to nodes; "
            "binds timed from its log.",
            "",
        ]
        columns = [
            "variant",
            "run",
            "qps",
            "pods_per_s",
            "span_s",
            "cpu_ms_per_pod",
            "ratio_noop",
            "ratio_none",
        ]
        out.append(table(throughput, columns))
        before_rows = (baseline or {}).get("scheduler_throughput") or []
        out += breakdown_section(throughput, before_rows)
    cost = results.get("request_cost")
    if cost:
        out += [
            "",
            "## Cost per request (goals 2, 3, 6)",
            "",
            "bench/request_cost.py: archfit pinned to one core, the Go load generator on "
            "the other. `req_per_s`, `p50_ms`, `p99_ms`, `cpu_ms` (archfit's CPU time per "
            f"request) at concurrency {request_cost.CONCURRENCY}; `_c1` columns at "
            "concurrency 1, without queueing. Every call lists the nodes in a new order, "
            "as kube-scheduler's parallel filters do, unless the case says `same order`.",
            "",
        ]
        out.append(table(cost["cases"], request_cost.CASE_COLUMNS))
        out += ["", "### Against the node count (concurrency 1)", ""]
        out.append(table(cost["sweep"], request_cost.SWEEP_COLUMNS))
        out.append("")
        out += picture("latency-vs-nodes.png") + picture("cpu-vs-nodes.png")
        if cost.get("orders"):
            out += [
                "### Memory after calls in distinct orders (goal 4)",
                "",
                "A fresh archfit with that many nodes indexed, RSS when it first answered "
                "(`rss_before_mb`) and after one filter call per order.",
                "",
                table(cost["orders"], request_cost.ORDERS_COLUMNS),
                "",
            ]
        out += ["### Event loop (`server.eventLoop`), filter multi-arch", ""]
        out.append(table(cost["event_loop"], request_cost.LOOP_COLUMNS))
    mem = results.get("memory")
    if mem:
        out += [
            "",
            "## Memory (goal 4)",
            "",
            "bench/memory.py: archfit with default settings; nodes indexed from the "
            "apiserver, images resolved from the registry through filter requests. "
            "`bytes_per_node` is the RSS difference between the most nodes and none, per "
            "node; `cache_holds_images` counts the images answered again without asking "
            "the registry.",
            "",
        ]
        out.append(table(mem["summary"], memory.SUMMARY_COLUMNS))
        out += ["", table(mem["nodes"], ("nodes", "rss_mb", "peak_mb")), ""]
        out += picture("rss-vs-nodes.png")
        out += [table(mem["images"], ("images", "rss_mb", "peak_mb")), ""]
        out += picture("rss-vs-images.png")
    start = results.get("startup")
    if start:
        out += [
            "",
            "## Start to ready (goal 5)",
            "",
            "bench/startup.py: exec to the first 200 from /readyz, kubernetes.mode off; "
            "`kubernetes_import_ms` from `python -X importtime`.",
            "",
        ]
        out.append(table(start["startup"], startup.COLUMNS))
    out += scale_section(results.get("scale"))
    out += peer_section((results.get("others") or {}).get("webhook_latency.py") or "")
    others = results.get("others")
    if others:
        out += [
            "",
            "## Other benchmarks",
            "",
            "Run from the measured checkout's own bench/ scripts, their output verbatim.",
        ]
        for name, text in others.items():
            out += ["", f"### {name}", "", "```", text.rstrip(), "```"]
    return out


def breakdown_section(
    rows: Sequence[Mapping[str, Any]], baseline_rows: Sequence[Mapping[str, Any]] | None
) -> list[str]:
    """The profiled throughput row's CPU per pod by library (perf) and its GIL time by what
    archfit does (py-spy), beside the `--before` checkout's profiled row of the same run, else
    a baseline's (bench/in_situ.py)."""
    profiled = [r for r in rows if r.get("cpu_breakdown")]
    mine = next((r for r in profiled if r["variant"] != BEFORE_PROFILED), None)
    if mine is None:
        return []
    theirs = next((r for r in profiled if r["variant"] == BEFORE_PROFILED), None) or next(
        (r for r in baseline_rows or () if r.get("cpu_breakdown")), None
    )
    total = mine["cpu_ms_per_pod"].get("extender")
    parts = mine["cpu_breakdown"]
    out = [
        "",
        "### Where archfit's CPU per pod goes, in the throughput run",
        "",
        f"The `{mine['variant']}` row, sampled from outside through the run: archfit's "
        f"{format_cell(total)} ms of CPU per pod split by the library it ran in (perf's "
        "cpu-clock samples, on CPU only, the kernel's side included), and the time the GIL "
        f"was held by what archfit was doing (py-spy --gil, {parts['samples']} samples, "
        f"{format_cell(parts['covered'])}x the CPU: above 1, the GIL was held while its thread "
        "waited for a core).",
        "",
    ]
    if theirs is not None:
        out += [
            f"The before column is the `{theirs['variant']}` row "
            f"({format_cell(theirs['cpu_ms_per_pod'].get('extender'))} ms of CPU per pod), "
            "sampled the same way.",
            "",
        ]
    for key, label in (("cpu_by_library", "CPU ms per pod"), ("cpu_breakdown", "GIL ms per pod")):
        now = mine.get(key) or {}
        now = now.get("ms_per_unit", now) if key == "cpu_breakdown" else now
        if not now:
            continue
        before = (theirs or {}).get(key) or {}
        before = before.get("ms_per_unit", before) if key == "cpu_breakdown" else before
        names = list(dict.fromkeys([*now, *before]))
        table_rows = []
        for name in names:
            row = {"part": name, label: now.get(name, 0.0)}
            if theirs:
                row["before"] = before.get(name, 0.0)
            table_rows.append(row)
        out += [table(table_rows, ["part", *(["before"] if theirs else []), label]), ""]
    return out


def scale_section(result: Mapping[str, Any] | None) -> list[str]:
    """bench/scale's table and its slope per 10,000 pods."""
    if not result or not result.get("rows"):
        return []
    from bench import scale

    rows, columns = scale.with_before(result)
    out = [
        "",
        "## Scale (issue 43)",
        "",
        "bench/scale.py: Nodes and bound Pods (realistic, with statuses) created in a real "
        "kube-apiserver, 100 namespaces; a fresh archfit per size, leading every watch. "
        "`relist`: kube-apiserver restarted, every watch lists again. The CPU per pod event "
        "and per relisted pod are taken with nothing else asking archfit for anything; the "
        "stalls (the longest /healthz round trip, one every 10 ms on a kept connection) and "
        "the webhook's p99 (POST /mutate every 20 ms) in a second relist and round of "
        "patches; `gc_max_ms`, the archfit_gc_pause_seconds bucket the longest garbage "
        "collection in those windows fell in, so a stall can be told from a collection. "
        "Statuses are written, so the watches decode container statuses as in a "
        "cluster with kubelets. With `--before DIR`, DIR's archfit is measured at each size "
        "too, just before this one's, on the same cluster.",
        "",
        table(rows, columns),
        *(f"\nNot measured: {problem}" for problem in result.get("problems") or ()),
    ]
    profiled = [r for r in result["rows"] if r.get("relist_profile")]
    if profiled:
        top = max(profiled, key=lambda r: (r["pods"], r["nodes"]))
        parts = top["relist_profile"]
        out += [
            "",
            f"The relist at {top['nodes']} nodes and {top['pods']} pods, sampled "
            "(bench/in_situ.py): archfit's CPU by library, and the GIL by what held it (ms, "
            "the whole relist):",
            "",
            table(
                [{"part": k, "CPU ms": v} for k, v in parts["cpu_ms_by_library"].items()]
                + [{"part": k, "GIL ms": v} for k, v in parts["gil"]["ms_per_unit"].items()],
                ("part", "CPU ms", "GIL ms"),
            ),
        ]
    if result.get("slopes"):
        out += [
            "",
            "Slope per 10,000 pods, between the two largest sizes of one node count:",
            "",
            table(result["slopes"], ("figure", "from", "to", "per_10k_pods", "faster_than_linear")),
        ]
    return out


def peer_section(webhook: str) -> list[str]:
    """bench/webhook_latency's peer table, when peers ran beside archfit."""
    start = webhook.find("peers, this run")
    if start < 0:
        return []
    return [
        "",
        "## Beside the other admission webhooks (issue 43)",
        "",
        "bench/webhook_latency.py `--peer`: each peer built from its source by "
        "bench/build-peers.sh, called by the same kube-apiserver in the same alternating "
        "rounds as archfit, its cold pods naming new tags of the same TLS registry.",
        "",
        "```",
        webhook[start:].rstrip(),
        "```",
    ]
