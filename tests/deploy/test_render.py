"""The renders of deploy/ agree with archfit, with kube-scheduler's shipped config and
with each other: what a dry run can't see (config file contents, cross-references).
"""

from __future__ import annotations

import os
import re
import subprocess
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
import yaml

from extender import __version__
from extender.config import loading as config
from extender.config.settings import INFRASTRUCTURE_NAMESPACES
from tests.deploy import render
from tests.deploy.render import Object, config_file, generated_base_name, key, one, pod_specs

pytestmark = pytest.mark.e2e

ALL = ["base", "overlay", "chart", "chart_with_scheduler"]
WITH_SCHEDULER = ["overlay", "chart_with_scheduler"]


def _objects(request: pytest.FixtureRequest, name: str) -> list[Object]:
    objects: list[Object] = request.getfixturevalue(name)
    return objects


def _scheduler_config(objects: list[Object]) -> dict[str, Any]:
    document: dict[str, Any] = config_file(
        one(objects, "ConfigMap", "archfit-scheduler-config"), "scheduler-config.yaml"
    )
    return document


@pytest.mark.parametrize("name", ALL)
def test_the_configmap_archfit_yaml_is_accepted_by_archfits_loader(
    request: pytest.FixtureRequest, name: str, tmp_path: Path
) -> None:
    """archfit's own loader takes the rendered archfit.yaml, in-cluster with the node index."""
    text = one(_objects(request, name), "ConfigMap", "archfit-config")["data"]["archfit.yaml"]
    path = tmp_path / "archfit.yaml"
    path.write_text(text)
    settings = config.load(path, environ={})
    assert ("in-cluster", True) == (settings.kubernetes.mode, settings.kubernetes.node_index)
    assert settings == config.from_mapping(render.load_strict(text))


@pytest.mark.parametrize("name", ALL)
def test_archfit_never_gates_the_scheduling_of_its_own_pods(
    request: pytest.FixtureRequest, name: str
) -> None:
    """archfit's namespace is among the namespaces its own config excludes."""
    objects = _objects(request, name)
    deployment = one(objects, "Deployment", "archfit")
    data = config_file(one(objects, "ConfigMap", "archfit-config"), "archfit.yaml")
    excluded = config.from_mapping(data).policy.excluded_namespaces
    assert deployment["metadata"]["namespace"] in excluded


def test_the_overlay_keeps_the_extender_settings_of_the_shipped_scheduler_config(
    overlay: list[Object],
) -> None:
    """Every extender setting of config/scheduler-config.yaml but urlPrefix is the overlay's."""
    shipped = render.load_strict(render.SHIPPED_SCHEDULER_CONFIG.read_text())
    ours = _scheduler_config(overlay)
    (shipped_extender,) = shipped["extenders"]
    (our_extender,) = ours["extenders"]
    shipped_extender.pop("urlPrefix")
    our_extender.pop("urlPrefix")
    assert shipped_extender == our_extender
    assert shipped["percentageOfNodesToScore"] == ours["percentageOfNodesToScore"]
    assert shipped["apiVersion"] == ours["apiVersion"]


def test_the_chart_writes_the_same_scheduler_config_as_the_overlay(
    overlay: list[Object], chart_with_scheduler: list[Object]
) -> None:
    """With release archfit in archfit-system, helm and kustomize configure kube-scheduler alike."""
    assert _scheduler_config(overlay) == _scheduler_config(chart_with_scheduler)


@pytest.mark.parametrize("name", WITH_SCHEDULER)
def test_the_second_schedulers_extender_url_reaches_the_archfit_service(
    request: pytest.FixtureRequest, name: str
) -> None:
    """urlPrefix names the Service's DNS name and port, and archfit's configured listen prefix."""
    objects = _objects(request, name)
    (extender,) = _scheduler_config(objects)["extenders"]
    url = urllib.parse.urlsplit(extender["urlPrefix"])
    service = one(objects, "Service", "archfit")
    (port,) = service["spec"]["ports"]
    settings = config.from_mapping(
        config_file(one(objects, "ConfigMap", "archfit-config"), "archfit.yaml")
    )
    (container,) = one(objects, "Deployment", "archfit")["spec"]["template"]["spec"]["containers"]
    target = {p["name"]: p["containerPort"] for p in container["ports"]}[port["targetPort"]]
    meta = service["metadata"]
    assert ("http", f"{meta['name']}.{meta['namespace']}.svc", port["port"]) == (
        url.scheme,
        url.hostname,
        url.port,
    )
    assert (settings.server.prefix, settings.server.port) == (url.path, target)


@pytest.mark.parametrize("name", WITH_SCHEDULER)
def test_the_second_scheduler_has_its_own_name_lease_and_mounted_config(
    request: pytest.FixtureRequest, name: str
) -> None:
    """Profile archfit-scheduler, a lease its Role may update, and --config on the mounted file."""
    objects = _objects(request, name)
    document = _scheduler_config(objects)
    election = document["leaderElection"]
    role = one(objects, "Role", "archfit-scheduler-leader-election")
    updatable = {
        n
        for rule in role["rules"]
        if "update" in rule["verbs"]
        for n in rule.get("resourceNames", [])
    }
    spec = one(objects, "Deployment", "archfit-scheduler")["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    (flag,) = [a for a in container["command"] if a.startswith("--config=")]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volume = {v["name"]: v for v in spec["volumes"]}
    config_map = one(objects, "ConfigMap", "archfit-scheduler-config")
    assert ["archfit-scheduler"] == [p["schedulerName"] for p in document["profiles"]]
    assert (True, role["metadata"]["namespace"]) == (
        election["leaderElect"],
        election["resourceNamespace"],
    )
    assert election["resourceName"] in updatable
    mount_dir, _, filename = flag.removeprefix("--config=").rpartition("/")
    (volume_name,) = [n for n, path in mounts.items() if path == mount_dir]
    assert config_map["metadata"]["name"] == volume[volume_name]["configMap"]["name"]
    assert filename in config_map["data"]


@pytest.mark.parametrize("name", WITH_SCHEDULER)
def test_the_second_scheduler_is_bound_to_the_kube_scheduler_and_volume_scheduler_roles(
    request: pytest.FixtureRequest, name: str
) -> None:
    """Its ServiceAccount holds system:kube-scheduler and system:volume-scheduler."""
    objects = _objects(request, name)
    account = one(objects, "Deployment", "archfit-scheduler")["spec"]["template"]["spec"][
        "serviceAccountName"
    ]
    subject = {"kind": "ServiceAccount", "name": account, "namespace": render.NAMESPACE}
    bound = {
        o["roleRef"]["name"]
        for o in objects
        if o["kind"] == "ClusterRoleBinding" and subject in o["subjects"]
    }
    assert {"system:kube-scheduler", "system:volume-scheduler"} == bound


@pytest.mark.parametrize("name", ALL)
def test_every_container_runs_restricted_read_only_with_probes_and_requests(
    request: pytest.FixtureRequest, name: str
) -> None:
    """Non-root, read-only root fs, no capabilities, RuntimeDefault seccomp, probes, requests."""
    problems = []
    for deployment, spec in pod_specs(_objects(request, name)):
        pod = spec.get("securityContext", {})
        for container in spec["containers"]:
            where = f"{deployment}/{container['name']}"
            context = {**pod, **container.get("securityContext", {})}
            expected = {
                "runAsNonRoot": True,
                "readOnlyRootFilesystem": True,
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]},
                "seccompProfile": {"type": "RuntimeDefault"},
            }
            problems += [
                f"{where}: {field} is {context.get(field)!r}"
                for field, value in expected.items()
                if context.get(field) != value
            ]
            if not isinstance(context.get("runAsUser"), int) or context["runAsUser"] == 0:
                problems.append(f"{where}: runAsUser is {context.get('runAsUser')!r}")
            problems += [
                f"{where}: no {probe}"
                for probe in ("livenessProbe", "readinessProbe")
                if probe not in container
            ]
            requests = container.get("resources", {}).get("requests", {})
            if {"cpu", "memory"} - requests.keys():
                problems.append(f"{where}: requests are {requests}")
        if spec.get("nodeSelector", {}).get("kubernetes.io/os") != "linux":
            problems.append(f"{deployment}: no kubernetes.io/os=linux nodeSelector")
    assert [] == problems


@pytest.mark.parametrize("name", ALL)
def test_every_image_names_an_explicit_version_tag(
    request: pytest.FixtureRequest, name: str
) -> None:
    """No image is untagged or :latest; archfit's is __version__ and kube-scheduler's v1.36.3."""
    images = {
        c["image"] for _, spec in pod_specs(_objects(request, name)) for c in spec["containers"]
    }
    expected = {f"ghcr.io/archfit/archfit:{__version__}"}
    if name in WITH_SCHEDULER:
        expected.add("registry.k8s.io/kube-scheduler:v1.36.3")
    assert expected == images


@pytest.mark.parametrize("name", ALL)
def test_the_service_and_disruption_budgets_select_exactly_their_deployments_pods(
    request: pytest.FixtureRequest, name: str
) -> None:
    """Each selector matches one Deployment's pod labels and the Deployment's own selector."""
    objects = _objects(request, name)
    deployments = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Deployment"}

    def selected_by(selector: dict[str, str]) -> list[str]:
        return [
            n
            for n, d in deployments.items()
            if selector.items() <= d["spec"]["template"]["metadata"]["labels"].items()
        ]

    for deployment in deployments.values():
        own = deployment["spec"]["selector"]["matchLabels"]
        assert [deployment["metadata"]["name"]] == selected_by(own)
    service = one(objects, "Service", "archfit")
    assert ["archfit"] == selected_by(service["spec"]["selector"])
    budgets = {
        o["metadata"]["name"]: selected_by(o["spec"]["selector"]["matchLabels"])
        for o in objects
        if o["kind"] == "PodDisruptionBudget"
    }
    assert {n: [n] for n in deployments} == budgets


def _normalised(objects: list[Object]) -> dict[tuple[str, str, str], Object]:
    """Objects by key with what legitimately differs between helm and kustomize removed:
    labels, hashed ConfigMap names, helm's checksum annotation, instance selectors and
    the formatting of ConfigMap files."""

    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            cleaned = {
                k: clean(v)
                for k, v in value.items()
                if k not in ("labels", "matchLabels", "selector", "labelSelector")
                and not k.startswith("checksum/")
            }
            # An annotations map that held only helm's checksum is no difference.
            return {k: v for k, v in cleaned.items() if v != {}}
        if isinstance(value, list):
            return [clean(v) for v in value]
        if isinstance(value, str):
            return generated_base_name(value)
        return value

    result = {}
    for obj in objects:
        if "helm.sh/hook" in (obj["metadata"].get("annotations") or {}):
            continue  # helm uninstall's own step; kustomize's procedure runs it by hand
        kind, namespace, name = key(obj)
        if kind == "ConfigMap":
            # Files compare by content: comments and key order may differ.
            data = {k: render.load_strict(v) for k, v in obj["data"].items()}
            obj = {**obj, "data": data}
        result[kind, namespace, generated_base_name(name)] = clean(obj)
    return result


@pytest.mark.parametrize(
    ("kustomized", "templated"),
    [
        ("base", "chart"),
        ("overlay", "chart_with_scheduler"),
        ("webhook_overlay", "chart_with_webhook"),
        ("policy_overlay", "chart_with_policy"),
    ],
)
def test_the_helm_chart_renders_the_same_objects_as_kustomize(
    request: pytest.FixtureRequest, kustomized: str, templated: str
) -> None:
    """Same kinds, names and specs (labels aside); only kustomize ships the Namespace."""
    ours = _normalised(_objects(request, kustomized))
    theirs = _normalised(_objects(request, templated))
    ours.pop(("Namespace", "", render.NAMESPACE))
    assert sorted(ours) == sorted(theirs)
    different = [k for k in ours if ours[k] != theirs[k]]
    assert [] == different, yaml.safe_dump({str(k): [ours[k], theirs[k]] for k in different})


def test_the_chart_follows_its_values(helm: Path, tmp_path: Path) -> None:
    """replicaCount, image, resources and config values land in the Deployment and ConfigMap."""
    values = {
        "replicaCount": 3,
        "image": {"repository": "registry.example/archfit", "tag": "9.9.9"},
        "resources": {"requests": {"cpu": "250m", "memory": "300Mi"}},
        "config": {"policy": {"mode": "dry-run"}, "server": {"port": 9999}},
    }
    objects = render.helm_template(helm, values, tmp_path)
    deployment = one(objects, "Deployment", "archfit")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    settings = config.from_mapping(
        config_file(one(objects, "ConfigMap", "archfit-config"), "archfit.yaml")
    )
    assert 3 == deployment["spec"]["replicas"]
    assert "registry.example/archfit:9.9.9" == container["image"]
    assert {"cpu": "250m", "memory": "300Mi"} == container["resources"]["requests"]
    assert ("dry-run", 9999) == (settings.policy.mode, settings.server.port)
    assert [9999] == [p["containerPort"] for p in container["ports"]]
    # Merged, not replaced: the rest of the default config is still there.
    assert ("in-cluster", (*INFRASTRUCTURE_NAMESPACES, "archfit-system")) == (
        settings.kubernetes.mode,
        settings.policy.excluded_namespaces,
    )


@pytest.mark.parametrize("name", ["webhook_overlay", "chart_with_webhook"])
def test_the_releasers_role_names_the_lease_that_the_shipped_config_elects_with(
    request: pytest.FixtureRequest, name: str
) -> None:
    """Get and patch reach exactly webhook.gate.leaseName, as the ConfigMap leaves it."""
    objects = _objects(request, name)
    settings = config.from_mapping(
        config_file(one(objects, "ConfigMap", "archfit-config"), "archfit.yaml")
    )
    role = one(objects, "Role", "archfit-releaser")
    named = [(r["resourceNames"], r["verbs"]) for r in role["rules"] if "resourceNames" in r]
    assert [([settings.webhook.gate.lease_name], ["get", "patch"])] == named


def test_the_releasers_role_follows_the_lease_name_the_chart_is_given(
    helm: Path, tmp_path: Path
) -> None:
    """config.webhook.gate.leaseName set in values is the name the Role grants."""
    values = {"webhook": {"enabled": True}, "config": {"webhook": {"gate": {"leaseName": "elect"}}}}
    objects = render.helm_template(helm, values, tmp_path)
    settings = config.from_mapping(
        config_file(one(objects, "ConfigMap", "archfit-config"), "archfit.yaml")
    )
    role = one(objects, "Role", "archfit-releaser")
    named = [r["resourceNames"] for r in role["rules"] if "resourceNames" in r]
    assert ("elect", [["elect"]]) == (settings.webhook.gate.lease_name, named)


def test_the_chart_renders_no_webhook_unless_enabled(chart: list[Object]) -> None:
    """webhook.enabled defaults to false: no webhook objects, no webhook env or port."""
    assert [] == [key(o) for o in chart if re.search("webhook", yaml.safe_dump(o))]


def test_the_chart_renders_no_second_scheduler_unless_enabled(chart: list[Object]) -> None:
    """secondScheduler.enabled defaults to false: nothing named archfit-scheduler is rendered."""
    assert [] == [key(o) for o in chart if re.search("scheduler", o["metadata"]["name"])]


@pytest.mark.parametrize(
    "enabled",
    [
        "secondScheduler.enabled=false",
        "secondScheduler.enabled=true",
        "webhook.enabled=true",
        "webhook.enabled=true,admissionPolicy.enabled=true",
    ],
    ids=["extender-only", "second-scheduler", "webhook", "admission-policy"],
)
def test_helm_lint_strict_finds_nothing_to_complain_about(helm: Path, enabled: str) -> None:
    """`helm lint --strict` passes (warnings fail it) for each layout the chart offers."""
    done = subprocess.run(
        [helm, "lint", "--strict", render.HELM_CHART, "--set", enabled],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    assert 0 == done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize("name", ["base", "chart", "webhook_overlay", "chart_with_webhook"])
def test_archfit_knows_its_pod_name_for_the_releasers_lease(
    request: pytest.FixtureRequest, name: str
) -> None:
    """POD_NAME from the downward API names the replica in the Lease's holderIdentity."""
    archfit = one(_objects(request, name), "Deployment", "archfit")
    (container,) = [c for c in archfit["spec"]["template"]["spec"]["containers"]
                    if c["name"] == "archfit"]  # fmt: skip
    env = {e["name"]: e for e in container.get("env", [])}
    assert {"fieldRef": {"fieldPath": "metadata.name"}} == env["POD_NAME"].get("valueFrom")


def _warnings_switch(objects: list[Object]) -> tuple[bool, list[str], str | None]:
    """(a ValidatingWebhookConfiguration is rendered, the webhook ClusterRole's validating
    configuration names, ARCHFIT_WEBHOOK__WORKLOAD_WARNINGS__ENABLED)."""
    validating = [o for o in objects if o["kind"] == "ValidatingWebhookConfiguration"]
    role = one(objects, "ClusterRole", "archfit-webhook")
    names = [
        name
        for rule in role["rules"]
        if "validatingwebhookconfigurations" in rule["resources"]
        for name in rule["resourceNames"]
    ]
    env = {e["name"]: e.get("value") for _, spec in pod_specs(objects) for c in spec["containers"]
           for e in c.get("env", [])}  # fmt: skip
    return bool(validating), names, env.get("ARCHFIT_WEBHOOK__WORKLOAD_WARNINGS__ENABLED")


def test_the_workload_warnings_come_with_the_webhook_and_turn_off_in_the_chart_and_kustomize(
    webhook_overlay: list[Object], kustomize: Path, helm: Path, tmp_path: Path
) -> None:
    """On by default (their configuration and the RBAC to set its caBundle); off by a Helm
    value or the no-workload-warnings component, which also tell archfit."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    up = Path(os.path.relpath(render.REPO / "deploy" / "kustomize", overlay))
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [str(up / "webhook")],
                "components": [str(up / "components" / "no-workload-warnings")],
            }
        )
    )
    off = {"webhook": {"enabled": True, "workloadWarnings": {"enabled": False}}}
    expected = (
        (True, ["archfit-workload-warnings"], None),
        (False, ["archfit-workload-warnings"], "false"),
        (False, [], "false"),
    )
    assert expected == (
        _warnings_switch(webhook_overlay),
        _warnings_switch(render.kustomize_build(kustomize, overlay)),
        _warnings_switch(render.helm_template(helm, off, tmp_path)),
    )


@pytest.mark.parametrize(("steering", "expected"), [(None, ["namespaces", "pods"]), (False, None)])
def test_the_chart_grants_the_steering_watches_only_while_webhook_steering_is_on(
    helm: Path, tmp_path: Path, steering: bool | None, expected: list[str] | None
) -> None:
    """config.webhook.steering: false drops the namespaces and pods list-watch grant."""
    hook: dict[str, Any] = {} if steering is None else {"steering": steering}
    values = {"webhook": {"enabled": True}, "config": {"webhook": hook}}
    objects = render.helm_template(helm, values, tmp_path)
    roles = [
        o for o in objects if o["kind"] == "ClusterRole" and "steering" in o["metadata"]["name"]
    ]
    granted = [(r["resources"], r["verbs"]) for role in roles for r in role["rules"]]
    assert expected == (granted[0][0] if granted else None)
    assert all(verbs == ["list", "watch"] for _, verbs in granted)
