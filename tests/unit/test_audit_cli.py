"""The `archfit audit` command line: bad options and the default namespace."""

import io

import pytest
import yaml

from extender.audit.run import AuditOptions, run_audit
from extender.cli import main
from extender.config import KubernetesSettings, Settings
from extender.kube.client import current_namespace


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--arm64-discount", "1.5"], "must be below 1"),
        (["--arm64-discount", "-0.1"], "must not be negative"),
        (["--price-per-vcpu-hour", "nan"], "must not be negative"),
        (["--price-per-vcpu-hour", "cheap"], "is not a number"),
        (["-o", "yaml"], "invalid choice"),
        (["-n", "shop", "-A"], "not allowed with argument"),
    ],
)
def test_bad_options_exit_2_with_a_message_naming_them(options, message, capsys):
    """argparse refuses them before anything reads the cluster."""
    with pytest.raises(SystemExit) as exited:
        main(["audit", *options])
    assert (2, True) == (exited.value.code, message in capsys.readouterr().err)


def test_kubernetes_mode_off_is_an_error_for_the_audit():
    """The audit reads the cluster; it says so instead of printing an empty report."""
    settings = Settings(kubernetes=KubernetesSettings(mode="off"))
    out, err = io.StringIO(), io.StringIO()
    status = run_audit(settings, AuditOptions(namespace="shop"), out, err)
    expected = "archfit: cannot reach Kubernetes: kubernetes.mode is off, and this command reads"
    assert (2, "", expected) == (status, out.getvalue(), err.getvalue()[: len(expected)])


def test_the_default_namespace_is_the_kubeconfig_contexts(tmp_path):
    """As kubectl: the current context's namespace, else `default`."""
    kubeconfig = tmp_path / "config"
    contexts = [
        {"name": "with", "context": {"cluster": "c", "user": "u", "namespace": "team-a"}},
        {"name": "without", "context": {"cluster": "c", "user": "u"}},
    ]
    found = []
    for current in ("with", "without"):
        kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": current,
            "contexts": contexts, "clusters": [{"name": "c", "cluster": {"server": "https://x"}}],
            "users": [{"name": "u", "user": {}}],
        }))  # fmt: skip
        settings = KubernetesSettings(mode="kubeconfig", kubeconfig=str(kubeconfig))
        found.append(current_namespace(settings))
    assert ["team-a", "default"] == found


def test_the_audit_under_auto_with_no_kubeconfig_says_what_it_looked_for(tmp_path, monkeypatch):
    """The same `auto` as serve: no service account, no $KUBECONFIG, no ~/.kube/config."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    out, err = io.StringIO(), io.StringIO()
    status = run_audit(Settings(), AuditOptions(namespace="shop"), out, err)
    expected = (
        "archfit: cannot reach Kubernetes: kubernetes.mode is auto and there is no service "
        f"account (KUBERNETES_SERVICE_HOST is unset), no $KUBECONFIG and no {tmp_path}/.kube/"
        "config, and this command reads the cluster\n"
    )
    assert (2, "", expected) == (status, out.getvalue(), err.getvalue())
