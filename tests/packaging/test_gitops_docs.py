"""docs/webhook.md tells Argo CD and Flux that the caBundle is archfit's, in YAML they take."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
WEBHOOK = (ROOT / "docs" / "webhook.md").read_text()


def _section() -> str:
    start = WEBHOOK.index("### GitOps: Argo CD and Flux")
    end = WEBHOOK.find("\n#", start + 5)
    return WEBHOOK[start : end if end > 0 else None]


def test_argo_cd_ignores_and_keeps_both_configurations_ca_bundles() -> None:
    """ignoreDifferences for both kinds, and RespectIgnoreDifferences so a sync keeps it."""
    argo, _flux = (yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", _section(), re.S))
    kinds = {d["kind"]: d["jqPathExpressions"] for d in argo["spec"]["ignoreDifferences"]}
    assert (
        {
            "MutatingWebhookConfiguration": [".webhooks[]?.clientConfig.caBundle"],
            "ValidatingWebhookConfiguration": [".webhooks[]?.clientConfig.caBundle"],
        },
        ["RespectIgnoreDifferences=true"],
    ) == (kinds, argo["spec"]["syncPolicy"]["syncOptions"])


def test_flux_drift_detection_ignores_each_shipped_webhooks_ca_bundle() -> None:
    """One path per webhook the shipped configurations hold."""
    _argo, flux = (yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", _section(), re.S))
    ignored = {r["target"]["kind"]: r["paths"] for r in flux["spec"]["driftDetection"]["ignore"]}
    component = ROOT / "deploy" / "kustomize" / "components" / "webhook"
    shipped = {}
    for name in ("mutatingwebhook.yaml", "validatingwebhook.yaml"):
        document = yaml.safe_load((component / name).read_text())
        shipped[document["kind"]] = [
            f"/webhooks/{i}/clientConfig/caBundle" for i in range(len(document["webhooks"]))
        ]
    assert shipped == ignored
