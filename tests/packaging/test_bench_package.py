"""bench/ and tests/ share their support code as packages (`tests.support`, `tests.e2e`):
the benchmarks run as `python -m bench.NAME` from the repository's root, and no file edits
`sys.path` to find the other."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _edits_sys_path(node: ast.AST) -> bool:
    """`sys.path.insert(...)` (any method of it), `sys.path = ...`, `sys.path[:0] = ...`."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return _is_sys_path(node.func.value)
    if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(_is_sys_path(t.value if isinstance(t, ast.Subscript) else t) for t in targets)
    return False


def _is_sys_path(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "path"
        and isinstance(node.value, ast.Name)
        and node.value.id == "sys"
    )


def test_no_bench_or_test_file_edits_sys_path():
    """No file under bench/ or tests/ inserts into, appends to or replaces sys.path."""
    edits = []
    for folder in ("bench", "tests"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            edits += [
                f"{path.relative_to(ROOT)}:{node.lineno}"
                for node in ast.walk(tree)
                if _edits_sys_path(node)
            ]
    assert [] == edits


def test_every_benchmark_imports_as_a_module_of_the_bench_package():
    """Each bench/*.py imports in a fresh interpreter started at the root, as
    `python -m bench.NAME` starts it, with nothing added to PYTHONPATH."""
    names = sorted(f"bench.{p.stem}" for p in (ROOT / "bench").glob("*.py"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)"
    done = subprocess.run(
        [sys.executable, "-c", code, *names],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (0, "") == (done.returncode, done.stderr[-2000:])
