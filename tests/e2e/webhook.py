"""archfit's admission webhook on a real control plane, registered as operators register it.

The MutatingWebhookConfiguration and the workload warnings' ValidatingWebhookConfiguration
are the shipped ones (deploy/kustomize/components/webhook) with only clientConfig pointed at
a local archfit by URL; archfit makes its own CA and certificate, stores them in a Secret and
sets both caBundles, as it does in a cluster. kube-apiserver then calls it over TLS for every
pod CREATE, and every workload CREATE and UPDATE.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tests.e2e import cluster
from tests.e2e.archfit import Archfit, merge
from tests.support.process import free_port
from tests.support.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
COMPONENT = REPO / "deploy" / "kustomize" / "components" / "webhook"
SHIPPED_WEBHOOK = COMPONENT / "mutatingwebhook.yaml"
SHIPPED_WARNINGS = COMPONENT / "validatingwebhook.yaml"
WARNINGS_CONFIGURATION = "archfit-workload-warnings"
NAMESPACE = "archfit-system"
PLATFORMS_ANNOTATION = "archfit.io/platforms"
#: GKE's taint on Arm nodes; the webhook tolerates it for pods whose images all run on arm64.
ARM64_TAINT = {"key": "kubernetes.io/arch", "value": "arm64", "effect": "NoSchedule"}


def shipped_configuration(url: str, shipped: Path = SHIPPED_WEBHOOK) -> dict[str, Any]:
    """A shipped webhook configuration, calling `url` instead of the Service."""
    document: dict[str, Any] = yaml.safe_load(shipped.read_text())
    for hook in document["webhooks"]:
        hook["clientConfig"] = {"url": url}
    return document


class WebhookArchfit:
    """archfit serving the extender verbs and the webhook, registered with one control plane."""

    def __init__(
        self,
        kubeconfig: Path,
        settings: Mapping[str, Any],
        workdir: Path,
        name: str = "archfit",
        front: int | None = None,
    ) -> None:
        self.kubeconfig = kubeconfig
        self.webhook_port = free_port()
        self.front = front
        """The port of a load balancer in front of every replica (as a Service): the
        configurations name it instead of this replica's own port."""
        tls = workdir / f"{name}-tls"
        self.settings = merge(
            settings,
            {
                "webhook": {
                    "enabled": True,
                    "host": "127.0.0.1",
                    "port": self.webhook_port,
                    "certFile": str(tls / "tls.crt"),
                    "keyFile": str(tls / "tls.key"),
                    "archTaints": [{"architecture": "arm64", **ARM64_TAINT}],
                    "certificate": {
                        "selfManaged": True,
                        "secretNamespace": NAMESPACE,
                        # kube-apiserver calls https://127.0.0.1:<port>/mutate.
                        "hosts": ["127.0.0.1"],
                    },
                }
            },
        )
        self.archfit = Archfit(workdir, self.settings, name=name)
        api = config.new_client_from_config(config_file=str(kubeconfig))
        self._admission = client.AdmissionregistrationV1Api(api)
        self._core = client.CoreV1Api(api)

    @property
    def url_prefix(self) -> str:
        """The extender urlPrefix of this archfit."""
        return self.archfit.url_prefix

    @property
    def log_path(self) -> Path:
        return self.archfit.process.log_path

    def url(self, path: str) -> str:
        """What kube-apiserver calls for `path`: this replica, or the front before them all."""
        return f"https://127.0.0.1:{self.front or self.webhook_port}{path}"

    def start(self) -> WebhookArchfit:
        """Register the configuration (no caBundle), start archfit, wait until it is called."""
        with contextlib.suppress(ApiException):  # 409: it exists already
            self._core.create_namespace({"metadata": {"name": NAMESPACE}})
        self._unregister()
        url = self.url("/mutate")
        self._admission.create_mutating_webhook_configuration(shipped_configuration(url))
        self.register_warnings()
        self.archfit.start()  # ready only once its certificate is loaded
        return self

    def register(self) -> None:
        """Register the pod webhook again after `unregister`, with the caBundle archfit made."""
        url = self.url("/mutate")
        configuration = shipped_configuration(url)
        bundle = base64.b64encode(self.ca_bundle()).decode()
        for hook in configuration["webhooks"]:
            hook["clientConfig"]["caBundle"] = bundle
        with contextlib.suppress(ApiException):  # 409: registered already
            self._admission.create_mutating_webhook_configuration(configuration)

    def unregister(self) -> None:
        """Remove the pod webhook's configuration only (archfit keeps running)."""
        with contextlib.suppress(ApiException):  # 404: not there
            self._admission.delete_mutating_webhook_configuration("archfit")

    def register_warnings(self) -> None:
        """Register the workload warnings' configuration (archfit sets its caBundle)."""
        url = self.url("/warn")
        configuration = shipped_configuration(url, SHIPPED_WARNINGS)
        self._admission.create_validating_webhook_configuration(configuration)

    def unregister_warnings(self) -> None:
        with contextlib.suppress(ApiException):  # 404: not there
            self._admission.delete_validating_webhook_configuration(WARNINGS_CONFIGURATION)

    def wait_called(self, namespace: str, image: str) -> None:
        """Wait until kube-apiserver calls the webhook (the caBundle took effect).

        A server-side dry-run create runs mutating webhooks and returns the mutated pod.
        """
        probe = cluster.pod_manifest("webhook-probe", [image])

        def annotated() -> bool:
            created = self._core.create_namespaced_pod(namespace, probe, dry_run="All")
            return PLATFORMS_ANNOTATION in (created.metadata.annotations or {})

        wait_for(annotated, "kube-apiserver to call archfit's webhook")

    def ca_bundle(self) -> bytes:
        """The PEM CA archfit made for itself (from its Secret), to trust its webhook."""
        secret = self._core.read_namespaced_secret("archfit-webhook-tls", NAMESPACE)
        return base64.b64decode(secret.data["ca.crt"])

    def stop(self) -> None:
        """Stop archfit and remove the configuration, so later pods are not sent to it."""
        self.archfit.stop()
        self._unregister()

    def _unregister(self) -> None:
        with contextlib.suppress(ApiException):  # 404: not there
            self._admission.delete_mutating_webhook_configuration("archfit")
        self.unregister_warnings()


PROBES = "probe"
"""The namespace `serving_webhook` creates its probe pods in (dry-run, never stored)."""


@contextlib.contextmanager
def serving_webhook(
    kubeconfig: Path, settings: Mapping[str, Any], workdir: Path, probe_image: str
) -> Iterator[WebhookArchfit]:
    """archfit started with `settings`, its webhook registered and seen called by
    kube-apiserver for a pod of `probe_image`; stopped and unregistered on leaving the block,
    or at once when the start fails."""
    hook = WebhookArchfit(kubeconfig, settings, workdir)
    try:
        hook.start()
        cluster.create_namespace(cluster.core_api(kubeconfig), PROBES)
        hook.wait_called(PROBES, probe_image)
        yield hook
    finally:
        hook.stop()
