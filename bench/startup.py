"""Time from exec to ready for `archfit serve` without an API server (goal 5 of issue 21).

Runs archfit as the image installs it (Dockerfile), not from the checkout: a venv without
pip holding requirements.lock's packages (built once per lock, under ~/.cache/archfit-bench),
and a wheel built from the measured checkout, installed with pip into a directory of its own
that goes on PYTHONPATH. Both run from the bytecode pip compiled at install, with
PYTHONDONTWRITEBYTECODE=1 as in the image; so no editable-install finder, no test packages
(uvloop is in the lock, a dependency on Linux: server.eventLoop auto runs on it, as in the
image). `--checkout` runs the checkout's files with this venv instead, as before (quicker,
less like the image).

Starts `python -m extender serve` with kubernetes.mode off and the in-memory defaults,
`--runs` times, and times each from just before exec to the first 200 from /readyz
(polled every 2 ms). Reports the median, the best (the start least disturbed by other work
on a shared machine) and the worst, RSS when ready, and, from one more start under
`python -X importtime`, whether `kubernetes` was imported and what importing it cost.

    .venv/bin/python -m bench.startup [--source DIR] [--before DIR] [--runs 10]
        [--python PATH] [--checkout] [--output json]

Issue 21, goal 5 (≤ 300 ms), measured on the bench machine (2 cores shared with other runs,
load ~0.8) with `--runs 10 --before` a checkout of main, medians: with this venv's pyenv 3.11.7
(no PGO or LTO, libpython shared) 396 ms before, 341 after; with `--python
/usr/bin/python3.11` (Debian's optimised build, libpython static; the image's is a PGO and
LTO build) 337 before, 284 after; `--checkout` 414 before, 345 after. The 55 ms are aiohttp's
client CA store, read once serving (registry/system_cas.py), the webhook's modules with the
webhook off, and two registry regular expressions compiled on first use.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import harness

SETTINGS = {"kubernetes": {"mode": "off"}}
POLL_SECONDS = 0.002
TIMEOUT_SECONDS = 30.0
IMAGE_VENVS = harness.PYCACHE.parent / "image-venv"
"""Venvs of requirements.lock's packages, one per lock (named by its hash)."""
#: What the Dockerfile's build stage copies before `pip install .`.
WHEEL_SOURCES = ("pyproject.toml", "README.md", "docs/package.md", "LICENSE", "extender")
"""What a wheel is built from; an older checkout's pyproject names README.md, a newer one
docs/package.md, and each copies those it has."""


@dataclass(frozen=True)
class Install:
    """How to run archfit: which Python, with which environment on top of this one's."""

    python: str = sys.executable
    env: Mapping[str, str] = field(default_factory=dict)
    where: str = ""
    """Where `extender` is imported from, for the report."""


def pip(*args: str) -> None:
    """Run this venv's pip quietly; BenchError with its output if it fails."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise harness.BenchError(f"pip {' '.join(args[:2])} failed:\n{done.stderr[-2000:]}")


BASE_PYTHON = str(getattr(sys, "_base_executable", sys.executable))
"""The interpreter this venv was made from: the default for the image-like venv."""


def dependencies_venv(lock: Path, base: str = BASE_PYTHON) -> Path:
    """A venv of `base` without pip holding `lock`'s packages (the image's first layer): its
    python.

    Built once per lock content and interpreter (about 30 s) into a temporary directory, then
    renamed into place, so a half-built one is never used.
    """
    digest = hashlib.sha256(lock.read_bytes() + base.encode()).hexdigest()[:16]
    venv = IMAGE_VENVS / digest
    python = venv / "bin" / "python"
    if python.exists():
        return python
    IMAGE_VENVS.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f"{digest}-", dir=IMAGE_VENVS))
    subprocess.run([base, "-m", "venv", "--without-pip", str(building)], check=True)
    pip("--python", str(building / "bin" / "python"), "install", "--require-hashes",
        "--no-deps", "-r", str(lock))  # fmt: skip
    try:
        building.rename(venv)
    except OSError:  # another run built it meanwhile
        shutil.rmtree(building, ignore_errors=True)
    return python


def image_install(checkout: Path, workdir: Path, base: str = BASE_PYTHON) -> Install:
    """archfit from `checkout` as the image has it: a wheel of it installed with pip (bytecode
    compiled), beside the lock's packages in a venv of `base`, run without writing bytecode."""
    python = dependencies_venv(checkout / "requirements.lock", base)
    # A copy: building writes build/ and *.egg-info beside the sources.
    sources = workdir / "wheel-source"
    sources.mkdir(parents=True)
    for name in WHEEL_SOURCES:
        if not (checkout / name).exists():
            continue
        copy = shutil.copytree if (checkout / name).is_dir() else shutil.copy2
        (sources / name).parent.mkdir(parents=True, exist_ok=True)
        copy(checkout / name, sources / name)
    pip("wheel", "--no-deps", "-w", str(workdir), str(sources))
    (wheel,) = workdir.glob("archfit-*.whl")
    site = workdir / "site"
    pip("--python", str(python), "install", "--no-deps", "--target", str(site), str(wheel))
    env = {
        "PYTHONPATH": str(site),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPYCACHEPREFIX": "",  # empty is unset: the bytecode beside the files is read
    }
    return Install(str(python), env, f"{site} (a wheel of {checkout}; a venv of {base})")


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
    workdir: Path,
    source: Path | None,
    run: int,
    flags: tuple[str, ...] = (),
    install: Install | None = None,
) -> tuple[float, int, Path]:
    """Start archfit once; (seconds to ready, RSS bytes when ready, its log)."""
    install = install or Install()
    server = harness.ArchfitServer(
        workdir,
        SETTINGS,
        source=source,
        core=None,
        name=f"start-{run}",
        env=install.env,
        python_flags=flags,
        python=install.python,
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


def prepare(
    checkout: bool,
    source: Path | None,
    workdir: Path,
    progress: Callable[[str], None],
    base: str = BASE_PYTHON,
) -> tuple[Install, Path | None]:
    """How to run `source`: an image-like install of it in a venv of `base` (the default), or,
    with `checkout`, its files with this venv (then the `source` to put on PYTHONPATH)."""
    if checkout:
        return Install(where=harness.imported_from(source)), source
    progress(f"installing a wheel of {source or harness.ROOT}, as the image does")
    return image_install((source or harness.ROOT).resolve(), workdir, base), None


def run(
    *,
    source: Path | None = None,
    runs: int = 10,
    workdir: Path | None = None,
    checkout: bool = False,
    before: Path | None = None,
    python: str = BASE_PYTHON,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, list[dict[str, Any]]]:
    """Rows: `startup`, one per checkout: `source` first, then `before` if given. Their starts
    alternate, so both meet the same machine (a shared one's load moves within a minute)."""
    checkouts = {"measured": source, **({"before": before} if before is not None else {})}
    with tempfile.TemporaryDirectory(prefix="archfit-bench-") as tmp:
        root = workdir or Path(tmp)
        prepared = {
            label: prepare(checkout, directory, root / f"install-{label}", progress, python)
            for label, directory in checkouts.items()
        }
        for install, on_path in prepared.values():  # files in the page cache
            one_start(root, on_path, -1, install=install)
        times: dict[str, list[float]] = {label: [] for label in prepared}
        sizes: dict[str, list[int]] = {label: [] for label in prepared}
        for index in range(runs):
            for label, (install, on_path) in prepared.items():
                seconds, rss, _ = one_start(root, on_path, index, install=install)
                times[label].append(seconds)
                sizes[label].append(rss)
                progress(f"{label} start {index}: {seconds * 1000:.0f} ms")
        rows = []
        for label, (install, on_path) in prepared.items():
            flags = ("-X", "importtime")
            _, _, log = one_start(root, on_path, runs, flags, install)
            kubernetes_ms = kubernetes_import(log)
            rows.append(
                {
                    "archfit": label,
                    "runs": runs,
                    "median_ms": statistics.median(times[label]) * 1000,
                    "min_ms": min(times[label]) * 1000,
                    "max_ms": max(times[label]) * 1000,
                    "rss_mb": statistics.median(sizes[label]) / (1024 * 1024),
                    "kubernetes_imported": kubernetes_ms is not None,
                    "kubernetes_import_ms": kubernetes_ms,
                    "installed": install.where,
                }
            )
    return {"startup": rows}


COLUMNS = (
    "archfit",
    "runs",
    "median_ms",
    "min_ms",
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
    parser.add_argument(
        "--before", type=Path, help="also measure this checkout, its starts alternating"
    )
    parser.add_argument(
        "--python",
        default=BASE_PYTHON,
        help="the interpreter of the image-like venv (default: this venv's base, "
        f"{BASE_PYTHON}); the image's is a PGO and LTO build",
    )
    parser.add_argument(
        "--checkout",
        action="store_true",
        help="run the checkout's files with this venv, not an image-like install of them",
    )
    parser.add_argument("--output", choices=("table", "json"), default="table")
    args = parser.parse_args(argv)
    runs = 5 if args.quick else args.runs
    result = run(
        source=args.source,
        runs=runs,
        checkout=args.checkout,
        before=args.before,
        python=args.python,
        progress=lambda s: print(s, file=sys.stderr),
    )
    if args.output == "json":
        print(json.dumps(result, indent=2))
        return 0
    for row in result["startup"]:
        print(f"{row['archfit']}: archfit from {row['installed']}")
    print("kubernetes.mode off")
    harness.print_table(result["startup"], COLUMNS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
