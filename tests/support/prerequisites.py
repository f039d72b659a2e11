"""What a suite does when a real part it needs cannot be had on this machine.

CI must never pass by skipping the real thing, so under CI=true a missing prerequisite
fails; on a developer machine it skips with a message nobody can miss.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn, TypeVar

T = TypeVar("T")


class Unavailable(Exception):
    """A real part cannot be had on this machine (no Go toolchain, no buildah, ...)."""


class BuildFailed(Exception):
    """A build script ran and failed."""


def in_ci() -> bool:
    """Whether this run is CI, where missing prerequisites must fail rather than skip."""
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def unavailable(suite: str, reason: object) -> NoReturn:
    """Fail under CI=true, else skip loudly: the `suite` tests cannot run, for `reason`."""
    import pytest  # here: tests.support.demo_registry runs without pytest (README quick start)

    if in_ci():
        pytest.fail(f"CI=true and {suite} prerequisites are missing: {reason}")
    pytest.skip(f"!!! {suite} SKIPPED, NOT TESTED: {reason}")


def require_binary(path: str, package: str, suite: str = "these") -> str:
    """The full path of `path` if it is executable, else `unavailable` with how to install it."""
    found = shutil.which(path)
    if not found:
        unavailable(suite, f"{path} not found: apt-get install -y {package}")
    return found


def run_build(
    argv: Sequence[str | Path],
    timeout: float,
    missing: Callable[[subprocess.CompletedProcess[str]], str | None],
) -> subprocess.CompletedProcess[str]:
    """Run one of the cached build scripts (a no-op when its cache is warm).

    A failure `missing` explains (a cold cache and no Go, say) is Unavailable; any other
    failure, a timeout included, is BuildFailed with the tail of the script's stderr.
    """
    what = " ".join(str(a) for a in argv[1:] if a)
    try:
        done = subprocess.run(
            [str(a) for a in argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as error:
        raise BuildFailed(f"{what} timed out after {timeout:g}s") from error
    if done.returncode != 0:
        reason = missing(done)
        if reason:
            raise Unavailable(reason)
        tail = "\n".join(done.stderr.splitlines()[-40:])
        raise BuildFailed(f"{what} exited {done.returncode}:\n{tail}")
    return done


def last_line(text: str) -> str:
    """What a build script prints last on stdout: the path of what it built."""
    return text.strip().splitlines()[-1]


def built(suite: str, build: Callable[[], T]) -> T:
    """Run `build` for a fixture: a failed build fails; a missing part is `unavailable`."""
    try:
        return build()
    except Unavailable as error:
        unavailable(suite, error)
    except BuildFailed as error:
        import pytest

        pytest.fail(f"{suite}: building failed: {error}")
