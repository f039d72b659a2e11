"""One list of namespaces archfit leaves alone, written in every place that needs it: the
settings' default, the shipped archfit.yaml, both webhook configurations' namespaceSelector, the
admission policy binding's matchResources and the parameter's excludedNamespaces and neverHold
(docs/webhook.md, "Infrastructure namespaces"). A namespace missing from one of them is one
where a pod waits for archfit, or is held by it, while archfit is down."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from extender.config import loading as config
from extender.config.settings import INFRASTRUCTURE_NAMESPACES, Settings
from extender.controllers.publisher import switches_of
from tests.deploy import render
from tests.deploy.render import Object, config_file, one

pytestmark = pytest.mark.e2e

EXCLUDE_LABEL = {"key": "archfit.io/exclude", "operator": "NotIn", "values": ["true"]}


def _selected_out(selector: Mapping[str, Any]) -> tuple[list[str], bool]:
    """(the namespaces a namespaceSelector leaves out by name, whether it leaves out the
    namespaces labelled archfit.io/exclude=true) — and nothing else may it say."""
    names: list[str] = []
    labelled = False
    for expression in selector["matchExpressions"]:
        if expression == EXCLUDE_LABEL:
            labelled = True
            continue
        assert ("kubernetes.io/metadata.name", "NotIn") == (
            expression["key"],
            expression["operator"],
        ), expression
        names += expression["values"]
    assert set() == set(selector) - {"matchExpressions"}, selector
    return names, labelled


def _settings(objects: list[Object]) -> Settings:
    return config.from_mapping(
        config_file(one(objects, "ConfigMap", "archfit-config"), "archfit.yaml")
    )


def places(objects: list[Object], namespace: str) -> dict[str, tuple[frozenset[str], bool]]:
    """Each place's namespaces (as a set: order means nothing there), and whether the label
    excludes too (selectors only; the settings and the parameter cannot read labels)."""
    settings = _settings(objects)
    found = {"archfit.yaml": (frozenset(settings.policy.excluded_namespaces), False)}
    for kind, name in [
        ("MutatingWebhookConfiguration", "archfit"),
        ("ValidatingWebhookConfiguration", "archfit-workload-warnings"),
    ]:
        (hook,) = one(objects, kind, name)["webhooks"]
        names, labelled = _selected_out(hook["namespaceSelector"])
        found[kind] = (frozenset(names), labelled)
    binding = one(objects, "MutatingAdmissionPolicyBinding", "archfit")
    names, labelled = _selected_out(binding["spec"]["matchResources"]["namespaceSelector"])
    found["MutatingAdmissionPolicyBinding"] = (frozenset(names), labelled)
    switches = switches_of(settings, namespace)
    found["parameter excludedNamespaces"] = (frozenset(switches.excluded_namespaces), False)
    found["parameter neverHold"] = (frozenset(switches.never_hold), False)
    return found


def _expected(namespaces: frozenset[str]) -> dict[str, tuple[frozenset[str], bool]]:
    return {
        "archfit.yaml": (namespaces, False),
        "MutatingWebhookConfiguration": (namespaces, True),
        "ValidatingWebhookConfiguration": (namespaces, True),
        "MutatingAdmissionPolicyBinding": (namespaces, True),
        "parameter excludedNamespaces": (namespaces, False),
        "parameter neverHold": (namespaces, False),
    }


def test_the_settings_default_names_the_autoscalers_and_network_add_ons_namespaces() -> None:
    """Karpenter's, Calico's and flannel's besides kube-system, before any file is read."""
    wanted = {"kube-system", "karpenter", "calico-system", "tigera-operator", "kube-flannel"}
    assert wanted == wanted & set(Settings().policy.excluded_namespaces)


@pytest.mark.parametrize("name", ["policy_overlay", "chart_with_policy"])
def test_every_place_leaves_out_the_infrastructure_namespaces_and_archfits_own(
    request: pytest.FixtureRequest, name: str
) -> None:
    """kustomize's admission-policy layout and the chart with the policy: the same set
    everywhere, and the archfit.io/exclude label in every selector."""
    objects: list[Object] = request.getfixturevalue(name)
    shipped = frozenset({*INFRASTRUCTURE_NAMESPACES, render.NAMESPACE})
    assert _expected(shipped) == places(objects, render.NAMESPACE)


def test_the_chart_leaves_out_its_own_namespace_wherever_it_is_installed(
    helm: Path, tmp_path: Path
) -> None:
    """Release namespace team-infra: it, not archfit-system, joins the list in every place."""
    values = {"webhook": {"enabled": True}, "admissionPolicy": {"enabled": True}}
    objects = render.helm_template(helm, values, tmp_path, namespace="team-infra")
    wanted = frozenset({*INFRASTRUCTURE_NAMESPACES, "team-infra"})
    assert _expected(wanted) == places(objects, "team-infra")


def test_a_namespace_added_to_the_charts_list_is_left_out_in_every_place(
    helm: Path, tmp_path: Path
) -> None:
    """config.policy.excludedNamespaces given in values reaches archfit.yaml, both
    configurations, the binding and the parameter alike."""
    listed = [*INFRASTRUCTURE_NAMESPACES, "cert-manager"]
    values = {
        "webhook": {"enabled": True},
        "admissionPolicy": {"enabled": True},
        "config": {"policy": {"excludedNamespaces": listed}},
    }
    objects = render.helm_template(helm, values, tmp_path)
    wanted = frozenset({*listed, render.NAMESPACE})
    assert _expected(wanted) == places(objects, render.NAMESPACE)
