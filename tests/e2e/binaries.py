"""Find or build the e2e binaries through tests/e2e/build.sh and build-karpenter.sh.

With CI=true a missing Go or a failed build is an error, never a skip; on a
developer machine without Go the e2e tests skip with a message naming Go.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable
from pathlib import Path

from tests.support.prerequisites import BuildFailed, last_line, run_build

HERE = Path(__file__).resolve().parent
BUILD_SCRIPT = HERE / "build.sh"
KARPENTER_BUILD_SCRIPT = HERE / "build-karpenter.sh"
#: A cold build takes a few minutes on 2 cores; a hung one must not stall CI forever.
BUILD_TIMEOUT_SECONDS = 45 * 60
#: The build scripts' exit status when the cache is cold and no `go` is on PATH.
MISSING_GO_EXIT = 3


def build() -> Path:
    """Run build.sh (a no-op when the cache is warm, which needs no Go) and return the
    directory of kube-apiserver, kube-scheduler, kube-controller-manager and etcd."""
    executables = ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager")
    return run_build_script(BUILD_SCRIPT, executables)


def build_karpenter() -> Path:
    """Run build-karpenter.sh (a no-op when the cache is warm) and return the directory
    of Karpenter's kwok build and its CRDs."""
    return run_build_script(KARPENTER_BUILD_SCRIPT, ("karpenter-kwok",))


def run_build_script(
    script: Path, executables: Iterable[str], arguments: Iterable[str] = ()
) -> Path:
    """Run one of the build scripts and return the directory it printed last, after
    checking that the executables it promises are there."""

    def missing(done: subprocess.CompletedProcess[str]) -> str | None:
        if done.returncode != MISSING_GO_EXIT:
            return None
        return (
            f"e2e tests need Go >= 1.26 on PATH to run {script.name} "
            f"(the cache it fills is cold); install Go from https://go.dev/dl/ and re-run"
        )

    done = run_build(["bash", script, *arguments], BUILD_TIMEOUT_SECONDS, missing)
    directory = Path(last_line(done.stdout))
    for name in executables:
        if not os.access(directory / name, os.X_OK):
            raise BuildFailed(f"{script} printed {directory} but {name} is missing there")
    return directory
