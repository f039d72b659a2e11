"""One story per layout: deploy/README.md's Helm commands, the objects the chart makes for
them, and the NOTES.txt `helm install` prints (which must never tell an install to do what
it already did)."""

from __future__ import annotations

import itertools
import os
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy import render

pytestmark = pytest.mark.e2e

DEPLOY_README = render.REPO / "deploy" / "README.md"


def _readme_helm_commands() -> list[dict[str, Any]]:
    """The values of each `helm install` in deploy/README.md's "Install with Helm" block."""
    text = DEPLOY_README.read_text()
    section = text[text.index("## Install with Helm") :]
    block = section[section.index("```sh\n") + 6 : section.index("```", section.index("```sh") + 5)]
    joined = re.sub(r"\\\n", " ", block)
    commands = []
    for line in joined.splitlines():
        if not line.startswith("helm install"):
            continue
        words = shlex.split(line, comments=True)
        values: dict[str, Any] = {}
        for flag, pair in itertools.pairwise(words):
            if flag == "--set":
                dotted, _, value = pair.partition("=")
                *parents, leaf = dotted.split(".")
                target = values
                for part in parents:
                    target = target.setdefault(part, {})
                target[leaf] = yaml.safe_load(value)
        commands.append(values)
    return commands


def _layout(objects: list[render.Object], notes: str) -> tuple[bool, bool, str, str]:
    """(webhook installed, second scheduler installed, webhook.schedulerName, NOTES' layout)."""
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objects}
    config = render.config_file(render.one(objects, "ConfigMap", "archfit-config"), "archfit.yaml")
    (layout,) = [line for line in notes.splitlines() if line.startswith("Layout: ")]
    return (
        ("MutatingWebhookConfiguration", "archfit") in kinds,
        ("Deployment", "archfit-scheduler") in kinds,
        (config.get("webhook") or {}).get("schedulerName", ""),
        layout,
    )


def test_each_helm_command_of_deploy_readme_installs_the_layout_its_notes_name(
    helm: Path, tmp_path: Path
) -> None:
    """Self-managed: the extender; managed: the webhook; managed with the extender: the webhook
    routing pods to the second scheduler. NOTES says the same layout."""
    found = []
    for n, values in enumerate(_readme_helm_commands()):
        work = tmp_path / str(n)
        work.mkdir()
        objects = render.helm_template(helm, values, work)
        found.append(_layout(objects, render.helm_notes(helm, values, work)))
    assert [
        (False, False, "", "Layout: the extender, for a self-managed control plane (kubeadm, "
         "k3s, kOps, Cluster API)."),
        (True, False, "", "Layout: the admission webhook."),
        (True, True, "archfit-scheduler", "Layout: the admission webhook and the second "
         "scheduler."),
    ] == found  # fmt: skip


@pytest.mark.parametrize(
    "values",
    [
        {},
        {"webhook": {"enabled": True}},
        {"secondScheduler": {"enabled": True}},
        {"webhook": {"enabled": True}, "secondScheduler": {"enabled": True}},
        {
            "webhook": {"enabled": True},
            "secondScheduler": {"enabled": True},
            "config": {"webhook": {"schedulerName": "archfit-scheduler"}},
        },
    ],
)
def test_notes_never_tell_an_install_to_do_what_it_already_did(
    helm: Path, tmp_path: Path, values: dict[str, Any]
) -> None:
    """No "enable the webhook" for a webhook install, no kubeadm registration where no extender
    is called from the default scheduler, no opt-in where the webhook routes pods."""
    notes = render.helm_notes(helm, values, tmp_path)
    webhook = bool(values.get("webhook"))
    second = bool(values.get("secondScheduler"))
    routed = "config" in values
    said = {
        "asks for the webhook": "--set webhook.enabled=true" in notes,
        "registers with kubeadm": "archfit scheduler-config" in notes,
        "asks pods to opt in": "Pods opt in" in notes,
        "says the webhook routes": "The webhook sends pods" in notes,
    }
    assert {
        "asks for the webhook": not webhook and not second,
        "registers with kubeadm": not webhook and not second,
        "asks pods to opt in": second and not routed,
        "says the webhook routes": routed,
    } == said


def test_the_values_table_names_every_switch_of_the_chart() -> None:
    """Every `<key>.enabled` of values.yaml has a row in deploy/README.md's values table."""
    values = yaml.safe_load((render.HELM_CHART / "values.yaml").read_text())
    switches = [
        f"{key}.enabled"
        for key, value in values.items()
        if isinstance(value, dict) and "enabled" in value
    ]
    table = DEPLOY_README.read_text()
    assert [] == [s for s in switches if f"| `{s}` |" not in table]


def test_the_layout_table_names_the_two_ways_the_webhook_silently_does_nothing() -> None:
    """EKS images in ECR without the credential provider; GKE private clusters and port 8443."""
    table = DEPLOY_README.read_text().split("### Which layout", 1)[1].split("\n\n", 2)[1]
    rows = [line for line in table.splitlines() if line.startswith("| **")]
    wanted = {
        "EKS with images in ECR": "credentialProvider.enabled=true",
        "GKE private cluster": "8443",
    }
    assert wanted == {
        name: needed
        for name, needed in wanted.items()
        if any(name in r and needed in r for r in rows)
    }


def _images_section() -> str:
    text = DEPLOY_README.read_text()
    return text.split("### Images: where they come from", 1)[1].split("\n## ", 1)[0]


def test_the_readmes_kustomize_images_entry_points_the_base_at_your_registry(
    kustomize: Path, tmp_path: Path
) -> None:
    """The `images:` snippet of deploy/README.md, in an overlay over the base, changes the
    Deployment's image to the registry it names."""
    section = _images_section()
    snippet = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    base = os.path.relpath(render.KUSTOMIZE_BASE, tmp_path)  # kustomize refuses absolute roots
    overlay = {"resources": [base], **yaml.safe_load(snippet)}
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(overlay))
    objects = render.kustomize_build(kustomize, tmp_path)
    spec = render.one(objects, "Deployment", "archfit")["spec"]["template"]["spec"]
    (image,) = [c["image"] for c in spec["containers"]]
    assert "registry.example.com/platform/archfit:0.1.0" == image


def test_the_readmes_helm_image_values_point_the_chart_at_your_registry(
    helm: Path, tmp_path: Path
) -> None:
    """`--set image.repository=... --set image.tag=...` as deploy/README.md writes them."""
    (line,) = [t for t in _images_section().splitlines() if "image.repository=" in t]
    repository = line.split("image.repository=", 1)[1].split()[0]
    values = {"image": {"repository": repository, "tag": "9.9.9"}}
    objects = render.helm_template(helm, values, tmp_path)
    spec = render.one(objects, "Deployment", "archfit")["spec"]["template"]["spec"]
    (image,) = [c["image"] for c in spec["containers"]]
    assert "registry.example.com/platform/archfit:9.9.9" == image
