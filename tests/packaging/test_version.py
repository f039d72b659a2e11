"""The version is written once, in extender/__init__.py; every other place that names it
agrees, and the Dockerfile's documented build command reads it from there."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from extender import __version__

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "archfit"
KUSTOMIZE_BASE = ROOT / "deploy" / "kustomize" / "base"


def _yaml(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def test_the_chart_and_its_image_tag_carry_the_package_version() -> None:
    """Chart.yaml's version and appVersion and values.yaml's image.tag are __version__."""
    chart = _yaml(CHART / "Chart.yaml")
    values = _yaml(CHART / "values.yaml")
    expected = {"version": __version__, "appVersion": __version__, "image.tag": __version__}
    actual = {
        "version": chart["version"],
        "appVersion": chart["appVersion"],
        "image.tag": values["image"]["tag"],
    }
    assert expected == actual


def test_kustomize_pins_the_package_version_of_the_image() -> None:
    """The base's images: newTag and the Deployment's own image both name __version__."""
    kustomization = _yaml(KUSTOMIZE_BASE / "kustomization.yaml")
    tags = {i["name"]: i["newTag"] for i in kustomization["images"]}
    deployment = (KUSTOMIZE_BASE / "deployment.yaml").read_text()
    repository = "ghcr.io/archfit/archfit"
    images = re.findall(rf"image: ({re.escape(repository)}:\S+)", deployment)
    assert ({repository: __version__}, [f"{repository}:{__version__}"]) == (tags, images)


def test_the_dockerfile_build_command_reads_the_version_instead_of_writing_it() -> None:
    """No version literal in the Dockerfile: its documented command derives VERSION and the tag
    from extender/__init__.py, and the labels come from those build arguments."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert [] == re.findall(r"\b\d+\.\d+\.\d+\b", dockerfile)
    assert "extender/__init__.py" in dockerfile
    assert 'org.opencontainers.image.version="${VERSION}"' in dockerfile


def test_the_image_description_label_is_the_packages_description() -> None:
    """The label says what pyproject.toml says (the built image's test checks it too, but
    only after a build of several minutes)."""
    import tomllib

    description = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["description"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert f'org.opencontainers.image.description="{description}"' in dockerfile
