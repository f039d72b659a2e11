"""etcd and kube-apiserver on 127.0.0.1, with generated certs and kubeconfigs.

No kubelets run: nodes are plain API objects and a pod counts as scheduled once
spec.nodeName is set. No kube-controller-manager runs either, unless a module asks for one
(tests/e2e/controllers.py, opt-in through a fixture): elsewhere a Deployment or ReplicaSet
is an object that nothing acts on.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tests.e2e import pki
from tests.e2e.processes import MAX_WAIT_SECONDS, Process, http_ok
from tests.support.process import free_port


@dataclass
class Binaries:
    """Paths of the binaries that tests/e2e/build.sh produced."""

    directory: Path

    @property
    def etcd(self) -> Path:
        """The etcd server."""
        return self.directory / "etcd"

    @property
    def kube_apiserver(self) -> Path:
        """The kube-apiserver."""
        return self.directory / "kube-apiserver"

    @property
    def kube_scheduler(self) -> Path:
        """The kube-scheduler."""
        return self.directory / "kube-scheduler"

    @property
    def kube_controller_manager(self) -> Path:
        """The kube-controller-manager (tests/e2e/controllers.py)."""
        return self.directory / "kube-controller-manager"


AUDITED_USER = "system:serviceaccount:default:list-without-watch"
"""The one user whose requests the apiserver's audit log records (test_list_without_watch)."""
AUDIT_POLICY = f"""apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  users: ["{AUDITED_USER}"]
- level: None
"""


def write_kubeconfig(path: Path, server: str, ca: Path, client: pki.ClientCert, user: str) -> Path:
    """Write a kubeconfig that talks to server with a client certificate."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "e2e", "cluster": {"server": server, "certificate-authority": str(ca)}}
        ],
        "users": [
            {
                "name": user,
                "user": {"client-certificate": str(client.cert), "client-key": str(client.key)},
            }
        ],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": user}}],
        "current-context": "e2e",
    }
    path.write_text(yaml.safe_dump(config))
    return path


@dataclass
class ControlPlane:
    """A running etcd and kube-apiserver, and kubeconfigs for admin and scheduler."""

    binaries: Binaries
    workdir: Path
    server: str = ""
    admin_kubeconfig: Path = field(default_factory=Path)
    audit_log: Path = field(default_factory=Path)
    """One JSON event per line, for AUDITED_USER's requests only."""
    scheduler_kubeconfig: Path = field(default_factory=Path)
    certs: pki.Pki | None = None
    _processes: list[Process] = field(default_factory=list)

    def start(self) -> ControlPlane:
        """Start etcd, then kube-apiserver, and wait until the apiserver is ready."""
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        logs = self.workdir
        certs = self.certs = pki.generate(self.workdir / "pki")

        client_port, peer_port = free_port(), free_port()
        etcd_url = f"http://127.0.0.1:{client_port}"
        peer_url = f"http://127.0.0.1:{peer_port}"
        etcd = Process(
            "etcd",
            [
                self.binaries.etcd,
                "--name=e2e",
                f"--data-dir={self.workdir / 'etcd-data'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=e2e={peer_url}",
                "--listen-metrics-urls=",
                # Throwaway data: durability only costs time here.
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
            logs,
        )
        self._processes.append(etcd.start())
        etcd.wait_ready(lambda: http_ok(f"{etcd_url}/health"))

        port = free_port()
        self.server = f"https://127.0.0.1:{port}"
        policy = self.workdir / "audit-policy.yaml"
        policy.write_text(AUDIT_POLICY)
        self.audit_log = self.workdir / "audit.log"
        apiserver = Process(
            "kube-apiserver",
            [
                self.binaries.kube_apiserver,
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={port}",
                f"--tls-cert-file={certs.serving_cert}",
                f"--tls-private-key-file={certs.serving_key}",
                f"--client-ca-file={certs.ca_cert}",
                f"--service-account-key-file={certs.sa_public_key}",
                f"--service-account-signing-key-file={certs.sa_private_key}",
                "--service-account-issuer=https://kubernetes.default.svc",
                "--authorization-mode=Node,RBAC",
                f"--audit-policy-file={policy}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-mode=blocking",
                "--service-cluster-ip-range=10.96.0.0/24",
                f"--cert-dir={self.workdir / 'apiserver-certs'}",
                "--v=1",
            ],
            logs,
        )
        self._processes.append(apiserver.start())
        self.admin_kubeconfig = write_kubeconfig(
            self.workdir / "admin.kubeconfig", self.server, certs.ca_cert, certs.admin, "admin"
        )
        self.scheduler_kubeconfig = write_kubeconfig(
            self.workdir / "scheduler.kubeconfig",
            self.server,
            certs.ca_cert,
            certs.scheduler,
            "system:kube-scheduler",
        )
        context = self.admin_ssl_context()
        apiserver.wait_ready(lambda: http_ok(f"{self.server}/readyz", context))

    def admin_ssl_context(self) -> ssl.SSLContext:
        """An SSL context that trusts the CA and presents the admin client cert."""
        assert self.certs is not None
        context = ssl.create_default_context(cafile=str(self.certs.ca_cert))
        context.load_cert_chain(str(self.certs.admin.cert), str(self.certs.admin.key))
        return context

    def restart_apiserver(self, ready_seconds: float = MAX_WAIT_SECONDS) -> None:
        """Stop kube-apiserver and start it again on the same port and etcd; wait until it
        is ready (up to `ready_seconds`: with 100,000 pods in etcd and its clients listing
        again, 2 cores took more than a minute). Its watch cache starts afresh, so a watch
        resumed from an older version is told 410 and its client lists again (as after an
        apiserver upgrade)."""
        apiserver = next(p for p in self._processes if p.name == "kube-apiserver")
        apiserver.stop()
        apiserver.start()
        context = self.admin_ssl_context()
        apiserver.wait_ready(lambda: http_ok(f"{self.server}/readyz", context), ready_seconds)

    def stop(self) -> None:
        """Stop the apiserver, then etcd."""
        for process in reversed(self._processes):
            process.stop()
        self._processes.clear()
