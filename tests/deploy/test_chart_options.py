"""The chart's optional objects: Prometheus Operator monitoring, cert-manager for the
webhook's certificate, the admission policy where the cluster serves it and the pre-delete
hook, rendered with real helm."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy import render

pytestmark = pytest.mark.e2e


def test_monitoring_renders_the_shipped_alerts_and_a_service_monitor_for_the_extender(
    helm: Path, tmp_path: Path
) -> None:
    """monitoring.enabled: the PrometheusRule's spec is deploy/monitoring's (one copy of the
    rules), and the ServiceMonitor selects the extender's Service and its `http` port."""
    objects = render.helm_template(helm, {"monitoring": {"enabled": True}}, tmp_path)
    shipped = yaml.safe_load(
        (render.REPO / "deploy" / "monitoring" / "prometheusrule.yaml").read_text()
    )
    rule = render.one(objects, "PrometheusRule", "archfit")
    monitor = render.one(objects, "ServiceMonitor", "archfit")
    services = [o for o in objects if o["kind"] == "Service"]
    selected = [
        s["metadata"]["name"]
        for s in services
        if monitor["spec"]["selector"]["matchLabels"].items() <= s["metadata"]["labels"].items()
    ]
    (service,) = [s for s in services if s["metadata"]["name"] in selected]
    ports = [p["name"] for p in service["spec"]["ports"]]
    assert (shipped["spec"], ["archfit"], True) == (
        rule["spec"],
        selected,
        monitor["spec"]["endpoints"][0]["port"] in ports,
    )


def test_monitoring_is_off_by_default_so_clusters_without_the_operator_install_cleanly(
    chart: list[render.Object],
) -> None:
    """No PrometheusRule or ServiceMonitor unless asked: their CRDs may not exist."""
    kinds = {o["kind"] for o in chart}
    assert set() == kinds & {"PrometheusRule", "ServiceMonitor"}


def test_cert_manager_issues_the_webhook_certificate_instead_of_archfit(
    helm: Path, tmp_path: Path
) -> None:
    """webhook.certManager.enabled: a Certificate for the webhook Service, its Secret mounted
    where archfit reads the files, the CA injected by cert-manager, archfit's own certificate
    management and its RBAC off."""
    values = {"webhook": {"enabled": True, "certManager": {"enabled": True}}}
    objects = render.helm_template(helm, values, tmp_path)
    certificate = render.one(objects, "Certificate", "archfit-webhook")
    configuration = render.one(objects, "MutatingWebhookConfiguration", "archfit")
    spec = render.one(objects, "Deployment", "archfit")["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    service = configuration["webhooks"][0]["clientConfig"]["service"]
    assert (
        f"{service['name']}.{service['namespace']}.svc" in certificate["spec"]["dnsNames"],
        "archfit-system/archfit-webhook",
        {"secretName": certificate["spec"]["secretName"]},
        "false",
        [],
    ) == (
        True,
        configuration["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        volumes["webhook-tls"].get("secret"),
        env["ARCHFIT_WEBHOOK__CERTIFICATE__SELF_MANAGED"],
        [
            o["metadata"]["name"]
            for o in objects
            if o["kind"] == "Role" and "webhook" in o["metadata"]["name"]
        ],
    )


def test_cert_manager_uses_the_issuer_given(helm: Path, tmp_path: Path) -> None:
    """issuerRef names a ClusterIssuer: no self-signed Issuer is made."""
    issuer = {"kind": "ClusterIssuer", "name": "internal-ca", "group": "cert-manager.io"}
    values = {"webhook": {"enabled": True, "certManager": {"enabled": True, "issuerRef": issuer}}}
    objects = render.helm_template(helm, values, tmp_path)
    certificate = render.one(objects, "Certificate", "archfit-webhook")
    assert (issuer, []) == (
        certificate["spec"]["issuerRef"],
        [o for o in objects if o["kind"] == "Issuer"],
    )


POLICY_API = "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"


def _policy_installed(objects: list[render.Object]) -> tuple[list[str], bool]:
    """(the admission policy's kinds rendered, whether archfit is told to publish)."""
    kinds = sorted(
        o["kind"]
        for o in objects
        if o["kind"]
        in {"CustomResourceDefinition", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"}
    )
    (container,) = render.one(objects, "Deployment", "archfit")["spec"]["template"]["spec"][
        "containers"
    ]
    env = {e["name"]: e.get("value") for e in container["env"]}
    return kinds, env.get("ARCHFIT_ADMISSION_POLICY__ENABLED") == "true"


INSTALLED = (
    ["CustomResourceDefinition", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"],
    True,
)
LEFT_OUT: tuple[list[str], bool] = ([], False)


@pytest.mark.parametrize(
    ("values", "api_versions", "expected"),
    [
        ({"webhook": {"enabled": True}}, [POLICY_API], INSTALLED),
        ({"webhook": {"enabled": True}}, [], LEFT_OUT),
        (
            {"webhook": {"enabled": True}},
            ["admissionregistration.k8s.io/v1beta1/MutatingAdmissionPolicy"],
            LEFT_OUT,
        ),
        ({}, [POLICY_API], LEFT_OUT),
        (
            {"webhook": {"enabled": True}, "admissionPolicy": {"enabled": False}},
            [POLICY_API],
            LEFT_OUT,
        ),
        ({"webhook": {"enabled": True}, "admissionPolicy": {"enabled": True}}, [], INSTALLED),
    ],
    ids=["auto-served", "auto-not-served", "auto-beta-only", "auto-no-webhook", "false", "true"],
)
def test_the_admission_policy_is_installed_by_default_where_the_cluster_serves_it(
    helm: Path,
    tmp_path: Path,
    values: dict[str, Any],
    api_versions: list[str],
    expected: tuple[list[str], bool],
) -> None:
    """admissionPolicy.enabled: auto installs it with the webhook on a cluster that serves the
    v1 MutatingAdmissionPolicy (helm asks .Capabilities); true and false decide alone."""
    objects = render.helm_template(helm, values, tmp_path, api_versions=api_versions)
    assert expected == _policy_installed(objects)


def test_an_admission_policy_switch_that_is_not_auto_true_or_false_fails_the_render(
    helm: Path, tmp_path: Path
) -> None:
    """A typo is an error that names the value, not a silent "off" (values.schema.json)."""
    with pytest.raises(AssertionError, match=r"/admissionPolicy/enabled': value must be one of"):
        render.helm_template(helm, {"admissionPolicy": {"enabled": "yes"}}, tmp_path)


@pytest.mark.parametrize(
    ("values", "hooked"),
    [
        ({}, False),
        ({"secondScheduler": {"enabled": True}}, False),
        ({"webhook": {"enabled": True}}, True),
        ({"admissionPolicy": {"enabled": True}}, True),
    ],
    ids=["extender", "second-scheduler", "webhook", "policy"],
)
def test_the_pre_delete_hook_comes_with_whatever_holds_pods(
    helm: Path, tmp_path: Path, values: dict[str, Any], hooked: bool
) -> None:
    """The webhook's gate or the policy's: a Job that runs `archfit uninstall` naming the
    chart's own binding and webhook configuration, as its own ServiceAccount, deleted once
    it succeeded; nothing when nothing holds."""
    objects = render.helm_template(helm, values, tmp_path)
    hooks = [o for o in objects if "helm.sh/hook" in (o["metadata"].get("annotations") or {})]
    if not hooked:
        assert [] == hooks
        return
    kinds = {o["kind"]: o for o in hooks}
    job = kinds["Job"]
    spec = job["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    annotations = {o["kind"]: o["metadata"]["annotations"] for o in hooks}
    assert (
        ["ClusterRole", "ClusterRoleBinding", "Job", "ServiceAccount"],
        ["uninstall", "--binding=archfit", "--webhook-configuration=archfit"],
        "archfit-uninstall",
        {"pre-delete"},
        {"before-hook-creation,hook-succeeded"},
    ) == (
        sorted(kinds),
        container["args"],
        spec["serviceAccountName"],
        {a["helm.sh/hook"] for a in annotations.values()},
        {a["helm.sh/hook-delete-policy"] for a in annotations.values()},
    )
    # The Job's identity exists before the Job: lower weights are created first.
    weights = {kind: int(a["helm.sh/hook-weight"]) for kind, a in annotations.items()}
    assert max(w for k, w in weights.items() if k != "Job") < weights["Job"]
