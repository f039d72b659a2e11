"""Start to ready: from exec of `python -m extender serve` to the first 200 on /readyz.

Kubernetes off and every other setting at its default (the in-memory cache), run from an
empty directory so no config/archfit.yaml is picked up, with bytecode compiled by a first
run that is not counted. Prints each run and the medians of wall and CPU time.

    .venv/bin/python bench/start_to_ready.py [--runs 10] [--before /work/baseline]

`--before` also measures another checkout (its `extender` package found first), its runs
alternating with this one's so that both see the same machine load.
"""

from __future__ import annotations

import argparse
import http.client
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.process import free_port  # noqa: E402

DEADLINE_SECONDS = 20.0


def ready(port: int) -> bool:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
    try:
        connection.request("GET", "/readyz")
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


def one_run(pythonpath: str, workdir: str) -> tuple[float, float, int]:
    """Seconds from exec to the first 200 on /readyz, the CPU seconds archfit spent, and
    its RSS then."""
    port = free_port()
    env = dict(
        os.environ,
        PYTHONPATH=pythonpath,
        # Bytecode, as the image has it (pip compiles at install), kept out of the checkouts.
        PYTHONPYCACHEPREFIX=os.path.join(workdir, "pycache"),
        PYTHONDONTWRITEBYTECODE="",
        ARCHFIT_KUBERNETES__MODE="off",
        ARCHFIT_SERVER__HOST="127.0.0.1",
        ARCHFIT_SERVER__PORT=str(port),
    )
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "extender", "serve"],
        cwd=workdir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while not ready(port):
            if process.poll() is not None:
                raise RuntimeError(f"archfit exited with {process.returncode}")
            if time.perf_counter() - started > DEADLINE_SECONDS:
                raise RuntimeError("archfit was not ready in time")
            time.sleep(0.002)
        wall = time.perf_counter() - started
        # CPU time is the steadier figure on a shared machine: waiting for a core is not in it.
        measured = psutil.Process(process.pid)
        cpu = measured.cpu_times()
        return wall, cpu.user + cpu.system, measured.memory_info().rss
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--before", help="another checkout to measure alongside")
    options = parser.parse_args()
    checkouts = {"after": str(ROOT)} if not options.before else {"before": options.before}
    checkouts["after"] = str(ROOT)
    times: dict[str, list[tuple[float, float, int]]] = {name: [] for name in checkouts}
    with tempfile.TemporaryDirectory() as workdir:
        for path in checkouts.values():
            one_run(path, workdir)  # warm the page cache and .pyc files
        for _ in range(options.runs):
            for name, path in checkouts.items():
                times[name].append(one_run(path, workdir))
    for name, runs in times.items():
        walls = [wall * 1000 for wall, _, _ in runs]
        cpus = [cpu * 1000 for _, cpu, _ in runs]
        rss = [rss / 2**20 for _, _, rss in runs]
        print(f"{name}: wall " + " ".join(f"{w:.0f}" for w in walls) + " ms")
        print(
            f"{name}: median of {len(runs)}: {statistics.median(walls):.0f} ms to ready, "
            f"{statistics.median(cpus):.0f} ms CPU, {statistics.median(rss):.0f} MiB RSS"
        )


if __name__ == "__main__":
    main()
