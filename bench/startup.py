"""Time from exec to ready for `archfit serve` without an API server (goal 5 of issue 12).

Starts `python -m extender serve` with kubernetes.mode off and the in-memory defaults,
`--runs` times, and times each from just before exec to the first 200 from /readyz
(polled every 2 ms). Reports the median and the worst, RSS when ready, and, from one
more start under `python -X importtime`, whether `kubernetes` was imported and what
importing it cost.

    .venv/bin/python -m bench.startup [--source DIR] [--runs 10] [--output json]
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import harness

SETTINGS = {"kubernetes": {"mode": "off"}}
POLL_SECONDS = 0.002
TIMEOUT_SECONDS = 30.0


def ready(port: int) -> bool:
    """Whether /readyz answers 200 now."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
    try:
        connection.request("GET", "/readyz")
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


def one_start(
    workdir: Path, source: Path | None, run: int, flags: tuple[str, ...] = ()
) -> tuple[float, int, Path]:
    """Start archfit once; (seconds to ready, RSS bytes when ready, its log)."""
    server = harness.ArchfitServer(
        workdir, SETTINGS, source=source, core=None, name=f"start-{run}", python_flags=flags
    )
    started = time.perf_counter()
    server.process.start()
    try:
        while not ready(server.port):
            if not server.process.running():
                raise harness.BenchError(f"archfit exited:\n{server.process.log_tail()}")
            if time.perf_counter() - started > TIMEOUT_SECONDS:
                raise harness.BenchError(f"not ready in {TIMEOUT_SECONDS:g}s")
            time.sleep(POLL_SECONDS)
        seconds = time.perf_counter() - started
        assert server.process.pid is not None
        rss, _ = harness.proc_memory(server.process.pid)
    finally:
        server.stop()
    return seconds, rss, server.process.log_path


def kubernetes_import(log: Path) -> float | None:
    """Cumulative ms of `import kubernetes` from a -X importtime log, None if not imported."""
    for line in log.read_text(errors="replace").splitlines():
        if not line.startswith("import time:"):
            continue
        # "import time: <self us> | <cumulative us> | <indented module name>"
        fields = [part.strip() for part in line.removeprefix("import time:").split("|")]
        if len(fields) == 3 and fields[2] == "kubernetes" and fields[1].isdigit():
            return int(fields[1]) / 1000
    return None


def run(
    *,
    source: Path | None = None,
    runs: int = 10,
    workdir: Path | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, list[dict[str, Any]]]:
    """Rows: `startup` with one summary row."""
    with tempfile.TemporaryDirectory(prefix="archfit-bench-") as tmp:
        root = workdir or Path(tmp)
        one_start(root, source, -1)  # bytecode compiled and files in the page cache
        times, sizes = [], []
        for index in range(runs):
            seconds, rss, _ = one_start(root, source, index)
            times.append(seconds)
            sizes.append(rss)
            progress(f"start {index}: {seconds * 1000:.0f} ms")
        _, _, log = one_start(root, source, runs, ("-X", "importtime"))
        kubernetes_ms = kubernetes_import(log)
    row = {
        "runs": runs,
        "median_ms": statistics.median(times) * 1000,
        "max_ms": max(times) * 1000,
        "rss_mb": statistics.median(sizes) / (1024 * 1024),
        "kubernetes_imported": kubernetes_ms is not None,
        "kubernetes_import_ms": kubernetes_ms,
    }
    return {"startup": [row]}


COLUMNS = (
    "runs",
    "median_ms",
    "max_ms",
    "rss_mb",
    "kubernetes_imported",
    "kubernetes_import_ms",
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, help="checkout whose extender/ to run")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="5 runs")
    parser.add_argument("--output", choices=("table", "json"), default="table")
    args = parser.parse_args(argv)
    runs = 5 if args.quick else args.runs
    result = run(source=args.source, runs=runs, progress=lambda s: print(s, file=sys.stderr))
    if args.output == "json":
        print(json.dumps(result, indent=2))
        return 0
    print(f"archfit from {harness.imported_from(args.source)}, kubernetes.mode off")
    harness.print_table(result["startup"], COLUMNS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
