"""The distribution builds as users and the image build it: no deprecated metadata, and the
licence text inside."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[2]


class Built(NamedTuple):
    output: str
    """pip's verbose output (setuptools' warnings included)."""
    metadata: list[str]
    """The lines of the wheel's METADATA."""
    licence: str
    """The wheel's .dist-info/licenses/LICENSE, or "" if it has none."""
    names: list[str]
    """Every file the wheel holds."""


def build_wheel(tmp_path: Path) -> tuple[Path, str]:
    """The wheel, built in `tmp_path` as users build it, and pip's verbose output (a minute
    or more: pip makes an isolated build environment)."""
    # Build from a copy: setuptools writes build/ and *.egg-info beside the sources.
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "docs/package.md", "LICENSE", "extender"):
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy2
        (source / name).parent.mkdir(exist_ok=True)
        copy(ROOT / name, source / name)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(tmp_path), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert 0 == done.returncode, done.stderr[-2000:]
    (wheel,) = tmp_path.glob("archfit-*.whl")
    return wheel, done.stdout + done.stderr


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """One wheel build."""
    wheel, output = build_wheel(tmp_path_factory.mktemp("wheel"))
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        licences = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        return Built(
            output=output,
            metadata=archive.read(metadata).decode().splitlines(),
            licence=archive.read(licences[0]).decode() if licences else "",
            names=names,
        )


def test_the_wheel_builds_without_setuptools_deprecation_warnings(built: Built) -> None:
    """The old `license = {text = ...}` table made setuptools warn that builds will break."""
    assert "SetuptoolsDeprecationWarning" not in built.output, built.output[-3000:]
    assert "License-Expression: Apache-2.0" in built.metadata


def test_the_wheel_ships_the_apache_licence_text(built: Built) -> None:
    """The metadata says Apache-2.0; its section 4(a) asks that the text go with every copy."""
    assert "License-File: LICENSE" in built.metadata
    assert "Version 2.0, January 2004" in built.licence
    assert "END OF TERMS AND CONDITIONS" in built.licence


def test_the_wheel_names_where_the_project_lives(built: Built) -> None:
    """[project.urls] reaches the metadata, which PyPI and pip show."""
    urls = [line for line in built.metadata if line.startswith("Project-URL: ")]
    assert "Project-URL: Source, https://github.com/archfit/archfit" in urls


def test_the_wheel_says_who_it_is_for_and_how_to_find_it(built: Built) -> None:
    """An index lists and searches by classifiers and keywords, and names the authors."""
    fields = {line.split(": ", 1)[0] for line in built.metadata if ": " in line}
    classifiers = [line for line in built.metadata if line.startswith("Classifier: ")]
    assert (True, True) == (
        {"Author", "Keywords"} <= fields,
        "Classifier: Programming Language :: Python :: 3.11" in classifiers,
    )


def test_the_long_description_links_only_to_absolute_addresses(built: Built) -> None:
    """A package index shows the description without the repository: a relative link or image
    (`docs/webhook.md`, `#quick-start`), which the README has, leads nowhere there."""
    description = "\n".join(built.metadata[built.metadata.index("") + 1 :])
    targets = re.findall(r"\]\(([^)\s]+)\)", description)
    assert [] == [target for target in targets if not target.startswith("https://")]


def test_the_wheel_ships_no_test_support(built: Built) -> None:
    """The tests' fakes and helpers live in tests/ (tests/support/fakes.py): a module the
    production code never imports has no place in what users install."""
    support = {"testing", "fakes", "conftest"}
    shipped = [
        name
        for name in built.names
        if name.startswith("tests/") or (name.endswith(".py") and Path(name).stem in support)
    ]
    assert [] == shipped
