"""The Dockerfile agrees with the Deployments, read without building it.

The final stage is parsed and the build context is computed from .dockerignore;
tests/image builds and runs the image for real.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from extender.config.settings import Settings
from tests.deploy import image
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
    assert [str(p["containerPort"]) for p in container["ports"]] == stage.exposed[:1]


def test_the_image_exposes_the_extender_and_the_webhook_ports_archfit_listens_on() -> None:
    """EXPOSE names server.port and webhook.port as archfit defaults them."""
    defaults = Settings()
    expected = [str(defaults.server.port), str(defaults.webhook.port)]
    assert expected == image.final_stage().exposed


def test_the_final_image_stage_runs_archfit_as_a_numeric_non_root_user_and_builds_nothing() -> None:
    """python:3.11-slim, numeric non-zero USER, ENTRYPOINT archfit, no installs or compilers."""
    stage = image.final_stage()
    user, _, group = stage.user.partition(":")
    builds = [
        line
        for line in stage.run_lines
        for word in ("pip install", "apt-get", "apk ", "gcc", "build-essential", "setup.py")
        if word in line
    ]
    assert "python:3.11-slim" == stage.base
    assert (True, True) == (user.isdigit() and user != "0", group.isdigit())
    assert ["archfit"] == stage.entrypoint
    assert ["serve", "--config", "/etc/archfit/archfit.yaml"] == stage.cmd
    assert [] == builds


def test_the_build_context_holds_the_package_and_nothing_else() -> None:
    """.dockerignore admits pyproject.toml, the licence, the lock and extender/, never tests,
    venvs or git."""
    files = image.build_context()
    metadata = ("pyproject.toml", "docs/package.md", "LICENSE", "requirements.lock")
    unexpected = [f for f in files if not (f in metadata or f.startswith("extender/"))]
    assert {"requirements.lock", "extender/cli/main.py", "extender/__main__.py"} <= set(files)
    assert [] == unexpected
    assert [] == [f for f in files if "__pycache__" in f or f.endswith(".pyc")]
