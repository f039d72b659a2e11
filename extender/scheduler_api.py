"""The kube-scheduler extender wire types (k8s.io/kube-scheduler/extender/v1): parse and render.

The Go types carry no json tags, so keys are the capitalised Go field names and
nil arrives as `null`. Pure functions; see docs/architecture.md, "The extender wire contract".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from extender import wire_json

MAX_PRIORITY = 10

MAX_NODES = 10_000
"""Candidates one call may carry: twice the 5,000 nodes Kubernetes is tested to scale to."""


class WireError(ValueError):
    """The request body is not a valid ExtenderArgs; the message says what is wrong."""


@dataclass(frozen=True, slots=True)
class ExtenderArgs:
    """A decoded ExtenderArgs. Exactly one of `nodes` and `node_names` is set."""

    pod: Mapping[str, Any]
    nodes: list[Mapping[str, Any]] | None
    """Full v1.Node objects (nodeCacheCapable: false), kept to be returned unmodified."""
    node_names: list[str] | None
    """Node names only (nodeCacheCapable: true)."""
    node_list_meta: Mapping[str, Any] = field(default_factory=dict)
    """The NodeList's own apiVersion/kind/metadata, echoed back around the kept items."""


def parse_args(body: bytes) -> ExtenderArgs:
    """Decode and check an ExtenderArgs body. Raises WireError naming the problem."""
    try:
        data = wire_json.loads(body)
    except wire_json.JsonError as error:
        raise WireError(str(error)) from error
    if not isinstance(data, dict):
        raise WireError("body must be a JSON object (ExtenderArgs)")
    pod = data.get("Pod")
    if pod is None:
        raise WireError("Pod is missing")
    if not isinstance(pod, dict):
        raise WireError("Pod must be an object (v1.Pod)")
    nodes_raw = data.get("Nodes")
    names_raw = data.get("NodeNames")
    if nodes_raw is None and names_raw is None:
        raise WireError("both Nodes and NodeNames are null; one of them must list the candidates")
    if names_raw is not None:
        if not isinstance(names_raw, list) or not all(type(n) is str for n in names_raw):
            raise WireError("NodeNames must be a list of strings")
        _check_count("NodeNames", len(names_raw))
        return ExtenderArgs(pod=pod, nodes=None, node_names=names_raw)
    if not isinstance(nodes_raw, dict):
        raise WireError("Nodes must be an object (v1.NodeList)")
    items = nodes_raw.get("items")
    if items is None:
        items = []
    if not isinstance(items, list):
        raise WireError("Nodes.items must be a list")
    _check_count("Nodes.items", len(items))
    for index, node in enumerate(items):
        if not isinstance(node, dict):
            raise WireError(f"Nodes.items[{index}] must be an object (v1.Node)")
        name = node_name(node)
        if not name:
            raise WireError(f"Nodes.items[{index}].metadata.name is missing")
    meta = {k: v for k, v in nodes_raw.items() if k != "items"}
    return ExtenderArgs(pod=pod, nodes=items, node_names=None, node_list_meta=meta)


def _check_count(where: str, count: int) -> None:
    if count > MAX_NODES:
        raise WireError(f"{where} lists {count} nodes, more than any cluster has ({MAX_NODES})")


def node_name(node: Mapping[str, Any]) -> str:
    metadata = node.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return name if isinstance(name, str) else ""


def node_labels_and_info(node: Mapping[str, Any]) -> tuple[Mapping[str, str], Mapping[str, str]]:
    """A node's labels and status.nodeInfo, tolerating nulls and wrong types."""
    metadata = node.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    status = node.get("status")
    info = status.get("nodeInfo") if isinstance(status, dict) else None
    return (
        {k: v for k, v in labels.items() if isinstance(v, str)} if isinstance(labels, dict) else {},
        {k: v for k, v in info.items() if isinstance(v, str)} if isinstance(info, dict) else {},
    )


def render_filter(
    args: ExtenderArgs,
    passed: Sequence[str],
    failed: Mapping[str, str],
    unresolvable: Mapping[str, str],
    error: str = "",
) -> bytes:
    """Encode an ExtenderFilterResult in the same mode as the request."""
    result: dict[str, Any] = {
        "Nodes": None,
        "NodeNames": None,
        "FailedNodes": dict(failed),
        "FailedAndUnresolvableNodes": dict(unresolvable),
        "Error": error,
    }
    if args.node_names is not None:
        result["NodeNames"] = list(passed)
    else:
        keep = set(passed)
        kept = [node for node in args.nodes or () if node_name(node) in keep]
        result["Nodes"] = {**args.node_list_meta, "items": kept}
    try:
        return wire_json.dumps(result)
    except wire_json.JsonError as error:
        # Only a body nested deeper than any Node gets here: the client's mistake.
        raise WireError(f"Nodes cannot be returned unmodified: {error}") from error


def render_error(message: str) -> bytes:
    """An ExtenderFilterResult carrying only `Error` (the scheduler counts it as a failure)."""
    return wire_json.dumps(
        {
            "Nodes": None,
            "NodeNames": None,
            "FailedNodes": {},
            "FailedAndUnresolvableNodes": {},
            "Error": message,
        }
    )


def render_priorities(scores: Mapping[str, int]) -> bytes:
    """Encode a HostPriorityList: a bare array of integer scores, clamped to 0..10.

    A float such as 7.0 would break Go's decoding and the scores would be
    dropped silently, hence the int().
    """
    return wire_json.dumps(
        [{"Host": host, "Score": max(0, min(MAX_PRIORITY, int(s)))} for host, s in scores.items()]
    )
