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
from tests.support.json_server import json_server
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
