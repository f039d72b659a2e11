"""A stand-in for the few kubectl commands deploy/README.md's removal procedure runs, against the
real kube-apiserver of $KUBECONFIG (kubectl itself is not among the binaries the tests build):

    kubectl delete -k DIR [--ignore-not-found]      (kustomize from $KUSTOMIZE)
    kubectl delete KIND NAME [--ignore-not-found]
    kubectl get pods -A -l SELECTOR

Anything else exits 2 and names the command, so a procedure that grows a step this does not know
fails its test instead of skipping the step. Run as `python -m tests.deploy.stand_in_kubectl`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import yaml
from kubernetes import config, dynamic
from kubernetes.client.exceptions import ApiException


def _client() -> dynamic.DynamicClient:
    return dynamic.DynamicClient(config.new_client_from_config(os.environ["KUBECONFIG"]))


def _resource(api: dynamic.DynamicClient, kind: str, api_version: str | None = None) -> Any:
    """The API resource kubectl would pick for `kind` (Kind, singular or plural name)."""
    wanted = kind.lower()
    for resource in api.resources.search():
        names = {resource.kind.lower(), resource.name, getattr(resource, "singular_name", "")}
        same_version = api_version is None or resource.group_version == api_version
        if wanted in names and "/" not in resource.name and same_version:
            return resource
    raise SystemExit(f'error: the server doesn\'t have a resource type "{kind}"')


def _delete(
    api: dynamic.DynamicClient, resource: Any, name: str, namespace: str | None, ignore: bool
) -> int:
    shown = f'{resource.kind.lower()}.{resource.group or "core"} "{name}"'
    try:
        api.delete(resource, name=name, namespace=namespace if resource.namespaced else None)
    except ApiException as error:
        if error.status == 404:
            if ignore:
                return 0
            print(f"Error from server (NotFound): {shown} not found", file=sys.stderr)
            return 1
        raise
    print(f"{shown} deleted")
    return 0


def main(argv: list[str]) -> int:
    ignore = "--ignore-not-found" in argv
    args = [a for a in argv if a != "--ignore-not-found"]
    match args:
        case ["delete", "-k", directory]:
            api = _client()
            built = subprocess.run(
                [os.environ["KUSTOMIZE"], "build", directory],
                capture_output=True,
                text=True,
                check=True,
                timeout=120,
            ).stdout
            status = 0
            for obj in (o for o in yaml.safe_load_all(built) if o):
                meta = obj["metadata"]
                resource = _resource(api, obj["kind"], obj["apiVersion"])
                status |= _delete(api, resource, meta["name"], meta.get("namespace"), ignore)
            return status
        case ["delete", kind, name]:
            api = _client()
            return _delete(api, _resource(api, kind), name, None, ignore)
        case ["get", "pods", "-A", "-l", selector]:
            api = _client()
            pods = api.resources.get(api_version="v1", kind="Pod")
            items = api.get(pods, label_selector=selector).items
            if not items:
                print("No resources found", file=sys.stderr)
            for pod in items:
                print(f"{pod.metadata.namespace} {pod.metadata.name}")
            return 0
    print(f"stand-in kubectl: unsupported command: kubectl {' '.join(argv)}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
