"""`archfit audit` lists the workloads this cluster's capacity cannot run (its nodes, Karpenter
NodePools, capacity.declared) as blockers, in every output, and stays silent when the capacity
could not be read."""

from __future__ import annotations

import io
import json
from typing import Any

from extender.audit.output import write
from extender.audit.pure.options import Pricing
from extender.audit.run import fleet_capacity, judge_fleet, parse_workloads
from extender.core.platforms import Platform, Resolved, parse
from extender.core.pods import PullSecretsRef
from tests.support.audit_objects import arch_node, pod_spec, workload_object

API = "docker.io/acme/api:1.2"
WEB = "docker.io/acme/web:2"
AMD64_ONLY = frozenset({parse("linux/amd64")})
BOTH = frozenset({parse("linux/amd64"), parse("linux/arm64")})
GRAVITON = {
    "metadata": {"name": "graviton"},
    "spec": {
        "template": {
            "spec": {
                "requirements": [
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]},
                    {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                ]
            }
        }
    },
}


def _report(left_out: dict[str, str] | None = None, declared: frozenset[Platform] = frozenset()):
    objects: dict[str, list[dict[str, Any]]] = {
        "Deployment": [
            workload_object("Deployment", "api", pod_spec(API)),
            workload_object("Deployment", "web", pod_spec(WEB)),
        ],
        # A DaemonSet's pods follow the nodes there are: never a capacity blocker.
        "DaemonSet": [workload_object("DaemonSet", "agent", pod_spec(API))],
    }
    workloads, _ = parse_workloads(objects)
    lookups: dict[tuple[str, PullSecretsRef], Resolved] = {
        (API, PullSecretsRef("shop")): AMD64_ONLY,
        (WEB, PullSecretsRef("shop")): BOTH,
    }
    nodes = [arch_node("arm-1", "arm64")]
    capacity = fleet_capacity(nodes, [GRAVITON], left_out or {}, declared)
    return judge_fleet(workloads, lookups, [], [], nodes, [], Pricing(), capacity=capacity)


def _written(report: Any, output: str) -> str:
    out = io.StringIO()
    write(report, output, out)
    return out.getvalue()


def test_a_workload_no_node_or_node_pool_runs_is_a_capacity_blocker_in_json():
    """amd64 only, arm64 nodes and an arm64 NodePool: a blocker with the Event's words."""
    document = json.loads(_written(_report(), "json"))
    assert [
        {
            "kind": "Deployment",
            "namespace": "shop",
            "name": "api",
            "blocker": "cannot run on this cluster's capacity",
            "needs": ["linux/amd64"],
            "images": [API],
            "message": f"no node or NodePool offers linux/amd64 for {API}; nodes: arm64; "
            "NodePools: graviton (arm64)",
        }
    ] == document["capacityBlockers"]


def test_the_table_and_markdown_name_the_capacity_blockers():
    """The terminal and Markdown reports carry the section and a line in the summary."""
    report = _report()
    table, markdown = _written(report, "table"), _written(report, "markdown")
    assert "Cannot run on this cluster's capacity: 1 workloads." in table
    assert f"no node or NodePool offers linux/amd64 for {API}" in table
    assert "Workloads that cannot run on this cluster's capacity" in markdown
    assert r"no node or NodePool offers linux/amd64 for docker\.io/acme/api\:1\.2" in markdown


def test_declared_capacity_makes_the_workload_fit():
    """capacity.declared linux/amd64 (a node group scaled to zero): no blocker."""
    report = _report(declared=frozenset({parse("linux/amd64")}))
    assert () == report.capacity


def test_capacity_that_could_not_be_read_blocks_nothing_and_says_so():
    """NodePools left out (403): the capacity is unknown, so no workload is said not to fit."""
    report = _report(left_out={"NodePool": "403 nodepools.karpenter.sh is forbidden"})
    assert None is report.capacity
    assert None is json.loads(_written(report, "json"))["capacityBlockers"]
