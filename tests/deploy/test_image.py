"""The Dockerfile agrees with the Deployments, and its install step works.

No Docker engine is needed: the final stage is parsed, the build context is
computed from .dockerignore, and the stage's `pip install .` is replayed into a
fresh venv from exactly that context.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.deploy import image, render
from tests.deploy.render import Object, one

pytestmark = pytest.mark.e2e

ALL = ["base", "overlay", "chart", "chart_with_scheduler"]


@pytest.mark.parametrize("name", ALL)
def test_the_archfit_deployment_runs_the_image_as_its_user_with_its_config_and_port(
    request: pytest.FixtureRequest, name: str
) -> None:
    """runAsUser/Group, args, the ConfigMap mount and containerPort match USER, CMD and EXPOSE."""
    objects: list[Object] = request.getfixturevalue(name)
    stage = image.final_stage()
    spec = one(objects, "Deployment", "archfit")["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    user, _, group = stage.user.partition(":")
    config_path = Path(stage.cmd[stage.cmd.index("--config") + 1])
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volume = {v["name"]: v for v in spec["volumes"]}[mounts[str(config_path.parent)]]
    config_map = one(objects, "ConfigMap", "archfit-config")
    context = spec["securityContext"]
    assert (int(user), int(group)) == (context["runAsUser"], context["runAsGroup"])
    assert "command" not in container  # the image's ENTRYPOINT stays
    assert stage.cmd == container.get("args", stage.cmd)
    assert config_map["metadata"]["name"] == volume["configMap"]["name"]
    assert config_path.name in config_map["data"]
    assert stage.exposed == [str(p["containerPort"]) for p in container["ports"]]


def test_the_final_image_stage_runs_archfit_as_a_numeric_non_root_user_and_builds_nothing() -> None:
    """python:3.11-slim, numeric non-zero USER, ENTRYPOINT archfit, no installs or compilers."""
    stage = image.final_stage()
    user, _, group = stage.user.partition(":")
    builds = [
        line
        for line in stage.run_lines
        for word in ("pip ", "apt-get", "apk ", "gcc", "build-essential", "setup.py")
        if word in line
    ]
    assert "python:3.11-slim" == stage.base
    assert (True, True) == (user.isdigit() and user != "0", group.isdigit())
    assert ["archfit"] == stage.entrypoint
    assert ["serve", "--config", "/etc/archfit/archfit.yaml"] == stage.cmd
    assert [] == builds


def test_the_build_context_holds_the_package_and_nothing_else() -> None:
    """.dockerignore admits pyproject.toml and extender/, never tests, venvs, git or bytecode."""
    files = image.build_context()
    unexpected = [
        f for f in files if not (f in ("pyproject.toml", "README.md") or f.startswith("extender/"))
    ]
    assert {"pyproject.toml", "extender/cli.py", "extender/__main__.py"} <= set(files)
    assert [] == unexpected
    assert [] == [f for f in files if "__pycache__" in f or f.endswith(".pyc")]


def test_the_images_install_step_replayed_from_the_build_context_runs_the_shipped_config(
    base: list[Object], tmp_path: Path
) -> None:
    """`pip install .` from only the admitted files gives an archfit that loads the ConfigMap."""
    context = tmp_path / "context"
    for relative in image.build_context():
        (context / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(render.REPO / relative, context / relative)
    venv = tmp_path / "opt-archfit"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "-q", "."],
        cwd=context,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=env,
    )
    assert 0 == install.returncode, install.stderr[-3000:]
    config_file = tmp_path / "archfit.yaml"
    config_file.write_text(one(base, "ConfigMap", "archfit-config")["data"]["archfit.yaml"])
    clean_env = {k: v for k, v in os.environ.items() if not k.startswith("ARCHFIT_")}
    shown = subprocess.run(
        [venv / "bin" / "archfit", "config", "--config", config_file],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=clean_env,
        cwd=tmp_path,
    )
    assert 0 == shown.returncode, shown.stderr[-3000:]
    effective = yaml.safe_load(shown.stdout)
    assert ("in-cluster", 8888) == (effective["kubernetes"]["mode"], effective["server"]["port"])
