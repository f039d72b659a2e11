"""Building a Kubernetes API client from settings (in-cluster, kubeconfig, or none).

The client is `extender.kube.api.KubeApi`. The `kubernetes` package is imported only for a
kubeconfig user that it alone can authenticate (an exec plugin, an auth provider): in a pod,
or with a token or client certificate, archfit never loads it (~40 MB and ~0.5 s).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from extender.config.settings import KubernetesSettings
from extender.kube.api import KubeApi
from extender.kube.connection import SERVICE_ACCOUNT_DIR, Connection, from_configuration, in_cluster
from extender.kube.errors import ApiError, KubeConfigError
from extender.kube.kubeconfig import read_kubeconfig
from extender.registry.errors import snippet

__all__ = [
    "KubeConfigError",
    "access",
    "build_api_client",
    "context_names",
    "current_namespace",
    "resolved_mode",
]

_DEFAULT_KUBECONFIG = "~/.kube/config"


def access(settings: KubernetesSettings) -> tuple[str, str]:
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
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return "in-cluster", "in a pod (KUBERNETES_SERVICE_HOST is set): its service account"
    if os.environ.get("KUBECONFIG"):
        return "kubeconfig", f"$KUBECONFIG is {os.environ['KUBECONFIG']}"
    default = Path(_DEFAULT_KUBECONFIG).expanduser()
    if default.is_file():
        return "kubeconfig", f"{default} exists"
    return "off", (
        "kubernetes.mode is auto and there is no service account (KUBERNETES_SERVICE_HOST is "
        f"unset), no $KUBECONFIG and no {default}"
    )


def _kubeconfig(settings: KubernetesSettings) -> str:
    """The kubeconfig file(s) to read, as kubectl picks them (read now: $KUBECONFIG may have
    changed since start). Raises KubeConfigError naming them when none exists."""
    if settings.kubeconfig:
        chosen, origin = settings.kubeconfig, "kubernetes.kubeconfig"
    elif os.environ.get("KUBECONFIG"):
        chosen, origin = os.environ["KUBECONFIG"], "$KUBECONFIG"
    else:
        chosen, origin = str(Path(_DEFAULT_KUBECONFIG).expanduser()), "the default"
    paths = [p for p in chosen.split(os.pathsep) if p]
    if not any(Path(p).expanduser().is_file() for p in paths):
        raise KubeConfigError(f"no kubeconfig file at {', '.join(paths)} ({origin})")
    return chosen


def resolved_mode(settings: KubernetesSettings) -> str:
    """`in-cluster`, `kubeconfig` or `off`: what `auto` means here (`access`)."""
    return access(settings)[0]


def build_api_client(settings: KubernetesSettings, *, required: bool = False) -> KubeApi | None:
    """The API client, or None when Kubernetes access is off (`access`).

    `required` (a command that only reads the cluster): no access is an error saying why.
    """
    mode, why = access(settings)
    if mode == "off":
        if required:
            raise KubeConfigError(
                f"{why}, and this command reads the cluster: name a kubeconfig with "
                "--kubeconfig PATH (and --context NAME), or set kubernetes.kubeconfig"
            )
        return None
    # A missing file is named as it is, not as the loader's failure.
    paths = "" if mode == "in-cluster" else _kubeconfig(settings)
    try:
        connection = in_cluster() if mode == "in-cluster" else _from_kubeconfig(paths, settings)
    except (KubeConfigError, OSError) as error:
        # `why` names the mode already when it was set ("kubernetes.mode is kubeconfig").
        where = why if settings.mode != "auto" else f"kubernetes.mode is auto, and {why}"
        raise KubeConfigError(f"{where}: {error}") from error
    # urllib3 would retry a timed-out read 3 times; archfit's callers have their
    # own deadlines and retry loops, so one attempt is enough. A command that only reads
    # the cluster makes none: a refused connection is one line, not a retry warning first.
    api = KubeApi(connection, retries=0 if required else 1)
    if required:
        _check_reachable(api)
    return api


def _from_kubeconfig(paths: str, settings: KubernetesSettings) -> Connection:
    """The context's connection, read natively; a user only the `kubernetes` package can
    authenticate (exec plugin, auth provider, password) is loaded by it, and only then is it
    imported."""
    connection = read_kubeconfig(paths).connection(settings.context)
    if connection is not None:
        return connection
    from kubernetes import client, config

    configuration = client.Configuration()
    try:
        config.load_kube_config(
            config_file=paths, context=settings.context or None, client_configuration=configuration
        )
    except config.ConfigException as error:
        raise KubeConfigError(str(error)) from error
    return from_configuration(configuration)


def _check_reachable(api: KubeApi) -> None:
    """GET /version once: an API server that does not answer is one clear error."""
    import urllib3

    try:
        version = api.get("/version", timeout=(5, 10))
    except ApiError:
        return  # it answered: what it refuses is reported by the call that needs it
    except (urllib3.exceptions.HTTPError, OSError) as error:
        api.close()
        found = re.search(r"\[Errno -?\d+\] ([^'\")]+)", str(error))
        reason = found.group(1) if found else type(getattr(error, "reason", error)).__name__
        raise KubeConfigError(f"the API server at {api.host} does not answer: {reason}") from error
    except ValueError as error:  # not JSON
        version = snippet(str(error), 120)
    if not (isinstance(version, dict) and version.get("gitVersion")):
        api.close()
        raise KubeConfigError(
            f"{api.host} answered GET /version with no Kubernetes version"
            f" ({snippet(str(version), 120)}): is it an API server?"
        )


def current_namespace(settings: KubernetesSettings) -> str:
    """The namespace kubectl would use: the kubeconfig context's, the pod's own in-cluster,
    else `default`."""
    try:
        if resolved_mode(settings) == "in-cluster":
            namespace = (SERVICE_ACCOUNT_DIR / "namespace").read_text(encoding="utf-8")
            return namespace.strip() or "default"
        return read_kubeconfig(_kubeconfig(settings)).namespace(settings.context) or "default"
    except (OSError, KubeConfigError):
        return "default"  # building the client reports what is wrong with the config


def context_names(settings: KubernetesSettings) -> list[str]:
    """Every context of the kubeconfig file(s), in file order (`archfit audit --all-contexts`).

    Raises KubeConfigError when the kubeconfig cannot be read.
    """
    try:
        return read_kubeconfig(_kubeconfig(settings)).context_names()
    except KubeConfigError as error:
        raise KubeConfigError(f"cannot list kubeconfig contexts: {error}") from error
