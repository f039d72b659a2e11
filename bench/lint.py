"""`archfit lint` on 1,000 workloads naming 300 distinct images, offline from a platforms file.

Run: `.venv/bin/python -m bench.lint [--workloads 1000] [--images 300] [--runs 5]`.
It writes one rendered stream as `helm template` would (1,000 Deployments, StatefulSets and
CronJobs in one file of many documents; a third with a sidecar, a fifth with an init
container, a quarter pinned to amd64) and a platforms file as `archfit inspect -o json` writes
it (200 images multi-arch, 70 amd64-only, 30 arm64-only), then times the whole command as CI
runs it: `archfit lint FILE --platforms FILE` in a new process, table output to a file,
`--runs` times (the median is the figure; the goal is under 2 s). A run in-process splits the
time into reading, judging and writing.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

WORKLOADS = 1_000
IMAGES = 300
RUNS = 5
GOAL_SECONDS = 2.0


def images(count: int) -> list[dict[str, Any]]:
    """The platforms file's entries: two thirds multi-arch, then amd64-only, then arm64-only."""
    found = []
    for n in range(count):
        if n < count * 2 // 3:
            platforms = ["linux/amd64", "linux/arm64"]
        elif n < count * 9 // 10:
            platforms = ["linux/amd64"]
        else:
            platforms = ["linux/arm64"]
        found.append({"image": f"registry.example/team-{n % 17}/svc{n}:1.{n % 7}",
                      "platforms": platforms})  # fmt: skip
    return found


def stream(count: int, refs: list[str]) -> str:
    """`count` workloads as one multi-document YAML stream."""
    documents = []
    for i in range(count):
        spec: dict[str, Any] = {"containers": [{"name": "app", "image": refs[i % len(refs)]}]}
        if i % 3 == 0:
            spec["containers"].append({"name": "sidecar", "image": refs[(i * 7 + 3) % len(refs)]})
        if i % 5 == 0:
            spec["initContainers"] = [{"name": "init", "image": refs[(i * 13 + 5) % len(refs)]}]
        if i % 4 == 0:
            spec["nodeSelector"] = {"kubernetes.io/arch": "amd64"}
        template = {"metadata": {"labels": {"app": f"svc-{i}"}}, "spec": spec}
        metadata = {"name": f"svc-{i}", "namespace": f"team-{i % 20}"}
        if i % 10 == 9:
            kind, body = "CronJob", {"schedule": "@hourly",
                                     "jobTemplate": {"spec": {"template": template}}}  # fmt: skip
        elif i % 10 == 8:
            kind, body = "StatefulSet", {"serviceName": metadata["name"], "template": template}
        else:
            kind, body = "Deployment", {"replicas": 2, "template": template}
        api = "batch/v1" if kind == "CronJob" else "apps/v1"
        documents.append({"apiVersion": api, "kind": kind, "metadata": metadata, "spec": body})
    return yaml.safe_dump_all(documents, sort_keys=False)


def in_process(manifests: Path, platforms: Path) -> dict[str, float]:
    """Reading, judging and writing the table, timed apart, in this process."""
    from extender.config.settings import Settings
    from extender.lint import render
    from extender.lint.pure import findings, platforms_file
    from extender.lint.pure import manifests as reading
    from extender.lint.run import LintOptions, judging_of

    started = time.perf_counter()
    known = platforms_file.read_platforms(platforms.read_bytes())
    workloads, skipped = reading.read_stream(manifests.read_text())
    read_at = time.perf_counter()
    judging = judging_of(Settings(), LintOptions(paths=[str(manifests)]))
    resolved = {i: known.resolved(i) for w in workloads for i in w.images()}
    found = [f for w in workloads for f in findings.judge_workload(w, resolved, judging)]
    judged_at = time.perf_counter()
    source = render.Source(str(manifests), workloads, found, skipped)
    render.write_findings([source], "table", findings.Level.ERROR, io.StringIO())
    written_at = time.perf_counter()
    return {
        "read": read_at - started,
        "judge": judged_at - read_at,
        "write": written_at - judged_at,
        "findings": float(len(found)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=WORKLOADS)
    parser.add_argument("--images", type=int, default=IMAGES)
    parser.add_argument("--runs", type=int, default=RUNS)
    args = parser.parse_args()
    entries = images(args.images)
    with tempfile.TemporaryDirectory(prefix="archfit-bench-lint-") as workdir:
        manifests, platforms = Path(workdir) / "rendered.yaml", Path(workdir) / "platforms.json"
        manifests.write_text(stream(args.workloads, [e["image"] for e in entries]))
        platforms.write_text(json.dumps(entries))
        command = [sys.executable, "-m", "extender", "lint", str(manifests),
                   "--platforms", str(platforms), "--fail-on", "note"]  # fmt: skip
        walls, status = [], None
        for _ in range(args.runs):
            started = time.perf_counter()
            done = subprocess.run(
                command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False,
                cwd=workdir, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
            )  # fmt: skip
            walls.append(time.perf_counter() - started)
            status = done.returncode
            if status not in (0, 1):
                print(done.stderr.decode(errors="replace"), file=sys.stderr)
                return 1
        parts = in_process(manifests, platforms)
        lines = manifests.read_text().count("\n")
    median = statistics.median(walls)
    found = int(parts["findings"])
    print(f"{args.workloads} workloads ({lines} lines of YAML), {args.images} distinct images, "
          f"offline from a platforms file; {found} findings (exit {status})")  # fmt: skip
    print(f"archfit lint, whole command in a new process: median {median:.2f} s of {args.runs} "
          f"runs (min {min(walls):.2f}, max {max(walls):.2f}); goal under {GOAL_SECONDS:.0f} s: "
          f"{'met' if median < GOAL_SECONDS else 'NOT met'}")  # fmt: skip
    print(f"in process: read {parts['read']:.2f} s, judge {parts['judge']:.2f} s, write the "
          f"table {parts['write']:.2f} s")  # fmt: skip
    print(f"machine load (1, 5, 15 min): {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
