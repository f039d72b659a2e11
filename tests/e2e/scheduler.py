"""kube-scheduler started with the shipped config/scheduler-config.yaml.

Only the extender's urlPrefix, the kubeconfig and (for one scenario) nodeCacheCapable
are substituted; everything else is exactly what operators deploy. Without a urlPrefix
the extender is removed: kube-scheduler as a cluster without archfit runs it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.e2e.controlplane import Binaries
from tests.e2e.processes import Process, self_signed_ok
from tests.support.process import free_port

REPO = Path(__file__).resolve().parents[2]
SHIPPED_CONFIG = REPO / "config" / "scheduler-config.yaml"


def render_config(
    path: Path,
    kubeconfig: Path,
    url_prefix: str | None,
    node_cache_capable: bool | None = None,
    ca_file: Path | None = None,
    client: tuple[Path, Path] | None = None,
) -> dict[str, Any]:
    """Write the shipped KubeSchedulerConfiguration with the local substitutions to path.

    `client` is the (certificate, key) kube-scheduler presents to archfit (mutual TLS).

    `url_prefix=None` removes the extender: a managed control plane's default scheduler.
    """
    document: dict[str, Any] = yaml.safe_load(SHIPPED_CONFIG.read_text())
    document["clientConnection"]["kubeconfig"] = str(kubeconfig)
    if url_prefix is None:
        del document["extenders"]
        path.write_text(yaml.safe_dump(document))
        return document
    (extender,) = document["extenders"]
    extender["urlPrefix"] = url_prefix
    if node_cache_capable is not None:
        extender["nodeCacheCapable"] = node_cache_capable
    if ca_file is not None:
        # What `archfit scheduler-config --url https://... --ca-file ...` writes.
        extender["enableHTTPS"] = True
        extender["tlsConfig"] = {"caFile": str(ca_file)}
        if client is not None:
            # What `archfit scheduler-config ... --client-cert ... --client-key ...` adds.
            extender["tlsConfig"].update(certFile=str(client[0]), keyFile=str(client[1]))
    path.write_text(yaml.safe_dump(document))
    return document


class Scheduler:
    """A kube-scheduler process that calls archfit at url_prefix (None: no extender)."""

    def __init__(
        self,
        binaries: Binaries,
        workdir: Path,
        kubeconfig: Path,
        url_prefix: str | None,
        node_cache_capable: bool | None = None,
        name: str = "kube-scheduler",
        ca_file: Path | None = None,
        client: tuple[Path, Path] | None = None,
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.config_path = workdir / f"{name}-config.yaml"
        self.config = render_config(
            self.config_path, kubeconfig, url_prefix, node_cache_capable, ca_file, client
        )
        self.port = free_port()
        self.process = Process(
            name,
            [
                binaries.kube_scheduler,
                f"--config={self.config_path}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.port}",
                f"--cert-dir={workdir / (name + '-certs')}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--v=2",
            ],
            workdir,
        )

    def start(self) -> Scheduler:
        """Start the scheduler and wait until /readyz says its informers have synced."""
        self.process.start()
        self.process.wait_ready(self_signed_ok(self.port, "/readyz"))
        return self

    def stop(self) -> None:
        """Stop the scheduler."""
        self.process.stop()
