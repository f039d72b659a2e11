"""The command line as an operator meets it: the same connection flags on every command that
talks to a cluster, and one line naming the mistake (the flag, the file, the fix)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from extender.cli.main import main
from extender.cli.scheduler_config import Registration
from tests.support.json_server import Status, json_server
from tests.support.process import free_port


def archfit(*args: str) -> tuple[int, str, str]:
    """`archfit ARGS` in its own process: audit and inspect configure logging process-wide,
    to the stderr they had, which must not outlive the command in this one."""
    done = subprocess.run(
        [sys.executable, "-m", "extender", *args], capture_output=True, text=True, timeout=120
    )
    return done.returncode, done.stdout, done.stderr


def _kubeconfig(path: Path, server: str = "https://127.0.0.1:1") -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "prod",
        "contexts": [{"name": name, "context": {"cluster": "c", "user": "u"}}
                     for name in ("prod", "staging")],
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {}}],
    }))  # fmt: skip
    return path


CLUSTER_COMMANDS = [
    ["release", "--all"],
    ["uninstall"],
    ["audit", "-n", "shop"],
    ["serve"],
    ["evidence", "list"],
]


@pytest.mark.parametrize("command", CLUSTER_COMMANDS)
def test_every_cluster_command_takes_kubeconfig_and_names_a_missing_one(command):
    """`release`, `audit` and `serve` take --kubeconfig; a missing file is named as the flag's,
    not as kubernetes.kubeconfig's."""
    status, _, err = archfit(*command, "--kubeconfig", "/nonexistent/kubeconfig")
    assert (2, f"archfit {command[0]}: --kubeconfig /nonexistent/kubeconfig: no such file\n") == (
        status,
        err,
    )


@pytest.mark.parametrize("command", CLUSTER_COMMANDS)
def test_a_context_the_kubeconfig_lacks_is_named_with_those_it_has(command, tmp_path):
    """Not "kubernetes.mode=kubeconfig (kubernetes.mode is kubeconfig): Invalid kube-config"."""
    config = _kubeconfig(tmp_path / "config")
    status, _, err = archfit(*command, "--kubeconfig", str(config), "--context", "prdo")
    expected = (
        f"archfit {command[0]}: --context prdo: the kubeconfig has no such context "
        "(it has: prod, staging)\n"
    )
    assert (2, expected) == (status, err)


def test_an_unknown_flag_shows_the_commands_usage_not_archfits(capsys):
    """`archfit audit --bogus` prints `usage: archfit audit ...`."""
    with pytest.raises(SystemExit) as exited:
        main(["audit", "--bogus"])
    err = capsys.readouterr().err
    assert (2, "usage: archfit audit", "archfit audit: error: unrecognized arguments: --bogus") == (
        exited.value.code,
        err.splitlines()[0][:20],
        err.strip().splitlines()[-1],
    )


@pytest.mark.parametrize(
    ("url", "warned"),
    [
        ("http://archfit:8888", True),
        ("http://archfit:8888/", True),
        ("http://archfit:8888/extender", True),
        ("http://archfit:8888/scheduler", False),
        ("http://archfit:8888/scheduler/", False),  # kube-scheduler trims the slash
    ],
)
def test_a_url_whose_path_is_not_server_prefix_is_warned_about(url, warned):
    """archfit would answer 404 to <url>/filter, and an ignorable extender is then skipped."""
    assert warned == ("is not server.prefix '/scheduler'" in Registration(url=url).prefix_warning(
        "/scheduler"
    ))  # fmt: skip


def test_scheduler_config_warns_on_stderr_about_a_url_without_the_prefix(capsys):
    """The configuration still prints (a proxy may rewrite paths); the warning names the fix."""
    status = main(["scheduler-config", "--url", "http://10.96.0.20:8888"])
    out, err = capsys.readouterr()
    assert (0, True, True) == (
        status,
        "http://10.96.0.20:8888" in out,
        "archfit scheduler-config: warning: --url's path '(none)' is not server.prefix" in err,
    )


def test_a_yaml_error_names_the_config_file(tmp_path, capsys):
    """Not PyYAML's "<unicode string>"."""
    config = tmp_path / "archfit.yaml"
    config.write_text("server:\n  port: [1,\n")
    status = main(["config", "--config", str(config)])
    err = capsys.readouterr().err
    assert (2, True, False) == (status, f'in "{config}", line 3' in err, "<unicode string>" in err)


def test_an_invalid_reference_is_not_called_uppercase_when_lowercase_would_not_help():
    """'Bad Ref!!' has a space and `!`: lowercasing it fixes nothing."""
    status, out, _ = archfit("inspect", "-o", "json", "Bad Ref!!", "acme/API:1")
    messages = [line.strip() for line in out.splitlines() if "message" in line]
    assert (1, [
        "\"message\": \"invalid image reference 'Bad Ref!!': not a valid name[:tag][@digest]\"",
        "\"message\": \"invalid image reference 'acme/API:1': repository must be lowercase\"",
    ]) == (status, messages)  # fmt: skip


@pytest.fixture
def not_kubernetes() -> Iterator[str]:
    """An HTTP server, but no API server: {} for /version."""
    with json_server(lambda _path, _headers: {}) as url:
        yield url


def test_a_version_answer_that_is_not_kubernetes_is_one_line(not_kubernetes, tmp_path):
    """No 60-line validation error from the client's model: what answered, and the question."""
    config = _kubeconfig(tmp_path / "config", not_kubernetes)
    status, _, err = archfit("audit", "-n", "shop", "--kubeconfig", str(config))
    assert (2, 1, True) == (
        status,
        len(err.strip().splitlines()),
        f"{not_kubernetes} answered GET /version with no Kubernetes version" in err,
    )


def test_ctrl_c_during_inspect_prints_one_line_and_no_traceback(tmp_path):
    """A registry that never answers, then SIGINT: `archfit: interrupted`, status 130."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        host = f"127.0.0.1:{silent.getsockname()[1]}"
        config = tmp_path / "archfit.yaml"
        config.write_text(yaml.safe_dump({
            "kubernetes": {"mode": "off"},
            "registry": {"hosts": {host: {"plainHttp": True}}, "allowedNetworks": [host]},
        }))  # fmt: skip
        process = subprocess.Popen(
            [sys.executable, "-m", "extender", "inspect", "--config", str(config), f"{host}/a:1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "ARCHFIT_SERVER__PORT": str(free_port())},
        )
        silent.settimeout(60)
        waiting, _ = silent.accept()  # imported, and waiting on the registry's answer
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
        waiting.close()
    assert (130, "archfit: interrupted\n") == (process.returncode, err), out


# A ConfigMap as kube-apiserver answers a GET of it, with one entry the watcher wrote, and the
# Status it answers for one that does not exist (recorded from v1.36.3).
EVIDENCE_CONFIGMAP = {
    "kind": "ConfigMap",
    "apiVersion": "v1",
    "metadata": {
        "name": "archfit-evidence",
        "namespace": "archfit-system",
        "uid": "0b6f3d0e-1c52-4f0e-9d53-3b8d2f1b9a41",
        "resourceVersion": "4711",
        "creationTimestamp": "2026-11-20T09:12:44Z",
        "labels": {"app.kubernetes.io/component": "evidence", "app.kubernetes.io/name": "archfit"},
    },
    "data": {
        "e-ba2aa1cf3e006115f23bfcf1837388265f930453": (
            '{"d":"sha256:abababababababababababababababababababababababababababababababab",'
            '"i":"registry.example.com/shop/api:1.4","l":1795000000.0,"e":4102444800.0,'
            '"n":"shop","w":"ReplicaSet/api-5d9c","o":"api-5d9c-x1","s":"exec format error",'
            '"v":"","c":"the image config says linux/amd64","p":"linux/arm64","r":"start",'
            '"version":2}'
        )
    },
}
VERSION = {"major": "1", "minor": "36", "gitVersion": "v1.36.3"}


def _not_found(namespace: str, name: str) -> Status:
    return Status(404, {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f'configmaps "{name}" not found', "reason": "NotFound",
        "details": {"name": name, "kind": "configmaps"}, "code": 404,
    })  # fmt: skip


@pytest.fixture
def api_server() -> Iterator[tuple[str, list[str]]]:
    """An API server that has archfit's evidence ConfigMap in archfit-system only; and the
    paths it was asked for."""
    asked: list[str] = []

    def answer(path: str, _headers: object) -> object:
        asked.append(path)
        if path == "/version":
            return VERSION
        if path == "/api/v1/namespaces/archfit-system/configmaps/archfit-evidence":
            return EVIDENCE_CONFIGMAP
        namespace = path.split("/")[4] if path.startswith("/api/v1/namespaces/") else ""
        return _not_found(namespace, path.rsplit("/", 1)[-1])

    with json_server(answer) as url:
        yield url, asked


def _kubeconfig_in(path: Path, server: str, namespace: str) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "shop",
        "contexts": [{"name": "shop",
                      "context": {"cluster": "c", "user": "u", "namespace": namespace}}],
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {}}],
    }))  # fmt: skip
    return path


def test_evidence_list_reads_archfits_namespace_not_the_contexts(api_server, tmp_path):
    """The context's namespace is an application's (`shop`); the ConfigMap is where deploy/
    installs archfit, and the answer says which one it read."""
    url, asked = api_server
    config = _kubeconfig_in(tmp_path / "config", url, "shop")
    status, out, err = archfit("evidence", "list", "-o", "json", "--kubeconfig", str(config))
    import json

    listed = [(e["digest"][:13], e["platform"], e["namespace"]) for e in json.loads(out or "[]")]
    assert (0, [("sha256:ababab", "linux/arm64", "shop")], "") == (status, listed, err)
    assert "/api/v1/namespaces/archfit-system/configmaps/archfit-evidence" in asked


def test_evidence_list_where_there_is_none_says_which_namespace_it_read(api_server, tmp_path):
    """`-n shop` (the wrong one): no silent "0 entries"; the ConfigMap read is named."""
    url, _ = api_server
    config = _kubeconfig_in(tmp_path / "config", url, "shop")
    status, out, err = archfit("evidence", "list", "-n", "shop", "--kubeconfig", str(config))
    assert (0, True, True) == (
        status,
        "0 learned evidence entries in ConfigMap shop/archfit-evidence" in out,
        "there is no ConfigMap shop/archfit-evidence" in err and "-n NAMESPACE" in err,
    )


@pytest.mark.parametrize("action", ["list", "confirm", "clear"])
def test_each_evidence_action_has_its_own_help(action, capsys):
    """`archfit evidence confirm --help` is confirm's usage, with confirm's flags."""
    with pytest.raises(SystemExit):
        main(["evidence", action, "--help"])
    out = capsys.readouterr().out
    own = {"list": "--output", "confirm": "--platform", "clear": "--digest"}[action]
    assert (f"usage: archfit evidence {action}", True) == (out.split(" [")[0], own in out)


def test_archfit_help_says_what_archfit_is_beyond_an_extender(capsys):
    """The webhook, the policy and the audit are half of what it does."""
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    words = ["kube-scheduler extender", "admission webhook", "MutatingAdmissionPolicy", "audit"]
    assert [] == [word for word in words if word not in text]


def test_a_broken_kubeconfig_names_the_mode_once(tmp_path):
    """Not "kubernetes.mode=kubeconfig (kubernetes.mode is kubeconfig)"."""
    config = tmp_path / "archfit.yaml"
    kubeconfig = _kubeconfig_in(tmp_path / "kubeconfig", "https://127.0.0.1:1", "shop")
    text = kubeconfig.read_text().replace(
        "server: https", "certificate-authority: /none\n    server: https"
    )
    kubeconfig.write_text(text)
    config.write_text(
        yaml.safe_dump({"kubernetes": {"mode": "kubeconfig", "kubeconfig": str(kubeconfig)}})
    )
    status, _, err = archfit("audit", "-n", "shop", "--config", str(config))
    assert (2, 1) == (status, err.count("kubernetes.mode")), err


def test_scheduler_config_warns_when_the_url_names_the_webhooks_port(capsys):
    """8443 answers AdmissionReviews only: kube-scheduler's calls would fail, ignorably."""
    status = main([
        "scheduler-config", "--url", "https://10.96.0.20:8443/scheduler",
        "--ca-file", "/etc/ssl/certs/ca-certificates.crt",
    ])  # fmt: skip
    err = capsys.readouterr().err
    assert (0, True) == (status, "--url's port 8443 is archfit's webhook.port" in err)


def test_output_cut_short_by_its_reader_is_no_traceback():
    """`archfit config --docs | head -1` where head is gone before archfit writes: archfit ends
    quietly, with the status a shell gives a command SIGPIPE ended."""
    process = subprocess.Popen(
        [sys.executable, "-m", "extender", "config", "--docs"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stderr is not None
    process.stdout.close()  # the reader is gone: every write fails with EPIPE
    err = process.stderr.read()
    process.stderr.close()
    assert ("", 141) == (err, process.wait(timeout=60))
