"""The pre-commit hook the repository ships (.pre-commit-hooks.yaml): it names a command the
package installs, and that command, run as pre-commit runs it (its entry, its args, then the
matched files), fails a commit whose manifests hold the trap and passes a clean one."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
HOOKS = ROOT / ".pre-commit-hooks.yaml"


def _hook() -> dict:
    hooks = yaml.safe_load(HOOKS.read_text())
    assert ["archfit-lint"] == [hook["id"] for hook in hooks]
    return hooks[0]


def test_the_hook_runs_a_command_the_package_installs():
    """language python (pre-commit installs the repository), entry `archfit lint`."""
    hook = _hook()
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    program, *args = shlex.split(hook["entry"])
    assert ("python", True, ["lint"], ["yaml"]) == (
        hook["language"],
        program in scripts,
        args,
        hook["types"],
    )


def test_the_hook_fails_a_commit_with_the_trap_and_passes_a_clean_one(tmp_path: Path):
    """Run as pre-commit would: entry, args, file names; exit 1 for an amd64-only image that
    may land on arm64, 0 once the template pins amd64 and silences the readiness warning."""
    _, *entry_args = shlex.split(_hook()["entry"])
    platforms = tmp_path / "platforms.json"
    platforms.write_text(json.dumps([{"image": "acme/api:1", "platforms": ["linux/amd64"]}]))
    spec = {"containers": [{"name": "api", "image": "acme/api:1"}]}
    trap = tmp_path / "trap.yaml"
    trap.write_text(yaml.safe_dump({"kind": "Deployment", "metadata": {"name": "api"},
                                    "spec": {"template": {"spec": spec}}}))  # fmt: skip
    clean = tmp_path / "clean.yaml"
    pinned = {**spec, "nodeSelector": {"kubernetes.io/arch": "amd64"}}
    clean.write_text(yaml.safe_dump({
        "kind": "Deployment",
        "metadata": {"name": "api", "annotations": {"archfit.io/lint-ignore": "no-arm64"}},
        "spec": {"template": {"spec": pinned}},
    }))  # fmt: skip

    def run(*files: Path) -> int:
        argv = [sys.executable, "-m", "extender", *entry_args, "--platforms", str(platforms)]
        done = subprocess.run(
            [*argv, *map(str, files)], capture_output=True, cwd=tmp_path, timeout=120, check=False
        )
        return done.returncode

    assert (1, 0) == (run(trap, clean), run(clean))
