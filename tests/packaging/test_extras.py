"""Each extra carries what the code it enables imports: the wheel with one extra goes into a
clean venv (through pip's own cache, at the versions of requirements-test.lock), and what the
extra promises is imported there. `pip install -e '.[test]' && pytest tests/unit` once failed
on a module the `test` extra did not install (aiocache)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
import venv
from collections.abc import Iterable
from pathlib import Path

import pytest

from tests.packaging.test_wheel import ROOT, build_wheel

OURS = {"extender", "tests", "bench"}
EXTRAS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def third_party_imports(*paths: Path) -> set[str]:
    """The top-level modules the Python files under `paths` import, but the standard
    library's and this repository's own."""
    found: set[str] = set()
    for path in paths:
        for source in [path] if path.is_file() else sorted(path.rglob("*.py")):
            for node in ast.walk(ast.parse(source.read_text(), str(source))):
                if isinstance(node, ast.Import):
                    found.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - OURS


def _extender_modules() -> set[str]:
    return {
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for path in (ROOT / "extender").rglob("*.py")
    }


REDIS_TIER = "extender.registry.redis_tier"
TEST_SOURCES = [
    ROOT / "tests" / name for name in ("unit", "app", "support", "conftest.py", "objects.py")
]

#: What each extra promises to make importable ("" is the plain install).
PROMISES: dict[str, set[str]] = {
    "": (_extender_modules() - {REDIS_TIER}) | {"uvloop"},  # a dependency on Linux
    "redis": {REDIS_TIER},
    "uvloop": {"uvloop"},
    # tests/unit and tests/app exercise the Redis tier and uvloop too; the pytest plugins
    # are named in pyproject's pytest options, not imported.
    "test": {
        *third_party_imports(*TEST_SOURCES),
        REDIS_TIER,
        "uvloop",
        "pytest_aiohttp",
        "pytest_asyncio",
    },
    "lint": {"mypy", "importlinter", "ruff", "yaml-stubs"},
    "bench": third_party_imports(ROOT / "bench"),
}


def test_every_extra_says_what_it_promises() -> None:
    """A new extra needs its line in PROMISES, or this file would not test it."""
    assert sorted(EXTRAS) == sorted(set(PROMISES) - {""})


def _constraints(tmp_path: Path) -> Path:
    """requirements-test.lock's pins without their hashes: the versions CI tests, which
    pip's cache already holds once the dev venv is installed."""
    text = re.sub(r"\\\n", " ", (ROOT / "requirements-test.lock").read_text())
    pins = [  # a universal lock pins some twice, each with its environment marker
        line.split(" --hash")[0].strip()
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    path = tmp_path / "constraints.txt"
    path.write_text("\n".join(pins) + "\n")
    return path


def _missing(python: Path, modules: Iterable[str]) -> list[str]:
    """Which of `modules` do not import with `python` (a stub-only package, such as
    yaml-stubs, is looked for, not imported)."""
    script = (
        "import importlib, importlib.util, sys\n"
        "for name in sys.argv[1:]:\n"
        "    try:\n"
        "        if name.endswith('-stubs'):\n"
        "            assert importlib.util.find_spec(name) is not None\n"
        "        else:\n"
        "            importlib.import_module(name)\n"
        "    except Exception as error:\n"
        "        print(name); print(name, repr(error), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [str(python), "-c", script, *sorted(modules)], capture_output=True, text=True, timeout=300
    )
    return done.stdout.split() + ([done.stderr[-2000:]] if done.stdout else [])


@pytest.fixture(scope="module")
def built_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))[0]


@pytest.mark.parametrize("extra", ["", *EXTRAS])
def test_an_extra_installed_alone_imports_what_it_promises(
    extra: str, tmp_path: Path, built_wheel: Path
) -> None:
    """`pip install 'archfit[extra]'` in an empty venv, then import each promised module."""
    env = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env)
    python = env / "bin" / "python"
    requirement = f"archfit[{extra}] @ {built_wheel.as_uri()}" if extra else str(built_wheel)
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-compile",
         "-c", str(_constraints(tmp_path)), requirement],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert 0 == install.returncode, install.stderr[-2000:]
    assert [] == _missing(python, PROMISES[extra])
