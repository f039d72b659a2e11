"""Find or build the e2e binaries through tests/e2e/build.sh.

With CI=true a missing Go or a failed build is an error, never a skip; on a
developer machine without Go the e2e tests skip with a message naming Go.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

BUILD_SCRIPT = Path(__file__).resolve().parent / "build.sh"
#: A cold build takes a few minutes on 2 cores; a hung one must not stall CI forever.
BUILD_TIMEOUT_SECONDS = 45 * 60
#: build.sh's exit status when the cache is cold and no `go` is on PATH.
MISSING_GO_EXIT = 3


class Unavailable(Exception):
    """The binaries cannot be had on this machine (no Go toolchain)."""


class BuildFailed(Exception):
    """build.sh ran and failed."""


def build() -> Path:
    """Run build.sh (a no-op when the cache is warm, which needs no Go) and return the
    directory of the binaries."""
    try:
        done = subprocess.run(
            ["bash", str(BUILD_SCRIPT)],
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        raise BuildFailed(f"{BUILD_SCRIPT} timed out after {BUILD_TIMEOUT_SECONDS}s") from error
    if done.returncode == MISSING_GO_EXIT:
        raise Unavailable(
            "e2e tests need Go >= 1.26 on PATH to build kube-apiserver, kube-scheduler and "
            "etcd (tests/e2e/build.sh); install Go from https://go.dev/dl/ and re-run"
        )
    if done.returncode != 0:
        tail = "\n".join(done.stderr.splitlines()[-30:])
        raise BuildFailed(f"{BUILD_SCRIPT} exited {done.returncode}:\n{tail}")
    directory = Path(done.stdout.strip().splitlines()[-1])
    for name in ("etcd", "kube-apiserver", "kube-scheduler"):
        if not os.access(directory / name, os.X_OK):
            raise BuildFailed(f"{BUILD_SCRIPT} printed {directory} but {name} is missing there")
    return directory
