"""What `archfit serve` loads: with Kubernetes off, nothing of the `kubernetes` package.

The client costs ~20 MB of RSS and ~0.4 s of start-up; a serve that never talks to an API
server must not pay for it. Nor does it draw tables (rich) or make certificates
(cryptography, for the webhook's self-managed ones). The check runs in a fresh interpreter,
because this test process has long since imported everything.
"""

from __future__ import annotations

import subprocess
import sys

import orjson

from tests.support.process import free_port

# Serves until /readyz answers 200, then SIGTERMs itself and prints what it had loaded.
SERVE_THEN_LIST_MODULES = """
import json, os, signal, sys, threading, time, urllib.request
from extender.cli import main

def stop_once_ready():
    for _ in range(1500):
        try:
            with urllib.request.urlopen("http://127.0.0.1:{port}/readyz", timeout=1) as answer:
                if answer.status == 200:
                    break
        except OSError:
            time.sleep(0.02)
    os.kill(os.getpid(), signal.SIGTERM)

threading.Thread(target=stop_once_ready, daemon=True).start()
status = main(["serve", "--config", sys.argv[1]])
print(json.dumps({{"status": status, "modules": sorted(sys.modules)}}))
"""


def serve_and_list_modules(tmp_path, kubernetes: str) -> tuple[int, list[str]]:
    """Run `archfit serve` to ready and back; its exit status and every module it loaded."""
    port = free_port()
    path = tmp_path / "archfit.yaml"
    path.write_text(
        f"server: {{host: 127.0.0.1, port: {port}}}\nkubernetes: {kubernetes}\n"
        "logging: {format: json}\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", SERVE_THEN_LIST_MODULES.format(port=port), str(path)],
        capture_output=True,
        timeout=60,
        check=False,
    )
    last = orjson.loads(done.stdout.splitlines()[-1])
    return last["status"], last["modules"]


NOT_FOR_SERVING = ("kubernetes", "rich", "cryptography")


def test_serve_with_kubernetes_off_never_imports_the_kubernetes_client(tmp_path):
    """Start, become ready, drain: not one `kubernetes`, rich or cryptography module."""
    status, modules = serve_and_list_modules(tmp_path, "{mode: 'off'}")
    assert 0 == status
    assert [] == [m for m in modules if m.split(".")[0] in NOT_FOR_SERVING]


def test_the_check_sees_the_client_when_kubernetes_is_on(tmp_path):
    """The same run with a kubeconfig loads it: the check above can see the package."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    # Node index off: readiness does not wait for a list from this unreachable server.
    settings = f"{{mode: kubeconfig, kubeconfig: '{kubeconfig}', nodeIndex: false}}"
    status, modules = serve_and_list_modules(tmp_path, settings)
    assert 0 == status
    assert "kubernetes" in modules
