"""The import contracts are written by folder: a module new to a folder is held by them with
no one editing pyproject.toml (docs/architecture.md, "Folders")."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Next to this interpreter: tests/packaging runs in the venv of tests/run.sh, which has the
# lint extra (the minimum-versions venv, which has not, runs only tests/unit and tests/app).
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of extender/ and pyproject.toml, which lint-imports reads from its working
    directory before the installed archfit."""
    shutil.copytree(
        ROOT / "extender", tmp_path / "extender", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    return tmp_path


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports over `tree`, uncached, as tests/run.sh runs it."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    "package", ["core", "wire", "audit.pure", "lint.pure", "registry.pure", "serving.pure"]
)
def test_a_new_module_in_a_pure_folder_that_imports_aiohttp_breaks_the_pure_contract(
    tree: Path, package: str
) -> None:
    """A module dropped into core/, wire/ or a folder's pure/ is held by the pure contract
    without being named in it: the copy passes, then fails once the new module imports aiohttp."""
    before = lint_imports(tree)
    (tree / "extender" / package.replace(".", "/") / "fresh.py").write_text(
        '"""A new module that does I/O where none is allowed."""\n\nimport aiohttp  # noqa: F401\n'
    )
    after = lint_imports(tree)
    assert (0, 1) == (before.returncode, after.returncode), before.stdout + after.stdout
    assert "The pure core does no I/O BROKEN" in after.stdout
    assert f"extender.{package}.fresh -> aiohttp" in after.stdout


@pytest.mark.parametrize("folder", ["scheduler", "admission", "audit", "lint"])
def test_only_the_command_line_imports_the_composition_root(tree: Path, folder: str) -> None:
    """server.py builds both apps and sits above them: an app (or any folder but cli) that
    imports it, even inside a function, breaks the layers."""
    (tree / "extender" / folder / "fresh.py").write_text(
        '"""A new module that reaches for the root."""\n\n\ndef late() -> None:\n'
        "    from extender import server  # noqa: F401\n"
    )
    result = lint_imports(tree)
    assert 1 == result.returncode, result.stdout
    assert f"extender.{folder}.fresh -> extender.server" in result.stdout


def test_a_new_module_in_core_that_imports_a_layer_above_breaks_the_layers(tree: Path) -> None:
    """Upward imports are caught by folder too: a new core module may not import the
    scheduler, even inside a function."""
    (tree / "extender" / "core" / "fresh.py").write_text(
        '"""A new module that reaches up."""\n\n\ndef late() -> None:\n'
        "    from extender.scheduler import verbs  # noqa: F401\n"
    )
    result = lint_imports(tree)
    assert 1 == result.returncode, result.stdout
    assert "extender.core.fresh -> extender.scheduler.verbs" in result.stdout


def test_a_settings_schema_that_reads_yaml_breaks_the_schema_contract(tree: Path) -> None:
    """The schema says what a setting is, never where it comes from: reading YAML in
    extender/config/settings.py, even inside a function, is refused."""
    schema = tree / "extender" / "config" / "settings.py"
    schema.write_text(
        schema.read_text() + "\n\ndef late() -> None:\n    import yaml  # noqa: F401\n"
    )
    result = lint_imports(tree)
    assert 1 == result.returncode, result.stdout
    assert "The settings' schema reads no file and no env var BROKEN" in result.stdout
    assert "extender.config.settings -> yaml" in result.stdout
