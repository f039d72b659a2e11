"""The README's first screen works as written: the opening block installs and serves, and only
that; what tests/run.sh does to the machine comes before its command; the quick start, run in
bash from another shell than the serve's, shows an arm64 node rejected."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.prerequisites import require_binary
from tests.support.process import free_port
from tests.support.registry import REGISTRY_BINARY

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
SETUP = "python3 -m venv .venv && .venv/bin/pip install -q -e ."
SERVE = ".venv/bin/archfit serve > archfit.log 2>&1 & echo $! > archfit.pid"


def _quick_start() -> str:
    start = README.index("## Quick start")
    return README[start : README.index("\n## ", start)]


def _blocks(text: str, language: str) -> list[str]:
    """The bodies of the fenced code blocks of `language`, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```$", text, flags=re.DOTALL | re.MULTILINE)


def test_the_readme_opens_with_install_and_serve_only() -> None:
    """The first block installs and serves in the background, its pid in a file; nothing
    that needs sudo or builds Go for tens of minutes."""
    assert [SETUP, SERVE] == _blocks(README, "sh")[0].splitlines()


def test_the_whole_suite_comes_only_after_what_it_does_to_the_machine() -> None:
    """`bash tests/run.sh` is first offered as a command after the warning, not before."""
    blocks = _blocks(README, "sh")
    first = next(i for i, block in enumerate(blocks) if "tests/run.sh" in block)
    warning = README.index("**What it does to the machine**")
    assert (["bash tests/run.sh"], True) == (
        blocks[first].splitlines(),
        README.index("```sh\n" + blocks[first]) > warning,
    )


def test_the_readme_says_what_tests_run_sh_changes_before_the_quick_start() -> None:
    """Every Debian package run.sh installs, /etc/hosts and the caches are named up front."""
    run_sh = (ROOT / "tests" / "run.sh").read_text()
    (listed,) = re.findall(r"^packages=\((.*?)\)", run_sh, flags=re.DOTALL | re.MULTILINE)
    wanted = [*listed.split(), "/etc/hosts", "~/.cache/archfit-e2e", "~/.cache/archfit-image"]
    first_screen = " ".join(README.partition("## Quick start")[0].split())
    assert [] == [word for word in wanted if word not in first_screen]


@pytest.mark.integration
def test_the_offline_quick_start_from_a_second_shell_rejects_the_arm64_node(
    tmp_path: Path,
) -> None:
    """The opening serve in one bash, which exits; the readiness loop, the offline variant and
    the filter call as written in another: the old serve is stopped by its pid file, and the
    answer comes from the new one."""
    require_binary(REGISTRY_BINARY, "docker-registry", "README quick start")
    wait, _online, offline, ask = _blocks(_quick_start(), "sh")
    (shown,) = _blocks(_quick_start(), "text")
    port = free_port()
    # The clone's venv stands in for the one the first command makes, which has archfit's
    # dependencies but not the test extra: a pytest that cannot be imported stands for that.
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    (tmp_path / "no-test-extra").mkdir()
    (tmp_path / "no-test-extra" / "pytest.py").write_text("raise ImportError('no pytest here')\n")
    path = f"{tmp_path / 'no-test-extra'}{os.pathsep}{ROOT}"
    environ = {**os.environ, "ARCHFIT_SERVER__PORT": str(port), "PYTHONPATH": path}

    def bash(*lines: str) -> subprocess.CompletedProcess[str]:
        script = "\n".join(["set -e", *lines]).replace("localhost:8888", f"localhost:{port}")
        return subprocess.run(
            ["bash", "-c", script],
            cwd=tmp_path,
            env=environ,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )

    first = bash(SERVE, wait)
    try:
        second = bash(wait, offline, ask)
    finally:
        bash("kill $(cat archfit.pid demo.pid 2>/dev/null) 2>/dev/null || true")
    log = (tmp_path / "archfit.log").read_text()
    assert (0, 0) == (first.returncode, second.returncode), second.stderr[-3000:] + log
    image = (tmp_path / "demo" / "image").read_text().strip()
    answer = json.loads(second.stdout.strip().splitlines()[-1])
    expected = json.loads(shown.replace("docker.io/amd64/alpine:3.20", image))
    assert expected == answer


def test_the_readme_and_the_operations_guide_say_nodes_rejected_is_split_by_rule() -> None:
    """explain.py logs one nodes_rejected line per verdict, and a verdict carries the rule."""
    operations = (ROOT / "docs" / "operations.md").read_text()
    texts = [" ".join(README.split()), " ".join(operations.split())]
    assert [True, True] == ["per reason, node platform and matching rule" in t for t in texts]


def test_the_readme_says_how_to_install_the_cli_before_it_writes_bare_archfit_commands() -> None:
    """`archfit audit` on an operator's machine needs an `archfit` on PATH: pipx."""
    commands = [
        line.strip()
        for block in _blocks(README, "sh")
        for line in block.splitlines()
        if line.strip().startswith("archfit ")
    ]
    first_bare = README.index(commands[0])
    assert (True, True) == (
        "pipx install" in README[:first_bare],
        "`--kubeconfig PATH` and `--context NAME`" in README[:first_bare],
    )


def test_the_demo_registry_answers_help_with_its_usage_and_makes_nothing(tmp_path: Path) -> None:
    """`--help` is help, not a directory named `--help` and a traceback."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.demo_registry", "--help"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (0, "usage: python -m tests.support.demo_registry", [], "") == (
        done.returncode,
        done.stdout.split(" [")[0],
        list(tmp_path.iterdir()),
        done.stderr,
    )
