"""Building a Kubernetes API client from settings (in-cluster, kubeconfig, or none)."""

from __future__ import annotations

import os

from kubernetes import client, config

from extender.config import KubernetesSettings


class KubeConfigError(RuntimeError):
    """The API server cannot be configured as the settings ask."""


def build_api_client(settings: KubernetesSettings) -> client.ApiClient | None:
    """An ApiClient, or None when Kubernetes access is off (or `auto` outside a cluster)."""
    mode = settings.mode
    if mode == "auto":
        # Inside a pod the service-account token is mounted and this env var is set.
        mode = "in-cluster" if os.environ.get("KUBERNETES_SERVICE_HOST") else "off"
        if settings.kubeconfig:
            mode = "kubeconfig"
    if mode == "off":
        return None
    configuration = client.Configuration()
    try:
        if mode == "in-cluster":
            config.load_incluster_config(client_configuration=configuration)
        else:
            config.load_kube_config(
                config_file=settings.kubeconfig or None, client_configuration=configuration
            )
    except (config.ConfigException, OSError) as error:
        raise KubeConfigError(f"kubernetes.mode={settings.mode}: {error}") from error
    # urllib3 would retry a timed-out read 3 times; archfit's callers have their
    # own deadlines and retry loops, so one attempt is enough.
    configuration.retries = 1
    return client.ApiClient(configuration)
