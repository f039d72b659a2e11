"""The pure parts of the issue-43 benchmarks: the in-situ breakdown, the peers' command line,
the scale curve's slope, and what docs/benchmarks.md's generator makes of them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from bench import __main__ as bench_main
from bench import in_situ, peers, report, scale
from bench.harness import ROOT
from tests.e2e.archfit import Archfit

LOOP = "_run_once (asyncio/base_events.py:1900)"
VERB = "filter (extender/scheduler/verbs.py:40)"
LOG = "info (structlog/_native.py:10)"
WATCH = "_apply (extender/kube/pod_watch.py:80)"


def test_a_log_line_written_inside_a_verb_is_counted_as_logging_not_as_the_verb() -> None:
    """The first category a stack's frames name wins, and logging comes before the verbs."""
    assert in_situ.category(f"{LOOP};{VERB};{LOG}") == "logging per call (structlog, explain)"


def test_the_breakdown_counts_gil_samples_per_unit_and_compares_them_with_the_cpu() -> None:
    """100 samples at 100 Hz are 1 s of GIL held: over 1,000 pods, 0.6 and 0.4 ms each; over
    a 0.5 s CPU the GIL was held twice as long as the CPU ran (waits for a core)."""
    stacks = {f"{LOOP};{VERB}": 60, f"thread;{WATCH}": 40}

    parts = in_situ.breakdown(stacks, cpu_seconds=0.5, per=1000, rate=100)

    assert parts.ms_per_unit == {
        "the calls' own work (verbs, lookups, decisions, wire)": 0.6,
        "pod watches (decode, the policy's pod index, watcher, capacity)": 0.4,
    }
    assert (100, 2.0) == (parts.samples, parts.covered)


def test_perf_samples_are_split_by_library_and_scaled_to_the_measured_cpu() -> None:
    """`perf report --sort dso` shares grouped; 2 s of CPU over 1,000 pods is 2 ms each."""
    text = (
        "    50.00%  [kernel.kallsyms]\n    25.00%  libpython3.11.so.1.0\n    25.00%  libssl.so.3\n"
    )

    found = in_situ.by_library(in_situ.dso_shares(text), cpu_seconds=2.0, per=1000)

    assert found == {
        "the kernel: sockets, loopback TCP, scheduling, page faults": 1.0,
        "the interpreter: Python code": 0.5,
        "TLS: OpenSSL": 0.5,
    }


def test_py_spy_raw_output_is_read_as_stacks_and_counts() -> None:
    """The raw format's `frames count` lines, a frame holding spaces included."""
    text = f"{LOOP};{VERB} 7\n{LOOP};{VERB} 3\nnot a line\n"

    assert {f"{LOOP};{VERB}": 10} == dict(in_situ.collapsed(text))


def _executable(tmp_path: Path) -> Path:
    binary = tmp_path / "webhook"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    return binary


def test_a_known_peer_is_started_with_its_recipe_and_the_extra_arguments(tmp_path: Path) -> None:
    """noe keeps its fixed port and cert-dir flag; --peer-arg adds to them."""
    binary = _executable(tmp_path)

    (spec,) = peers.parse_peers([f"noe={binary}"], ["noe=--v=2"])

    assert ("noe", 8443, "--v=2") == (spec.name, spec.recipe.fixed_port, spec.recipe.args[-1])
    assert "--cert-dir={cert_dir}" in spec.recipe.args


def test_a_peer_with_no_recipe_and_no_arguments_is_refused(tmp_path: Path) -> None:
    """A name the bench cannot start is said at once, not met as a timeout later."""
    binary = _executable(tmp_path)

    with pytest.raises(ValueError, match="no recipe"):
        peers.parse_peers([f"other={binary}"])


def test_an_unknown_peer_is_started_from_its_arguments_and_environment(tmp_path: Path) -> None:
    """--peer-env NAME=KEY=VALUE keeps the value's own `=` signs."""
    binary = _executable(tmp_path)

    (spec,) = peers.parse_peers([f"other={binary}"], ["other=-listen=:{port}"], ["other=OPTS=a=b"])

    assert (("-listen=:{port}",), {"OPTS": "a=b"}) == (spec.recipe.args, dict(spec.recipe.env))


def test_a_peer_binary_that_is_not_executable_is_refused(tmp_path: Path) -> None:
    """A path that is not there is refused before anything starts."""
    with pytest.raises(ValueError, match="not an executable"):
        peers.parse_peers([f"noe={tmp_path / 'missing'}"])
    assert not os.access(tmp_path / "missing", os.X_OK)


def test_a_peer_given_as_its_source_folder_is_refused(tmp_path: Path) -> None:
    """A folder is executable to os.access: the peer's checkout passed for its binary
    failed an hour into `python -m bench`, when the webhook rounds began."""
    (tmp_path / "noe").mkdir()
    with pytest.raises(ValueError, match="not an executable file"):
        peers.parse_peers([f"noe={tmp_path / 'noe'}"])
    assert os.access(tmp_path / "noe", os.X_OK)


def test_the_scale_slope_is_taken_where_only_the_pods_grow_and_flags_faster_growth() -> None:
    """5k x 50k to 5k x 100k: +10 MiB over 50k pods is 2 per 10k; a figure that triples
    while the pods double grows faster than linear."""
    rows = [
        {"nodes": 1000, "pods": 10_000, "rss_mib": 40.0, "event_cpu_us": 10.0},
        {"nodes": 5000, "pods": 50_000, "rss_mib": 60.0, "event_cpu_us": 20.0},
        {"nodes": 5000, "pods": 100_000, "rss_mib": 70.0, "event_cpu_us": 60.0},
    ]

    found = {s["figure"]: s for s in scale.slopes(rows)}

    assert (2.0, False) == (
        found["rss_mib"]["per_10k_pods"],
        found["rss_mib"]["faster_than_linear"],
    )
    assert found["event_cpu_us"]["faster_than_linear"]
    assert "5000x50000" == found["rss_mib"]["from"]


def test_the_longest_collection_in_a_window_is_the_first_bucket_holding_all_of_its_own() -> None:
    """Cumulative buckets summed over generations: two collections in the window, one under
    5 ms and one under 50 ms, give 50; none gives 0; an archfit without the metric, None."""
    inf = float("inf")
    since = {0.005: 10.0, 0.01: 10.0, 0.05: 11.0, inf: 11.0}
    now = {0.005: 11.0, 0.01: 11.0, 0.05: 13.0, inf: 13.0}

    assert (50.0, 0.0, None) == (
        scale.longest_gc_ms(since, now),
        scale.longest_gc_ms(now, now),
        scale.longest_gc_ms({}, {}),
    )


def test_a_before_checkout_is_shown_above_this_one_at_each_size() -> None:
    """`bench.scale --before DIR`: each size's two rows side by side, named; the slopes and
    the goals read this checkout's rows only."""
    result = {
        "rows": [{"nodes": 1, "pods": 10, "event_cpu_us": 40.0}],
        "before_rows": [{"nodes": 1, "pods": 10, "event_cpu_us": 90.0, "archfit": "before"}],
        "slopes": [],
    }

    rows, columns = scale.with_before(result)

    assert [("before", 90.0), ("this", 40.0)] == [(r["archfit"], r["event_cpu_us"]) for r in rows]
    assert "archfit" == columns[0]
    assert 40.0 == report.scale_figures({"scale": result})["scale_event"]


def test_the_goals_read_the_largest_scale_size_and_the_webhooks_peer_lines() -> None:
    """The scale goals take the most pods; the peer goals archfit less the lowest peer."""
    webhook = (
        "targets (issue 43): archfit at most every peer, in this run\n"
        "  archfit: warm added p50 <= every peer's (lowest 0.37): 1.10 (+0.73), not met\n"
        "  archfit: CPU per 1,000 warm pods <= every peer's (lowest 0.71): 0.52 (-0.19), met\n"
    )
    results = {
        "meta": {},
        "others": {"webhook_latency.py": webhook},
        "scale": {
            "rows": [
                {"nodes": 5000, "pods": 50_000, "peak_mib": 70.0},
                {
                    "nodes": 5000,
                    "pods": 100_000,
                    "peak_mib": 84.0,
                    "stall_start_ms": 30.0,
                    "stall_relist_ms": 12.0,
                    "webhook_quiet_p99_ms": 2.0,
                    "webhook_relist_p99_ms": 5.0,
                },
            ]
        },
    }

    figures = report.goal_figures(results)

    assert (84.0, 30.0, 2.5) == (
        figures["scale_peak"],
        figures["scale_stall"],
        figures["scale_webhook"],
    )
    assert (0.73, -0.19, None) == (
        figures["peer_warm_over"],
        figures["peer_cpu_over"],
        figures["peer_cold_over"],
    )


def test_the_document_shows_the_breakdown_the_scale_table_and_the_peer_table() -> None:
    """Each of the three parts has its section when its benchmark ran."""
    row = {
        "variant": "archfit-profiled",
        "run": 1,
        "qps": 1000,
        "pods_per_s": 90.0,
        "span_s": 5.0,
        "cpu_ms_per_pod": {"extender": 1.0},
        "ratio_noop": None,
        "ratio_none": None,
        "cpu_breakdown": {"ms_per_unit": {"logging per call": 0.25}, "samples": 9, "covered": 0.9},
    }
    results = {
        "meta": {"machine": {}, "archfit": "abc", "bench": "abc", "problems": []},
        "scheduler_throughput": [row],
        "scale": {"rows": [{"nodes": 1, "pods": 2}], "slopes": []},
        "others": {"webhook_latency.py": "rows\npeers, this run (added)\nnoe 1.0\n"},
    }

    text = report.render(results, [], "benchmarks")

    assert "| logging per call | 0.25 |" in text
    assert "## Scale (issue 43)" in text
    assert "peers, this run (added)\nnoe 1.0" in text


def test_the_breakdown_puts_the_before_checkouts_profiled_row_of_the_same_run_beside() -> None:
    """`--before`: archfit-before-profiled is the before column, whichever row comes first,
    and the kept parts of an earlier run (`--reuse`) are named."""

    def profiled(variant: str, logging_ms: float) -> dict[str, object]:
        return {
            "variant": variant,
            "run": 1,
            "qps": 1000,
            "cpu_ms_per_pod": {"extender": 2 * logging_ms},
            "cpu_breakdown": {
                "ms_per_unit": {"logging per call": logging_ms},
                "samples": 9,
                "covered": 0.9,
            },
        }

    rows = [profiled("archfit-before-profiled", 0.5), profiled("archfit-profiled", 0.25)]
    meta = {
        "machine": {},
        "archfit": "abc",
        "bench": "abc",
        "problems": [],
        "reused": [{"parts": ["scale"], "archfit": "def", "date": "today"}],
    }

    text = report.render({"meta": meta, "scheduler_throughput": rows}, [], "benchmarks")

    assert "| logging per call | 0.50 | 0.25 |" in text
    assert "`archfit-before-profiled` row (1.00 ms of CPU per pod)" in text
    assert "Kept from an earlier run (archfit def, today, the same machine): `scale`." in text


def test_a_part_kept_twice_names_the_run_that_measured_it() -> None:
    """`--reuse` of a run that had itself kept `scale`: scale is still the first run's."""
    earlier = {
        "meta": {
            "archfit": "run2",
            "machine": {"date": "later"},
            "reused": [{"parts": ["scale", "memory"], "archfit": "run1", "date": "first"}],
        }
    }

    groups = bench_main.kept_from(earlier, ["scale", "others"])

    assert [
        {"parts": ["scale"], "archfit": "run1", "date": "first"},
        {"parts": ["others"], "archfit": "run2", "date": "later"},
    ] == groups


def test_another_checkouts_archfit_runs_that_checkouts_code_from_this_ones_root(
    tmp_path: Path,
) -> None:
    """bench --before/--source start tests.e2e.archfit.Archfit with the other checkout first on
    PYTHONPATH; run from this checkout's root (as `python -m bench` is), `-m` alone put the
    working directory first, so the "before" rows measured this checkout (whose `serve` runs
    until the timeout)."""
    other = tmp_path / "other"
    (other / "extender").mkdir(parents=True)
    (other / "extender" / "__init__.py").write_text("")
    (other / "extender" / "__main__.py").write_text("print('the other checkout')\n")
    env = {**os.environ, "PYTHONPATH": str(other)}
    archfit = Archfit(tmp_path / "run", {}, env=env)

    done = subprocess.run(
        archfit.process.argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )

    assert "the other checkout" == done.stdout.strip()
