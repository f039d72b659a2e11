"""Start to ready: from exec of `python -m extender serve` to the first 200 on /readyz.

Kubernetes off and every other setting at its default (the in-memory cache), run from an
empty directory so no config/archfit.yaml is picked up. Prints each run and the median.

    .venv/bin/python bench/start_to_ready.py [--runs 10] [--pythonpath /work/baseline]

`--pythonpath` measures another checkout (the `extender` package found there first).
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.registry import free_port  # noqa: E402

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


def one_run(pythonpath: str, workdir: str) -> float:
    port = free_port()
    env = dict(
        os.environ,
        PYTHONPATH=pythonpath,
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
        return time.perf_counter() - started
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--pythonpath", default=str(ROOT))
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        one_run(options.pythonpath, workdir)  # warm the page cache and .pyc files
        times = [one_run(options.pythonpath, workdir) for _ in range(options.runs)]
    print(" ".join(f"{t * 1000:.0f}" for t in times), "ms")
    print(f"median {statistics.median(times) * 1000:.0f} ms over {options.runs} runs")


if __name__ == "__main__":
    main()
