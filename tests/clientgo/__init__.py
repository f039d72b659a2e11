"""The differential test of archfit's kubeconfig loader against client-go's (clientcmd):
the Go program that prints what client-go would send, its build, and the corpus."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.binaries import run_build_script

BUILD_SCRIPT = Path(__file__).resolve().parent / "build.sh"


def build() -> Path:
    """clientgo-observe, built by tests/clientgo/build.sh (a no-op when cached)."""
    return run_build_script(BUILD_SCRIPT, ("clientgo-observe",)) / "clientgo-observe"
