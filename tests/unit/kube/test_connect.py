"""`kubernetes.mode`: one meaning of `auto` for every command, and the reason it gives."""

from __future__ import annotations

import pytest

from extender.config.settings import KubernetesSettings
from extender.kube.connect import access


@pytest.fixture
def outside_a_cluster(monkeypatch, tmp_path):
    """No service account, no $KUBECONFIG, and a home without ~/.kube/config."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize(
    ("settings", "env", "home_config", "expected"),
    [
        ({}, {}, False, "off"),
        ({}, {}, True, "kubeconfig"),
        ({}, {"KUBECONFIG": "/etc/k/config"}, False, "kubeconfig"),
        ({}, {"KUBERNETES_SERVICE_HOST": "10.96.0.1"}, True, "in-cluster"),
        ({}, {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBECONFIG": "/k"}, False, "in-cluster"),
        ({"kubeconfig": "/mine"}, {"KUBERNETES_SERVICE_HOST": "10.96.0.1"}, False, "kubeconfig"),
        ({"mode": "off"}, {"KUBECONFIG": "/k"}, True, "off"),
        ({"mode": "in-cluster"}, {}, True, "in-cluster"),
    ],
    ids=[
        "nothing",
        "home kubeconfig",
        "$KUBECONFIG",
        "service account first",
        "service account before $KUBECONFIG",
        "an explicit kubeconfig",
        "off is off",
        "in-cluster as set",
    ],
)
def test_auto_means_the_service_account_first_then_kubeconfig_else_off(
    outside_a_cluster, monkeypatch, settings, env, home_config, expected
):
    """What an operator expects in a pod and on a laptop, for serve and audit alike."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if home_config:
        (outside_a_cluster / ".kube").mkdir()
        (outside_a_cluster / ".kube" / "config").write_text("apiVersion: v1\nkind: Config\n")
    assert expected == access(KubernetesSettings(**settings))[0]


def test_auto_with_nothing_to_use_says_what_it_looked_for(outside_a_cluster):
    """The reason names the service account, $KUBECONFIG and the default path."""
    _, why = access(KubernetesSettings())
    expected = (
        "kubernetes.mode is auto and there is no service account (KUBERNETES_SERVICE_HOST is "
        f"unset), no $KUBECONFIG and no {outside_a_cluster / '.kube' / 'config'}"
    )
    assert expected == why
