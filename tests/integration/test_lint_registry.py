"""`archfit lint` online, against a real registry process: each image is read once however
many workloads name it, an image without arm64 gets the newer tag that has it, and an image
the registry does not have is a finding of its own."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from extender.cli.main import main
from tests.support.fixtures import PublishedRegistry
from tests.support.images import Pusher
from tests.support.sarif import schema_errors

pytestmark = pytest.mark.integration

REPLICAS = 40


def _config(path: Path, host: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "registry": {
                    "hosts": {host: {"plainHttp": True}},
                    "allowedNetworks": ["127.0.0.1/32"],
                },
                "kubernetes": {"mode": "off"},
            }
        )
    )
    return path


def _deployment(name: str, image: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}], **spec}}},
    }


def test_online_each_image_is_read_once_and_an_amd64_only_tag_gets_the_tag_with_arm64(
    public_registry: PublishedRegistry, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Forty workloads of one amd64-only tag, pinned to amd64: one warning each, naming the
    newer tag that runs on arm64; the registry saw one request per manifest it was asked for."""
    registry = public_registry.registry
    pusher = Pusher(registry.url)
    repo = f"lint-{uuid.uuid4().hex[:8]}/api"
    old = pusher.single(repo, "1.2.0", "linux/amd64")
    pusher.index(repo, "1.3.0", ["linux/amd64", "linux/arm64"])
    pin = {"nodeSelector": {"kubernetes.io/arch": "amd64"}}
    manifests = tmp_path / "rendered.yaml"
    manifests.write_text(
        yaml.safe_dump_all([_deployment(f"api-{i}", old.reference, **pin) for i in range(REPLICAS)])
    )
    config = _config(tmp_path / "archfit.yaml", registry.host)
    mark = registry.mark()
    status = main(
        ["lint", "--config", str(config), str(manifests), "-o", "sarif", "--fail-on", "warning"]
    )
    log = json.loads(capsys.readouterr().out)
    seen = Counter(
        (r.method, r.path) for r in registry.requests_since(mark) if "/manifests/" in r.path
    )
    assert [] == schema_errors(log)
    results = log["runs"][0]["results"]
    assert (1, REPLICAS) == (status, len(results))
    assert {f"{old.reference} has no linux/arm64; arm64 from tag 1.3.0"} == {
        r["message"]["text"] for r in results
    }
    assert {} == {request: n for request, n in seen.items() if n > 1}, seen
    assert ("GET", f"/v2/{repo}/manifests/1.2.0") in seen


def test_online_an_image_the_registry_does_not_have_is_a_finding_not_a_pass(
    public_registry: PublishedRegistry, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 404 is platforms-unknown (an error), never a silent pass."""
    registry = public_registry.registry
    missing = f"{registry.host}/lint-absent/{uuid.uuid4().hex[:8]}:1"
    manifests = tmp_path / "rendered.yaml"
    manifests.write_text(yaml.safe_dump(_deployment("gone", missing)))
    config = _config(tmp_path / "archfit.yaml", registry.host)
    status = main(["lint", "--config", str(config), str(manifests), "-o", "json"])
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert (1, ["platforms-unknown"]) == (status, [f["rule"] for f in findings])
