"""deploy/README.md installs the image you built: nothing publishes ghcr.io/archfit/archfit,
so every install command names yours, and the build command pins the base and fills the
labels."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.deploy import render

DEPLOY_README = (render.REPO / "deploy" / "README.md").read_text()
SHIPPED = "ghcr.io/archfit/archfit"


def _section(title: str) -> str:
    start = DEPLOY_README.index(title)
    return DEPLOY_README[start : DEPLOY_README.index("\n## ", start + 1)]


def _blocks(text: str) -> list[str]:
    return re.findall(r"^ *```sh\n(.*?)^ *```$", text, flags=re.DOTALL | re.MULTILINE)


def test_the_build_command_pins_the_base_and_fills_the_labels() -> None:
    """buildx gets PYTHON_IMAGE, VERSION and REVISION, as the Dockerfile's header does."""
    (build,) = [b for b in _blocks(DEPLOY_README) if "docker buildx build" in b]
    assert [] == [
        arg
        for arg in ("PYTHON_IMAGE=", "VERSION=", "REVISION=")
        if f"--build-arg {arg}" not in build
    ]


def test_no_install_command_applies_the_shipped_image() -> None:
    """Every `kubectl apply -k` goes through the overlay that names your image; every
    `helm install` takes the values file that does."""
    lines = [line for block in _blocks(DEPLOY_README) for line in block.splitlines()]
    applies = [line for line in lines if "kubectl apply -k" in line]
    installs = [line for line in lines if "helm install" in line]
    assert ([], []) == (
        [line for line in applies if "deploy/overlays/mine" not in line],
        [line for line in installs if "-f my-image.yaml" not in line],
    )


def test_every_kustomize_instruction_points_at_the_one_overlay() -> None:
    """In the guides and the manifests' own comments: every `apply -k`/`delete -k` names
    deploy/overlays/mine, every component is added there, and no step edits a shipped file
    (a copy of a layout, an overlay elsewhere, base/archfit.yaml)."""
    texts = [render.REPO / "README.md", render.REPO / "deploy" / "README.md"]
    texts += sorted((render.REPO / "docs").glob("*.md"))
    texts += sorted((render.REPO / "deploy" / "kustomize").rglob("kustomization.yaml"))
    elsewhere = re.compile(
        r"(apply|delete) -k (?!deploy/overlays/mine)|components: \[\.\./components|"
        r"a copy of `?kustomize/|kustomize/my-cluster|in `deploy/kustomize/base/archfit\.yaml`"
    )
    found = [
        f"{path.relative_to(render.REPO)}: {line.strip()}"
        for path in texts
        for line in path.read_text().splitlines()
        if elsewhere.search(line)
    ]
    assert [] == found


def test_settings_edited_in_the_overlay_reach_the_configmap_and_no_shipped_file(
    kustomize: Path, tmp_path: Path
) -> None:
    """The install block copies archfit.yaml into the overlay; a setting changed there is what
    the generated ConfigMap holds, and the shipped base stays as it is."""
    (block,) = _blocks(_section("## Install with kustomize"))
    writes = block[: block.index("kubectl apply")]
    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy" / "kustomize").symlink_to(render.REPO / "deploy" / "kustomize")
    subprocess.run(["bash", "-ec", writes], cwd=tmp_path, check=True, timeout=60)
    mine = tmp_path / "deploy" / "overlays" / "mine" / "archfit.yaml"
    mine.write_text(mine.read_text().replace("mode: enforce", "mode: dry-run", 1))
    objects = render.kustomize_build(kustomize, mine.parent)
    config_map = render.one(objects, "ConfigMap", "archfit-config")
    settings = render.config_file(config_map, "archfit.yaml")
    shipped = (render.REPO / "deploy" / "kustomize" / "base" / "archfit.yaml").read_text()
    assert ("dry-run", True) == (settings["policy"]["mode"], "\n  mode: enforce\n" in shipped)


@pytest.mark.parametrize("layout", ["base", "webhook", "admission-policy", "second-scheduler"])
def test_the_install_overlay_runs_your_image_in_every_layout(
    kustomize: Path, tmp_path: Path, layout: str
) -> None:
    """The install block's overlay, written by bash as it stands, built by kustomize: the
    Deployment runs the image it names, not the shipped one."""
    (block,) = _blocks(_section("## Install with kustomize"))
    writes = block[: block.index("kubectl apply")].replace("layout=base", f"layout={layout}")
    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy" / "kustomize").symlink_to(render.REPO / "deploy" / "kustomize")
    subprocess.run(["bash", "-ec", writes], cwd=tmp_path, check=True, timeout=60)
    objects = render.kustomize_build(kustomize, tmp_path / "deploy" / "overlays" / "mine")
    spec = render.one(objects, "Deployment", "archfit")["spec"]["template"]["spec"]
    assert ["registry.example.com/platform/archfit:0.1.0"] == [
        c["image"] for c in spec["containers"]
    ]
