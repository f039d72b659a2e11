"""What the clone tracks and ignores: no path of one machine, nothing the quick start leaves."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
    ).stdout


def test_no_tracked_symlink_points_outside_the_clone() -> None:
    """A symlink to one machine's absolute path (a venv) is that machine's, not the project's."""
    links = [
        line.split("\t")[1]
        for line in _git("ls-files", "-s").splitlines()
        if line.startswith("120000")
    ]
    outside = [
        path for path in links if Path(_git("cat-file", "-p", f":{path}") or "/").is_absolute()
    ]
    assert [] == outside


def test_what_venvs_and_the_quick_start_leave_is_ignored() -> None:
    """git status stays clean after `python3 -m venv .venv-main`, the README's quick start and
    deploy/README.md's kustomize install (the operator's overlay)."""
    paths = [".venv-main", ".venv-min/bin/python", "archfit.log", "archfit.pid", "demo.log",
             "demo.pid", "demo/archfit.yaml", "deploy/overlays/mine/kustomization.yaml",
             "deploy/overlays/mine/archfit.yaml"]  # fmt: skip
    done = subprocess.run(
        ["git", "check-ignore", "--no-index", *paths],
        cwd=ROOT, capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert paths == done.stdout.split()


def test_how_to_reproduce_the_benchmarks_names_no_path_of_the_machine_that_ran_them() -> None:
    """docs/benchmarks.md is generated; its commands must run in any clone."""
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    section = text[text.index("## How to reproduce") : text.index("## This run")]
    assert [] == re.findall(r"(?<![\w.])/(?:tmp|home|root|work|Users)/\S*", section)


def test_the_generated_reproduce_block_leaves_out_the_runs_own_paths() -> None:
    """bench/report.py writes the commands from the run's flags, not its paths."""
    from bench.report import reproduce

    meta = {"arguments": "--baseline /tmp/base3/results.json --doc /tmp/x.md", "quick": False}
    block = "\n".join(reproduce(meta, {"meta": {"archfit": "ae986ff"}}))
    assert ("/tmp" in block, "git worktree add ../archfit-before ae986ff" in block) == (False, True)
