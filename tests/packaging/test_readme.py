"""The README is what a newcomer reads first: what archfit is, the two commands (run it; test
it), the quick start and a map of the docs; short, linking the project's files relatively, and
copying nothing a doc holds. Its blocks work as written: the first one run twice leaves the
first archfit alone, and the quick start, in bash from another shell than the first serve's,
shows an arm64 node rejected and arm64 preferred."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.prerequisites import require_binary
from tests.support.process import free_port
from tests.support.registry import REGISTRY_BINARY

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
SETUP = "python3 -m venv .venv && .venv/bin/pip install -q -e ."
SERVE = ".venv/bin/archfit serve --detach --pid-file archfit.pid --log-file archfit.log"
WHOLE_SUITE = "bash tests/run.sh"
UNIT_AND_APP = ".venv/bin/pip install -q -e '.[test]' && .venv/bin/pytest -q tests/unit tests/app"
MOST_LINES = 150
"""What a newcomer reads in five minutes."""


def _section(title: str, text: str = README) -> str:
    start = text.index(title)
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def _blocks(text: str, language: str) -> list[str]:
    """The bodies of the fenced code blocks of `language`, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```$", text, flags=re.DOTALL | re.MULTILINE)


def _first_paragraph(text: str) -> str:
    return " ".join(text.split("\n\n")[1].split())


def test_the_readme_says_what_archfit_is_first_then_how_to_run_and_test_it() -> None:
    """One paragraph on all it does (not only "a kube-scheduler extender"), then the two
    commands: install and serve, and the whole suite as CI runs it; then the unit and app
    suites alone."""
    opening = _first_paragraph(README)
    parts = ["kube-scheduler extender", "admission webhook", "MutatingAdmissionPolicy", "audit"]
    headings = re.findall(r"^## (.+)$", README, flags=re.MULTILINE)
    run_and_test = _blocks(_section("## Run it; test it"), "sh")
    assert ([], "Run it; test it", [SETUP, SERVE], [WHOLE_SUITE], [UNIT_AND_APP]) == (
        [part for part in parts if part not in opening],
        headings[0],
        run_and_test[0].splitlines(),
        run_and_test[1].splitlines(),
        run_and_test[2].splitlines(),
    )


def test_the_readme_is_short_and_leaves_reference_to_the_docs() -> None:
    """At most 150 lines; no settings table (docs/configuration.md has it), no rule table, no
    development notes."""
    copied = ["| `server.host` |", "| node runtime | rule |", "`requirements-min.lock`"]
    assert (True, []) == (
        len(README.splitlines()) <= MOST_LINES,
        [text for text in copied if text in README],
    )


def test_the_readme_links_the_projects_own_files_relatively() -> None:
    """From a clone, a fork or an offline mirror, a link to the project's own docs stays in
    it (tests/packaging/test_doc_references.py checks that each leads somewhere)."""
    assert [] == re.findall(r"\]\((https://github\.com/archfit/archfit[^)]*)\)", README)


def test_the_readme_maps_every_doc() -> None:
    """Each guide in docs/ and deploy/README.md is one link away from the README."""
    guides = [f"docs/{p.name}" for p in sorted((ROOT / "docs").glob("*.md"))]
    guides = [g for g in guides if g != "docs/package.md"] + ["deploy/README.md"]
    assert [] == [guide for guide in guides if f"]({guide})" not in README]


def test_the_package_description_opens_as_the_readme_does() -> None:
    """docs/package.md is the README's opening for a package index (absolute links only)."""
    description = (ROOT / "docs" / "package.md").read_text()
    assert _first_paragraph(README) == _first_paragraph(description)


def test_the_whole_suite_comes_only_after_what_it_does_to_the_machine() -> None:
    """`bash tests/run.sh` is first offered after the warning and its link to the full list."""
    blocks = _blocks(README, "sh")
    first = next(i for i, block in enumerate(blocks) if "tests/run.sh" in block)
    warning = README.index("changes the machine, not only the clone")
    link = "(docs/development.md#what-testsrunsh-does-to-the-machine)"
    assert (["bash tests/run.sh"], True, True) == (
        blocks[first].splitlines(),
        README.index("```sh\n" + blocks[first]) > warning,
        link in README[warning : README.index("```sh\n" + blocks[first])],
    )


def test_the_development_guide_names_everything_tests_run_sh_changes() -> None:
    """Every Debian package run.sh installs, /etc/hosts and the caches are named."""
    run_sh = (ROOT / "tests" / "run.sh").read_text()
    (listed,) = re.findall(r"^packages=\((.*?)\)", run_sh, flags=re.DOTALL | re.MULTILINE)
    wanted = [*listed.split(), "/etc/hosts", "~/.cache/archfit-e2e", "~/.cache/archfit-image"]
    development = (ROOT / "docs" / "development.md").read_text()
    section = " ".join(_section("## What `tests/run.sh` does to the machine", development).split())
    assert [] == [word for word in wanted if word not in section]


def _shell(tmp_path: Path, port: int) -> Callable[..., subprocess.CompletedProcess[str]]:
    """bash in `tmp_path` as a newcomer's clone: its .venv is this one, which has archfit's
    dependencies but stands for one without the test extra (a pytest that cannot be imported),
    and localhost:8888 is `port`."""
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

    return bash


def test_the_first_block_run_twice_leaves_the_first_archfit_and_its_files_alone(
    tmp_path: Path,
) -> None:
    """The second serve refuses the pid file of the running one and touches neither file; the
    quick start's stop line then ends the first, which removes its pid file."""
    bash = _shell(tmp_path, free_port())
    stop = _blocks(_section("## Quick start"), "sh")[0].splitlines()[0]
    first = bash(SERVE)
    pid_file, log_file = tmp_path / "archfit.pid", tmp_path / "archfit.log"
    try:
        before = (pid_file.read_text(), log_file.read_text())
        second = bash(SERVE)
        after = (pid_file.read_text(), log_file.read_text())
    finally:
        stopped = bash(stop)
    assert (0, 1, True) == (
        first.returncode,
        second.returncode,
        f"archfit.pid names process {before[0].strip()}, which is running" in second.stderr,
    )
    assert (before, 0, False) == (after, stopped.returncode, pid_file.exists())


@pytest.mark.integration
def test_the_offline_quick_start_from_a_second_shell_rejects_arm64_and_prefers_it(
    tmp_path: Path,
) -> None:
    """The opening serve in one bash, which exits; the quick start's blocks as written in
    another: the old serve is stopped by its pid file, the new one reads the demo registry,
    and its answers are the README's."""
    require_binary(REGISTRY_BINARY, "docker-registry", "README quick start")
    restart, reject, prefer = _blocks(_section("## Quick start"), "sh")
    rejected, preferred = _blocks(_section("## Quick start"), "text")
    bash = _shell(tmp_path, free_port())
    first = bash(SERVE)
    try:
        second = bash(restart, reject, prefer)
    finally:
        bash("kill $(cat archfit.pid demo.pid 2>/dev/null) 2>/dev/null || true")
    log = (tmp_path / "archfit.log").read_text()
    assert (0, 0) == (first.returncode, second.returncode), second.stderr[-3000:] + log
    image = (tmp_path / "demo" / "image").read_text().strip()
    answers = [json.loads(line) for line in second.stdout.strip().splitlines()[-2:]]
    expected = [
        json.loads(re.sub(r"127\.0\.0\.1:PORT/demo/amd64-only:1\.0", image, rejected)),
        json.loads(preferred),
    ]
    assert expected == answers


def test_the_operations_guide_says_nodes_rejected_is_split_by_rule() -> None:
    """explain.py logs one nodes_rejected line per verdict, and a verdict carries the rule."""
    operations = " ".join((ROOT / "docs" / "operations.md").read_text().split())
    assert "per reason, node platform and matching rule" in operations


def test_the_cli_guide_says_how_to_install_it_before_it_writes_bare_archfit_commands() -> None:
    """`archfit audit` on an operator's machine needs an `archfit` on PATH: pipx. The README
    itself writes only the clone's `.venv/bin/archfit`."""
    guide = (ROOT / "docs" / "command-line.md").read_text()
    bare = [
        line.strip()
        for text in (README, guide)
        for block in _blocks(text, "sh")
        for line in block.splitlines()
        if line.strip().startswith("archfit ")
    ]
    first_bare = guide.find("`archfit ")
    assert ([], True) == (bare, "pipx install" in guide[:first_bare])


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


def test_the_demo_registry_says_how_to_install_the_registry_without_sudo_for_root(
    tmp_path: Path,
) -> None:
    """apt-get as it must be typed here: `sudo` only for a user who is not root."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.demo_registry", str(tmp_path / "demo")],
        env={**os.environ, "PYTHONPATH": str(ROOT), "DOCKER_REGISTRY_BINARY": "/nonexistent"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    sudo = "sudo " if os.geteuid() != 0 else ""
    expected = f"demo_registry: /nonexistent not found: {sudo}apt-get install -y docker-registry"
    assert (3, expected) == (done.returncode, done.stderr.split(", or name")[0])


def test_the_package_and_the_chart_say_what_archfit_is_beyond_an_extender() -> None:
    """pyproject's and Chart.yaml's descriptions name the webhook too."""
    import tomllib

    import yaml

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["description"]
    chart = yaml.safe_load((ROOT / "deploy" / "helm" / "archfit" / "Chart.yaml").read_text())
    assert [True, True] == ["admission webhook" in text for text in (project, chart["description"])]
