"""The chart's optional objects: Prometheus Operator monitoring and cert-manager for the
webhook's certificate, rendered with real helm."""

from __future__ import annotations

from pathlib import Path

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
