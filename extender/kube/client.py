"""Building a Kubernetes API client from settings (in-cluster, kubeconfig, or none).

`kubernetes` is imported only once a client is really built: with `kubernetes.mode: off`
(or `auto` outside a cluster) archfit never loads it (~20 MB and ~0.4 s of start-up).
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from extender.config import KubernetesSettings
from extender.kube.errors import KubeConfigError

if TYPE_CHECKING:
    from kubernetes import client

__all__ = ["KubeConfigError", "build_api_client", "current_namespace", "resolved_mode"]


def resolved_mode(settings: KubernetesSettings, *, required: bool = False) -> str:
    """`in-cluster`, `kubeconfig` or `off`: what `auto` means here, and the others as set.

    `required` (a command that only reads the cluster): `auto` outside a cluster falls back
    to the default kubeconfig as kubectl does.
    """
    mode = settings.mode
    if mode == "auto":
        # Inside a pod the service-account token is mounted and this env var is set.
        mode = "in-cluster" if os.environ.get("KUBERNETES_SERVICE_HOST") else "off"
        if settings.kubeconfig or (required and mode == "off"):
            mode = "kubeconfig"
    return mode


def build_api_client(
    settings: KubernetesSettings, *, required: bool = False
) -> client.ApiClient | None:
    """An ApiClient, or None when Kubernetes access is off (or `auto` outside a cluster).

    `required` (a command that only reads the cluster): `auto` outside a cluster falls back
    to the default kubeconfig as kubectl does, and `off` is an error.
    """
    mode = resolved_mode(settings, required=required)
    if mode == "off":
        if required:
            raise KubeConfigError("kubernetes.mode is off, and this command reads the cluster")
        return None
    from kubernetes import client, config

    configuration = client.Configuration()
    try:
        if mode == "in-cluster":
            config.load_incluster_config(client_configuration=configuration)
        else:
            config.load_kube_config(
                config_file=_kubeconfig(settings.kubeconfig),
                context=settings.context or None,
                client_configuration=configuration,
            )
    except (config.ConfigException, OSError) as error:
        raise KubeConfigError(f"kubernetes.mode={settings.mode}: {error}") from error
    # urllib3 would retry a timed-out read 3 times; archfit's callers have their
    # own deadlines and retry loops, so one attempt is enough. A command that only reads
    # the cluster makes none: a refused connection is one line, not a retry warning first.
    configuration.retries = 0 if required else 1
    api = client.ApiClient(configuration)
    if required:
        _check_reachable(api, configuration.host)
    return api


def _kubeconfig(path: str) -> str:
    """The kubeconfig file(s) to read: `path`, else $KUBECONFIG as it is now (the client
    reads it once, at import), else ~/.kube/config. Raises KubeConfigError naming them when
    none exists (the client says only "Invalid kube-config file. No configuration found.")."""
    if path:
        chosen, origin = path, "kubernetes.kubeconfig"
    elif os.environ.get("KUBECONFIG"):
        chosen, origin = os.environ["KUBECONFIG"], "$KUBECONFIG"
    else:
        chosen, origin = "~/.kube/config", "the default"
    paths = [p for p in chosen.split(os.pathsep) if p]
    if not any(os.path.isfile(os.path.expanduser(p)) for p in paths):
        raise KubeConfigError(f"no kubeconfig file at {', '.join(paths)} ({origin})")
    return chosen


def _check_reachable(api: client.ApiClient, host: str) -> None:
    """GET /version once: an API server that does not answer is one clear error."""
    import urllib3
    from kubernetes import client

    try:
        client.VersionApi(api).get_code(_request_timeout=(5, 10))
    except client.ApiException:
        return  # it answered: what it refuses is reported by the call that needs it
    except (urllib3.exceptions.HTTPError, OSError) as error:
        api.close()
        found = re.search(r"\[Errno -?\d+\] ([^'\")]+)", str(error))
        reason = found.group(1) if found else type(getattr(error, "reason", error)).__name__
        raise KubeConfigError(f"the API server at {host} does not answer: {reason}") from error


_IN_CLUSTER_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def current_namespace(settings: KubernetesSettings) -> str:
    """The namespace kubectl would use: the kubeconfig context's, the pod's own in-cluster,
    else `default`."""
    from kubernetes import config

    in_cluster = settings.mode == "in-cluster" or (
        settings.mode == "auto"
        and not settings.kubeconfig
        and os.environ.get("KUBERNETES_SERVICE_HOST")
    )
    try:
        if in_cluster:
            with open(_IN_CLUSTER_NAMESPACE, encoding="utf-8") as file:
                return file.read().strip() or "default"
        contexts, active = config.list_kube_config_contexts(
            config_file=_kubeconfig(settings.kubeconfig)
        )
    except (config.ConfigException, OSError, KubeConfigError):
        return "default"  # building the client reports what is wrong with the config
    if settings.context:
        active = next((c for c in contexts if c.get("name") == settings.context), None)
    return str((active or {}).get("context", {}).get("namespace") or "default")
