"""How archfit reaches the API server from its settings: in a pod, from a kubeconfig, or not.

It picks the way (`access`), reads the pod's service account or the kubeconfig as client-go
does (extender.kube.client), and builds the client (`build_api_client`). The environment
is read when asked, so $KUBECONFIG or a proxy set since start counts.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from extender.config.settings import KubernetesSettings
from extender.core.text import cut
from extender.kube.client.api import UNREACHABLE, KubeApi
from extender.kube.client.errors import ApiError, KubeConfigError
from extender.kube.client.kubeconfig import ClientConfig, load_rules, read_files
from extender.kube.client.rest_config import (
    SERVICE_ACCOUNT_DIR,
    RestConfig,
    in_cluster,
    in_cluster_namespace,
)
from extender.kube.client.transport import ServerTransport

__all__ = [
    "KubeConfigError",
    "access",
    "build_api_client",
    "context_names",
    "current_namespace",
    "namespace",
    "resolved_mode",
]

_DEFAULT_KUBECONFIG = "~/.kube/config"


def access(
    settings: KubernetesSettings, environ: Mapping[str, str] = os.environ
) -> tuple[str, str]:
    """(`in-cluster` | `kubeconfig` | `off`, why): how archfit reaches the API server here.

    `auto` means the same for every command, what an operator expects of a tool that runs
    both in a pod and on a laptop: `kubernetes.kubeconfig` if set; else, in a pod, its
    service account; else $KUBECONFIG; else ~/.kube/config if it exists; else off.
    """
    mode = settings.mode
    if mode != "auto":
        return mode, f"kubernetes.mode is {mode}"
    if settings.kubeconfig:
        return "kubeconfig", f"kubernetes.kubeconfig is {settings.kubeconfig}"
    # Inside a pod the service-account token is mounted and this env var is set.
    if environ.get("KUBERNETES_SERVICE_HOST"):
        return "in-cluster", "in a pod (KUBERNETES_SERVICE_HOST is set): its service account"
    if environ.get("KUBECONFIG"):
        return "kubeconfig", f"$KUBECONFIG is {environ['KUBECONFIG']}"
    default = Path(environ.get("HOME", "~"), ".kube", "config")
    if default.is_file():
        return "kubeconfig", f"{default} exists"
    return "off", (
        "kubernetes.mode is auto and there is no service account (KUBERNETES_SERVICE_HOST is "
        f"unset), no $KUBECONFIG and no {default}"
    )


def resolved_mode(settings: KubernetesSettings) -> str:
    """`in-cluster`, `kubeconfig` or `off`: what `auto` means here (`access`)."""
    return access(settings)[0]


def _client_config(settings: KubernetesSettings, environ: Mapping[str, str]) -> ClientConfig:
    """The kubeconfig's context as clientcmd reads it: `kubernetes.kubeconfig` as kubectl's
    --kubeconfig (it must exist), else $KUBECONFIG's files, else ~/.kube/config."""
    rules = load_rules(settings.kubeconfig, environ)
    files = [rules.explicit] if rules.explicit else [name for name in rules.precedence if name]
    if not any(os.path.exists(name) for name in files):
        origin = (
            "kubernetes.kubeconfig"
            if rules.explicit
            else "$KUBECONFIG"
            if environ.get("KUBECONFIG")
            else "the default"
        )
        raise KubeConfigError(f"no kubeconfig file at {', '.join(files)} ({origin})")
    return ClientConfig(read_files(rules), settings.context)


def rest_config(
    settings: KubernetesSettings,
    environ: Mapping[str, str] = os.environ,
    account: Path = SERVICE_ACCOUNT_DIR,
) -> RestConfig | None:
    """The API server and credentials the settings give, or None when access is off.
    Raises KubeConfigError saying why the settings cannot work."""
    mode, why = access(settings, environ)
    if mode == "off":
        return None
    if mode == "in-cluster":
        try:
            return in_cluster(environ, account)
        except KubeConfigError as error:
            raise KubeConfigError(f"{_mode_and(settings, why)}: {error}") from error
    client = _client_config(settings, environ)  # a missing file is named as it is
    try:
        return client.rest_config()
    except KubeConfigError as error:
        raise KubeConfigError(f"{_mode_and(settings, why)}: {error}") from error


def _mode_and(settings: KubernetesSettings, why: str) -> str:
    """How the mode was chosen, each fact once: `why` names a mode that was set ("kubernetes.mode
    is kubeconfig"), and says what `auto` found otherwise."""
    return why if settings.mode != "auto" else f"kubernetes.mode is auto, and {why}"


def build_api_client(
    settings: KubernetesSettings,
    *,
    required: bool = False,
    environ: Mapping[str, str] = os.environ,
    account: Path = SERVICE_ACCOUNT_DIR,
) -> KubeApi | None:
    """The API client, or None when Kubernetes access is off (`access`).

    `required` (a command that only reads the cluster): no access is an error saying why.
    """
    mode, why = access(settings, environ)
    if mode == "off":
        if required:
            raise KubeConfigError(
                f"{why}, and this command reads the cluster: name a kubeconfig with "
                "--kubeconfig PATH (and --context NAME), or set kubernetes.kubeconfig"
            )
        return None
    config = rest_config(settings, environ, account)
    assert config is not None
    try:
        transport = ServerTransport(config, environ)
    except KubeConfigError as error:
        raise KubeConfigError(f"{_mode_and(settings, why)}: {error}") from error
    # urllib3 would retry a timed-out read 3 times; archfit's callers have their
    # own deadlines and retry loops, so one attempt is enough. A command that only reads
    # the cluster makes none: a refused connection is one line, not a retry warning first.
    api = KubeApi(transport, retries=0 if required else 1)
    if required:
        _check_reachable(api)
    return api


def _check_reachable(api: KubeApi) -> None:
    """GET /version once: an API server that does not answer is one clear error."""
    try:
        version = api.get("/version", timeout=(5, 10))
    except ApiError:
        return  # it answered: what it refuses is reported by the call that needs it
    except UNREACHABLE as error:
        api.close()
        found = re.search(r"\[Errno -?\d+\] ([^'\")]+)", str(error))
        reason = found.group(1) if found else cut(str(error), 200) or type(error).__name__
        raise KubeConfigError(f"the API server at {api.host} does not answer: {reason}") from error
    except ValueError as error:  # not JSON
        version = cut(str(error), 120)
    if not (isinstance(version, dict) and version.get("gitVersion")):
        api.close()
        raise KubeConfigError(
            f"{api.host} answered GET /version with no Kubernetes version"
            f" ({cut(str(version), 120)}): is it an API server?"
        )


def namespace(
    settings: KubernetesSettings,
    environ: Mapping[str, str] = os.environ,
    account: Path = SERVICE_ACCOUNT_DIR,
) -> str:
    """The namespace kubectl would use: in a pod POD_NAMESPACE or its own, else the
    kubeconfig context's, else `default`. Raises KubeConfigError."""
    if access(settings, environ)[0] == "in-cluster":
        return in_cluster_namespace(environ, account)
    return _client_config(settings, environ).namespace()


def current_namespace(settings: KubernetesSettings) -> str:
    """`namespace`, or `default` when the config cannot be read (building the client says
    what is wrong with it)."""
    try:
        return namespace(settings)
    except KubeConfigError:
        return "default"


def context_names(settings: KubernetesSettings) -> list[str]:
    """Every context of the kubeconfig file(s), in file order (`archfit audit --all-contexts`).

    Raises KubeConfigError when the kubeconfig cannot be read.
    """
    try:
        config = read_files(load_rules(settings.kubeconfig, os.environ))
    except KubeConfigError as error:
        raise KubeConfigError(f"cannot list kubeconfig contexts: {error}") from error
    if config.is_empty():
        raise KubeConfigError(
            "cannot list kubeconfig contexts: no kubeconfig at "
            f"{settings.kubeconfig or os.environ.get('KUBECONFIG') or _DEFAULT_KUBECONFIG}"
        )
    return list(config.contexts)
