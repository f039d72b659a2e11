"""kube-controller-manager for the e2e modules that need real workload controllers.

Opt-in: a module asks for it through a fixture (conftest `autoscaled_controllers`), so the
modules that do not keep their plain API objects. It runs only the controllers asked for
(by default the Deployment and ReplicaSet controllers), with leader election off and the
client rate limits raised, so a 100-replica Deployment's pods are created in seconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tests.e2e.controlplane import Binaries
from tests.e2e.processes import Process, self_signed_ok
from tests.support.process import free_port

#: What a Deployment needs to get its pods: its ReplicaSet, and the ReplicaSet's pods.
WORKLOAD_CONTROLLERS = ("deployment-controller", "replicaset-controller")


class ControllerManager:
    """A kube-controller-manager process running `controllers`, with an admin kubeconfig."""

    def __init__(
        self,
        binaries: Binaries,
        workdir: Path,
        kubeconfig: Path,
        controllers: Sequence[str] = WORKLOAD_CONTROLLERS,
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.process = Process(
            "kube-controller-manager",
            [
                binaries.kube_controller_manager,
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                f"--controllers={','.join(controllers)}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.port}",
                f"--cert-dir={workdir / 'controller-manager-certs'}",
                # The defaults (20 a second, bursts of 30) would pace 100 pod creates.
                "--kube-api-qps=200",
                "--kube-api-burst=400",
                "--concurrent-deployment-syncs=2",
                "--concurrent-replicaset-syncs=2",
                "--v=2",
            ],
            workdir,
        )

    def start(self) -> ControllerManager:
        """Start it and wait until /healthz answers (its informers start right after)."""
        self.process.start()
        self.process.wait_ready(self_signed_ok(self.port, "/healthz"))
        return self

    def stop(self) -> None:
        """Stop it."""
        self.process.stop()
