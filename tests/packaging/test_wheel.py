"""The distribution builds as users and the image build it: no deprecated metadata."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_builds_without_setuptools_deprecation_warnings(tmp_path: Path) -> None:
    """The old `license = {text = ...}` table made setuptools warn that builds will break."""
    # Build from a copy: setuptools writes build/ and *.egg-info beside the sources.
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "extender"):
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy2
        copy(ROOT / name, source / name)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(tmp_path), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert 0 == done.returncode, done.stderr[-2000:]
    output = done.stdout + done.stderr
    assert "SetuptoolsDeprecationWarning" not in output, output[-3000:]
    (wheel,) = tmp_path.glob("archfit-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = archive.read(name).decode()
    assert "License-Expression: Apache-2.0" in metadata.splitlines()
