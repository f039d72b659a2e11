"""archfit itself, run as `archfit serve --config <file>` from the project's console script."""

from __future__ import annotations

import copy
import re
import shutil
import ssl
import sys
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.catalog import Images
from tests.e2e.processes import Process, http_ok
from tests.support.images import Image
from tests.support.process import free_port


def archfit_command() -> list[str]:
    """The installed console script, preferring the one beside the running interpreter."""
    beside = Path(sys.executable).with_name("archfit")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("archfit")
    if found:
        return [found]
    return [sys.executable, "-m", "extender"]


def archfit_settings(
    kubeconfig: Path, images: Images, extra_hosts: tuple[str, ...] = ()
) -> dict[str, Any]:
    """archfit settings for a control plane: enforce, fail-open, the local registries.

    `extra_hosts` are more loopback registries (host:port) spoken to over plain HTTP.
    """
    refs = (images.multi, images.private_arm64_only, images.unreachable_s390x_only)
    hosts = {host: {"plainHttp": True} for host in (*(_host(i) for i in refs), *extra_hosts)}
    return {
        "policy": {
            "mode": "enforce",
            "failurePolicy": "fail-open",
            "excludedNamespaces": ["kube-system"],
            "archPreference": {"arm64": 10, "amd64": 0},
            "resolveDeadlineSeconds": 1.5,
        },
        "kubernetes": {
            "mode": "kubeconfig",
            "kubeconfig": str(kubeconfig),
            "nodeIndex": True,
            "pullSecrets": True,
        },
        # The test registries live on loopback, which archfit refuses unless allowed.
        "registry": {"hosts": hosts, "allowedNetworks": ["127.0.0.1/32"]},
        "logging": {"level": "info", "format": "json"},
    }


def _host(image: Image) -> str:
    return image.reference.split("/", 1)[0]


def merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Deep-merge override into a copy of base; mappings merge, everything else replaces."""
    merged = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


class Archfit:
    """One archfit process with its own YAML config on a free loopback port."""

    prefix = "/scheduler"

    def __init__(
        self,
        workdir: Path,
        settings: Mapping[str, Any],
        name: str = "archfit",
        env: dict[str, str] | None = None,
        probe_client: tuple[Path, Path] | None = None,
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.probe_client = probe_client
        """(certificate, key) the readiness probe presents when server.clientCaFile is set."""
        self.port = free_port()
        self.settings = merge(
            settings, {"server": {"host": "127.0.0.1", "port": self.port, "prefix": self.prefix}}
        )
        self.config_path = workdir / f"{name}.yaml"
        self.config_path.write_text(yaml.safe_dump(self.settings))
        # Another checkout's extender (PYTHONPATH, bench --source/--before) runs its own
        # __main__: the console script names this checkout's entry point, which moves. -P:
        # `-m` would put the working directory first on sys.path, and a bench run from this
        # checkout's root would measure this checkout's extender instead.
        command = (
            [sys.executable, "-P", "-m", "extender"] if env and env.get("PYTHONPATH") else None
        )
        self.process = Process(
            name,
            [*(command or archfit_command()), "serve", "--config", str(self.config_path)],
            workdir,
            env,
        )

    @property
    def scheme(self) -> str:
        """https when the settings give archfit a serving certificate."""
        return "https" if self.settings["server"].get("certFile") else "http"

    @property
    def url_prefix(self) -> str:
        """What kube-scheduler's extender urlPrefix must be to reach this archfit."""
        return f"{self.scheme}://127.0.0.1:{self.port}{self.prefix}"

    def start(self) -> Archfit:
        """Start archfit and wait until /readyz answers 200."""
        self.process.start()
        # Readiness only, on loopback: the scheduler is what verifies the certificate.
        context = ssl._create_unverified_context() if self.scheme == "https" else None  # noqa: S323
        if context is not None and self.probe_client is not None:
            context.load_cert_chain(*self.probe_client)
        url = f"{self.scheme}://127.0.0.1:{self.port}/readyz"
        self.process.wait_ready(lambda: http_ok(url, context))
        return self

    def stop(self) -> None:
        """Stop archfit."""
        self.process.stop()

    def indexed_nodes(self) -> int | None:
        """The `archfit_node_index_nodes` gauge, read from /metrics (None before any list)."""
        found = self.metric("archfit_node_index_nodes")
        return None if found is None else int(found)

    def metrics_text(self) -> str:
        """The whole of /metrics."""
        url = f"http://127.0.0.1:{self.port}/metrics"
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.read().decode()

    def metric(self, series: str) -> float | None:
        """One series' value from /metrics, as written there (`name` or `name{labels}`), or
        None when it is not there."""
        found = re.search(rf"^{re.escape(series)} (\S+)$", self.metrics_text(), re.MULTILINE)
        return float(found.group(1)) if found else None
