"""tests/deploy/build-tools.sh: pinned versions, and a warm cache that costs nothing."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.deploy import render

pytestmark = pytest.mark.e2e


def _pinned(name: str) -> str:
    text = render.BUILD_TOOLS.read_text()
    match = re.search(rf"^{name}_VERSION=(\S+)$", text, re.M)
    assert match, f"build-tools.sh pins no {name}_VERSION"
    return match.group(1)


def test_build_tools_is_a_no_op_when_its_cache_is_warm(kustomize: Path, helm: Path) -> None:
    """Run with no arguments (as tests/run.sh does), it builds nothing and prints both paths:
    no build line on stderr, and both binaries are the very files that were there."""
    before = [_identity(kustomize), _identity(helm)]
    done = subprocess.run(
        ["bash", render.BUILD_TOOLS], capture_output=True, text=True, timeout=60, check=False
    )
    assert (0, "") == (done.returncode, done.stderr)
    assert [str(kustomize), str(helm)] == done.stdout.split()
    assert before == [_identity(kustomize), _identity(helm)]


def _identity(path: Path) -> tuple[int, int, int]:
    """What a rebuild (a new file moved into place) would change."""
    stat = path.stat()
    return stat.st_ino, stat.st_mtime_ns, stat.st_size


def test_the_built_tools_report_the_versions_the_script_pins(kustomize: Path, helm: Path) -> None:
    """kustomize and helm say the versions build-tools.sh names, so a stale cache can't hide."""
    kustomize_version = subprocess.run(
        [kustomize, "version"], capture_output=True, text=True, timeout=60, check=True
    ).stdout.strip()
    helm_version = subprocess.run(
        [helm, "version", "--template", "{{.Version}}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()
    assert (_pinned("KUSTOMIZE"), _pinned("HELM")) == (kustomize_version, helm_version)
