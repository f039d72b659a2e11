"""`archfit lint` on the project's own deploy/, rendered by real kustomize and helm: clean
offline (CI lints what it ships), and, with the chart pointed at a local registry whose image
lacks arm64, a finding located at the rendered image's line.

tests/deploy/deploy-platforms.json says what the shipped images run on, as `archfit inspect
-o json` writes it: archfit's own image is built for linux/amd64 and linux/arm64
(tests/image/build.sh), kube-scheduler for Kubernetes' server platforms (linux/amd64,
linux/arm64, linux/ppc64le, linux/s390x: KUBE_SUPPORTED_SERVER_PLATFORMS, hack/lib/golang.sh).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import yaml

from extender.cli.main import main
from tests.deploy import render
from tests.support.images import Pusher
from tests.support.registry import RegistryProcess
from tests.support.sarif import schema_errors

PLATFORMS = Path(__file__).resolve().parent / "deploy-platforms.json"
KUSTOMIZATIONS = (
    render.KUSTOMIZE_BASE,
    render.KUSTOMIZE_SECOND_SCHEDULER,
    render.KUSTOMIZE_WEBHOOK,
    render.KUSTOMIZE_POLICY,
)


pytestmark = pytest.mark.usefixtures("fresh_logging")


def test_every_shipped_render_lints_clean_at_every_level(
    kustomize: Path, helm: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kustomize builds and helm templates of deploy/, offline: no finding even at `note`,
    and the SARIF written is valid."""
    paths = []
    for directory in KUSTOMIZATIONS:
        path = tmp_path / f"kustomize-{directory.name}.yaml"
        path.write_text(render.kustomize_output(kustomize, directory))
        paths.append(str(path))
    for name, values in (("default", None), ("webhook", {"webhook": {"enabled": True}})):
        path = tmp_path / f"helm-{name}.yaml"
        path.write_text(render.helm_output(helm, values, tmp_path))
        paths.append(str(path))
    status = main(
        ["lint", *paths, "--platforms", str(PLATFORMS), "-o", "sarif", "--fail-on", "note"]
    )
    captured = capsys.readouterr()
    log = json.loads(captured.out)
    assert [] == schema_errors(log)
    assert (0, []) == (status, log["runs"][0]["results"]), captured.err
    assert "0 errors, 0 warnings, 0 notes" in captured.err
    assert len(paths) == len(log["runs"][0]["artifacts"])


def test_the_chart_pointed_at_an_amd64_only_image_is_an_error_at_its_rendered_line(
    helm: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`helm template` with image.repository in a local registry that has amd64 only: online,
    one platform-missing error, at the line of the Deployment's image in the output."""
    registry = RegistryProcess.start(tmp_path / "registry")
    try:
        repository = f"{registry.host}/lint-{uuid.uuid4().hex[:8]}/archfit"
        Pusher(registry.url).single(repository.split("/", 1)[1], "0.1.0", "linux/amd64")
        values = {"image": {"repository": repository, "tag": "0.1.0"}}
        rendered = tmp_path / "chart.yaml"
        rendered.write_text(render.helm_output(helm, values, tmp_path))
        config = tmp_path / "archfit.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "registry": {
                        "hosts": {registry.host: {"plainHttp": True}},
                        "allowedNetworks": ["127.0.0.1/32"],
                    },
                    "kubernetes": {"mode": "off"},
                    "webhook": {"architectures": ["linux/amd64", "linux/arm64"]},
                }
            )
        )
        status = main(["lint", "--config", str(config), str(rendered), "-o", "sarif"])
    finally:
        registry.stop()
    log = json.loads(capsys.readouterr().out)
    assert [] == schema_errors(log)
    results = log["runs"][0]["results"]
    image_line = next(
        number
        for number, line in enumerate(rendered.read_text().splitlines(), 1)
        if f'image: "{repository}:0.1.0"' in line
    )
    assert (1, [("platform-missing", image_line)]) == (
        status,
        [
            (r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["startLine"])
            for r in results
        ],
    )
