"""What `archfit serve` loads: nothing of the `kubernetes` package, whatever the kubeconfig's
user (a token, an exec plugin).

The package costs ~40 MB of RSS and ~0.5 s of start-up; archfit talks to the API server with
its own small client (extender.kube.client). Nor does it draw tables (rich) or make certificates
(cryptography, for the webhook's self-managed ones), load the webhook's modules with the
webhook off, or read the system CA store before it is ready (about 50 ms, for registry
lookups only). The check runs in a fresh interpreter, because this test process has long
since imported everything.
"""

from __future__ import annotations

import subprocess
import sys

import orjson

from tests.support.process import free_port

# Both scripts below start with this: a wait until /readyz answers 200 (30 s at most).
WAIT_UNTIL_READY = """
import json, os, signal, sys, threading, time, urllib.request
from extender.cli.main import main

def wait_until_ready():
    for _ in range(1500):
        try:
            with urllib.request.urlopen("http://127.0.0.1:{port}/readyz", timeout=1) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.02)
"""

# Serves until /readyz answers 200, then SIGTERMs itself and prints what it had loaded.
SERVE_THEN_LIST_MODULES = (
    WAIT_UNTIL_READY
    + """
def stop_once_ready():
    wait_until_ready()
    os.kill(os.getpid(), signal.SIGTERM)

threading.Thread(target=stop_once_ready, daemon=True).start()
status = main(["serve", "--config", sys.argv[1]])
print(json.dumps({{"status": status, "modules": sorted(sys.modules)}}))
"""
)


# Notes, for each read of the system CA store (SSLContext.set_default_verify_paths, which
# ssl.create_default_context calls too), whether archfit listened then; serves until ready
# and two reads are done (or 10 s more), then SIGTERMs itself and prints the notes.
SERVE_AND_NOTE_CA_READS = (
    WAIT_UNTIL_READY
    + """
import socket, ssl

reads = []
read = ssl.SSLContext.set_default_verify_paths

def noted(context):
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=1).close()
        reads.append("listening")
    except OSError:
        reads.append("not listening")
    read(context)

ssl.SSLContext.set_default_verify_paths = noted

def stop_once_ready_and_read():
    wait_until_ready()
    for _ in range(500):
        if len(reads) >= 2:
            break
        time.sleep(0.02)
    os.kill(os.getpid(), signal.SIGTERM)

threading.Thread(target=stop_once_ready_and_read, daemon=True).start()
status = main(["serve", "--config", sys.argv[1]])
print(json.dumps({{"status": status, "reads": reads}}))
"""
)


def serve_and_report(tmp_path, kubernetes: str, script: str) -> dict[str, object]:
    """Run `script` (which serves to ready and back) on a config with `kubernetes`; the JSON
    object it prints last."""
    port = free_port()
    path = tmp_path / "archfit.yaml"
    path.write_text(
        f"server: {{host: 127.0.0.1, port: {port}}}\nkubernetes: {kubernetes}\n"
        "logging: {format: json}\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script.format(port=port), str(path)],
        capture_output=True,
        timeout=60,
        check=False,
    )
    report: dict[str, object] = orjson.loads(done.stdout.splitlines()[-1])
    return report


def serve_and_list_modules(tmp_path, kubernetes: str) -> tuple[int, list[str]]:
    """Run `archfit serve` to ready and back; its exit status and every module it loaded."""
    last = serve_and_report(tmp_path, kubernetes, SERVE_THEN_LIST_MODULES)
    return last["status"], last["modules"]  # type: ignore[return-value]


NOT_FOR_SERVING = ("kubernetes", "rich", "cryptography")
#: The admission webhook's own modules, which webhook.enabled: false (the default) never runs.
WEBHOOK_MODULES = (
    "extender.admission.pod_webhook",
    "extender.admission.skeleton",
    "extender.admission.workload_webhook",
)


def test_serve_with_kubernetes_off_never_imports_the_kubernetes_client(tmp_path):
    """Start, become ready, drain: not one `kubernetes`, rich or cryptography module."""
    status, modules = serve_and_list_modules(tmp_path, "{mode: 'off'}")
    assert 0 == status
    assert [] == [m for m in modules if m.split(".")[0] in NOT_FOR_SERVING]


def test_serve_without_the_webhook_never_imports_the_webhooks_modules(tmp_path):
    """webhook.enabled is false by default: the admission handler's modules stay unloaded."""
    status, modules = serve_and_list_modules(tmp_path, "{mode: 'off'}")
    assert 0 == status
    assert [] == [m for m in modules if m in WEBHOOK_MODULES]


def test_serve_reads_the_system_ca_store_only_once_it_listens(tmp_path):
    """aiohttp's import builds two client contexts; serve reads their CAs once it is ready."""
    report = serve_and_report(tmp_path, "{mode: 'off'}", SERVE_AND_NOTE_CA_READS)
    assert {"status": 0, "reads": ["listening", "listening"]} == report


def _kubeconfig(path, user: str) -> str:
    """A kubeconfig whose one context's user is `user` (YAML flow), on an unreachable server,
    and the `kubernetes` settings that serve with it: no node index, so readiness does not
    wait for a list; pull secrets on, so the API client is built."""
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        f"users: [{{name: u, user: {user}}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    return f"{{mode: kubeconfig, kubeconfig: '{path}', nodeIndex: false, pullSecrets: true}}"


def test_serve_with_a_token_kubeconfig_never_imports_the_kubernetes_client(tmp_path):
    """archfit's own API client reads a static kubeconfig: none of the package's ~40 MB."""
    status, modules = serve_and_list_modules(tmp_path, _kubeconfig(tmp_path / "k", "{token: t}"))
    assert (0, True, []) == (
        status,
        "extender.kube.client.api" in modules,
        [m for m in modules if m.split(".")[0] == "kubernetes"],
    )


def test_an_exec_plugin_user_loads_nothing_of_the_kubernetes_package_either(tmp_path):
    """archfit runs credential plugins itself (extender.kube.client.exec_plugin)."""
    credential = (
        '{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", '
        '"status": {"token": "from-plugin"}}'
    )
    plugin = tmp_path / "plugin.py"
    plugin.write_text(f"print({credential!r})\n")
    user = (
        "{exec: {apiVersion: client.authentication.k8s.io/v1, "
        f"command: '{sys.executable}', args: ['{plugin}'], interactiveMode: Never}}}}"
    )
    status, modules = serve_and_list_modules(tmp_path, _kubeconfig(tmp_path / "k", user))
    assert (0, False, True) == (
        status,
        "kubernetes" in modules,
        "extender.kube.client.exec_plugin" in modules,
    )
