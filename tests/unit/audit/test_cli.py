"""The `archfit audit` command line: bad options and the default namespace."""

import io
import os
import subprocess
import sys

import pytest
import yaml

from extender.audit.pure.options import AuditOptions
from extender.audit.run import run_audit
from extender.cli.main import main
from extender.config.settings import KubernetesSettings, Settings
from extender.kube.connect import current_namespace
from tests.support.process import free_port


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


def _two_cluster_kubeconfig(path, first: int, second: int) -> str:
    """Contexts `one` (current) and `two`, each on its own unreachable API server."""
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "one",
        "contexts": [
            {"name": "one", "context": {"cluster": "one", "user": "u", "namespace": "a"}},
            {"name": "two", "context": {"cluster": "two", "user": "u", "namespace": "b"}},
        ],
        "clusters": [
            {"name": "one", "cluster": {"server": f"https://127.0.0.1:{first}"}},
            {"name": "two", "cluster": {"server": f"https://127.0.0.1:{second}"}},
        ],
        "users": [{"name": "u", "user": {"token": "t"}}],
    }))  # fmt: skip
    return str(path)


def _audit(*args: str, kubeconfig: str | None = None) -> subprocess.CompletedProcess[str]:
    """`archfit audit ARGS` as a process: its stderr is all a user sees (logging included)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("ARCHFIT_", "KUBE"))}
    if kubeconfig is not None:
        environ["KUBECONFIG"] = kubeconfig
    return subprocess.run(
        [sys.executable, "-m", "extender", "audit", "--config", os.devnull, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=environ,
    )


def test_an_unreachable_api_server_is_one_line_naming_it(tmp_path):
    """No urllib3 retry warning first: one line with the server and why, exit status 2."""
    port = free_port()
    done = _audit(kubeconfig=_two_cluster_kubeconfig(tmp_path / "config", port, port))
    expected = (
        f"archfit: cannot reach Kubernetes: the API server at https://127.0.0.1:{port} "
        "does not answer: Connection refused\n"
    )
    assert (2, "", expected) == (done.returncode, done.stdout, done.stderr)


def test_kubeconfig_and_context_flags_choose_the_cluster_as_kubectl_does(tmp_path):
    """--kubeconfig names the file and --context the cluster in it; the namespace follows."""
    first, second = free_port(), free_port()
    path = _two_cluster_kubeconfig(tmp_path / "config", first, second)
    done = _audit("--kubeconfig", path, "--context", "two")
    settings = KubernetesSettings(mode="kubeconfig", kubeconfig=path, context="two")
    assert (2, f"https://127.0.0.1:{second} ", "b") == (
        done.returncode,
        done.stderr.split("API server at ")[1].split("does")[0],
        current_namespace(settings),
    )


def test_a_kubeconfig_that_does_not_exist_is_named():
    """KUBECONFIG=/nonexistent says which file is missing, not "No configuration found"."""
    done = _audit(kubeconfig="/nonexistent")
    expected = (
        "archfit: cannot reach Kubernetes: no kubeconfig file at /nonexistent ($KUBECONFIG)\n"
    )
    assert (2, "", expected) == (done.returncode, done.stdout, done.stderr)


def test_audit_help_explains_the_output_formats_and_the_fail_on_default(capsys):
    """-o lists its formats and --fail-on says its default, as every other option does."""
    with pytest.raises(SystemExit):
        main(["audit", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert (True, True) == (
        "report format: table, json, csv, markdown" in text,
        "(default: never)" in text,
    )


def test_the_audit_under_auto_with_no_kubeconfig_says_what_it_looked_for(tmp_path, monkeypatch):
    """The same `auto` as serve: no service account, no $KUBECONFIG, no ~/.kube/config; and
    the flag that names one."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    out, err = io.StringIO(), io.StringIO()
    status = run_audit(Settings(), AuditOptions(namespace="shop"), out, err)
    expected = (
        "archfit: cannot reach Kubernetes: kubernetes.mode is auto and there is no service "
        f"account (KUBERNETES_SERVICE_HOST is unset), no $KUBECONFIG and no {tmp_path}/.kube/"
        "config, and this command reads the cluster: name a kubeconfig with --kubeconfig PATH "
        "(and --context NAME), or set kubernetes.kubeconfig\n"
    )
    assert (2, "", expected) == (status, out.getvalue(), err.getvalue())
