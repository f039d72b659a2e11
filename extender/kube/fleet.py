"""Reads what `archfit audit` judges: workloads, the ReplicaSets and Jobs between them and their
pods, pods, nodes, Karpenter NodePools and pod events, as raw JSON (camelCase, as the API
serves it).

Lists are paged and read once each; nothing is written. The API client is synchronous, so
call this from a thread, or before the event loop starts.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import orjson
import urllib3

from extender.errors import ClusterReadError
from extender.kube.client.api import KubeApi
from extender.kube.client.errors import ApiError
from extender.kube.client.watching import LIST_PAGE
from extender.kube.node_pools import KARPENTER_API, NODE_POOLS

_DENIED = (401, 403)

# kind → (API group path, resource)
_LISTS: dict[str, tuple[str, str]] = {
    "Deployment": ("/apis/apps/v1", "deployments"),
    "StatefulSet": ("/apis/apps/v1", "statefulsets"),
    "DaemonSet": ("/apis/apps/v1", "daemonsets"),
    "ReplicaSet": ("/apis/apps/v1", "replicasets"),
    "Job": ("/apis/batch/v1", "jobs"),
    "CronJob": ("/apis/batch/v1", "cronjobs"),
    "Pod": ("/api/v1", "pods"),
    "Event": ("/api/v1", "events"),
}


class FleetError(ClusterReadError):
    """The API server refused or failed a list; the message names the kind and namespace."""


@dataclass(frozen=True)
class Scope:
    """Which objects the audit reads."""

    namespace: str | None
    """One namespace, or None for all of them (minus `excluded`)."""
    selector: str = ""
    """A label selector for workloads and bare pods, as kubectl -l takes it."""
    excluded: Collection[str] = field(default=frozenset())
    """Namespaces left out of an all-namespaces audit (policy.excludedNamespaces)."""


@dataclass(frozen=True)
class Fleet:
    """The raw objects, by kind."""

    workloads: dict[str, list[dict[str, Any]]]
    """Deployment, StatefulSet, DaemonSet, Job, CronJob, and Pod (bare pods only)."""
    intermediates: list[dict[str, Any]]
    """Every ReplicaSet and Job: the links from pods up to Deployments and CronJobs."""
    pods: list[dict[str, Any]]
    """Every pod in scope, selector or not: where workloads run and what is broken."""
    nodes: list[dict[str, Any]]
    events: list[dict[str, Any]]
    """Events about pods."""
    left_out: dict[str, str] = field(default_factory=dict)
    """Kind ("Event", "Node", "NodePool") → the API server's answer, for what the identity may
    not list: the audit goes on without them (extender.audit.pure.report.LeftOut)."""
    node_pools: list[dict[str, Any]] = field(default_factory=list)
    """Karpenter's NodePools (none where the API does not serve them): what capacity may be
    added."""


def read_fleet(api: KubeApi, scope: Scope, timeout_seconds: float = 30.0) -> Fleet:
    """List everything the audit needs. Raises FleetError when a list fails."""

    def read(kind: str, selector: str = "", field_selector: str = "") -> list[dict[str, Any]]:
        return _list(api, kind, scope, selector, field_selector, timeout_seconds)

    left_out: dict[str, str] = {}

    def events() -> list[dict[str, Any]]:
        """Events only add to "broken now"; without the right to list them, statuses remain."""
        try:
            return read("Event", field_selector="involvedObject.kind=Pod")
        except FleetError as error:
            cause = error.__cause__
            if isinstance(cause, ApiError) and cause.status in _DENIED:
                left_out["Event"] = _api_reason(cause)
                return []
            raise

    pods = read("Pod")
    jobs = read("Job")
    selected_pods = read("Pod", scope.selector) if scope.selector else pods
    workloads = {
        "Deployment": read("Deployment", scope.selector),
        "StatefulSet": read("StatefulSet", scope.selector),
        "DaemonSet": read("DaemonSet", scope.selector),
        # A Job that a CronJob started is that CronJob's run, not a workload of its own.
        "Job": [job for job in (read("Job", scope.selector) if scope.selector else jobs)
                if not _owned_by(job, "CronJob")],
        "CronJob": read("CronJob", scope.selector),
        "Pod": [pod for pod in selected_pods if not pod["metadata"].get("ownerReferences")],
    }  # fmt: skip
    return Fleet(
        workloads=workloads,
        intermediates=read("ReplicaSet") + jobs,
        pods=pods,
        nodes=_nodes(api, timeout_seconds, left_out),
        events=events(),
        left_out=left_out,
        node_pools=_node_pools(api, timeout_seconds, left_out),
    )


def _list(
    api: KubeApi,
    kind: str,
    scope: Scope,
    selector: str,
    field_selector: str,
    timeout: float,
) -> list[dict[str, Any]]:
    group, resource = _LISTS[kind]
    where = f"namespace {scope.namespace}" if scope.namespace else "all namespaces"
    if scope.namespace:
        path = f"{group}/namespaces/{scope.namespace}/{resource}"
    else:
        path = f"{group}/{resource}"
    items: list[dict[str, Any]] = []
    token = ""
    while True:
        try:
            query = {
                "labelSelector": selector or None,
                "fieldSelector": field_selector or None,
                "limit": LIST_PAGE,
                "continue": token or None,
            }
            page = api.get(path, query=query, timeout=timeout)
        except ApiError as error:
            raise FleetError(f"cannot list {kind}s in {where}: {_api_reason(error)}") from error
        except (urllib3.exceptions.HTTPError, OSError, orjson.JSONDecodeError) as error:
            raise FleetError(f"cannot list {kind}s in {where}: {error}") from error
        for item in page.get("items") or []:
            metadata = item["metadata"]
            if scope.namespace or metadata.get("namespace") not in scope.excluded:
                # The audit reads neither; kubectl's last-applied annotation and managed
                # fields are often most of an object's size, times every pod in the cluster.
                metadata.pop("managedFields", None)
                metadata.pop("annotations", None)
                items.append(item)
        token = (page.get("metadata") or {}).get("continue") or ""
        if not token:
            return items


def _nodes(api: KubeApi, timeout: float, left_out: dict[str, str]) -> list[dict[str, Any]]:
    """Nodes, for their architectures; without the right to list them, none are known."""
    try:
        nodes: list[dict[str, Any]] = api.get("/api/v1/nodes", timeout=timeout).get("items") or []
    except ApiError as error:
        if error.status in (*_DENIED, HTTPStatus.NOT_FOUND):
            left_out["Node"] = _api_reason(error)
            return []  # where pods run is then counted as "unknown"
        raise FleetError(f"cannot list Nodes: {_api_reason(error)}") from error
    except (urllib3.exceptions.HTTPError, OSError, orjson.JSONDecodeError) as error:
        raise FleetError(f"cannot list Nodes: {error}") from error
    return nodes


def _node_pools(api: KubeApi, timeout: float, left_out: dict[str, str]) -> list[dict[str, Any]]:
    """Karpenter's NodePools; none where the API does not serve them (no Karpenter: asked of
    discovery first, which any identity may read, so an identity without the right to list
    NodePools is not told so on a cluster that has none), and left out without that right."""
    try:
        api.get(KARPENTER_API, timeout=timeout)
    except ApiError as error:
        if error.status == HTTPStatus.NOT_FOUND:
            return []
    except (urllib3.exceptions.HTTPError, OSError, orjson.JSONDecodeError) as error:
        raise FleetError(f"cannot read {KARPENTER_API}: {error}") from error
    try:
        found = api.get(NODE_POOLS, timeout=timeout).get("items") or []
    except ApiError as error:
        if error.status == HTTPStatus.NOT_FOUND:
            return []
        if error.status in _DENIED:
            left_out["NodePool"] = _api_reason(error)
            return []
        raise FleetError(f"cannot list NodePools: {_api_reason(error)}") from error
    except (urllib3.exceptions.HTTPError, OSError, orjson.JSONDecodeError) as error:
        raise FleetError(f"cannot list NodePools: {error}") from error
    return list(found)


def _owned_by(obj: dict[str, Any], kind: str) -> bool:
    refs = obj["metadata"].get("ownerReferences") or []
    return any(ref.get("kind") == kind and ref.get("controller") for ref in refs)


def _api_reason(error: ApiError) -> str:
    return f"{error.status} {error.message}"
