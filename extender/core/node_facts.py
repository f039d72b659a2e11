"""What archfit knows of a node: its platform, its runtime's matching rule, and whether its
CPUs run 32-bit Arm code, read from its labels and status.nodeInfo.

Pure. The node index and full-Node requests hand these out shared (node_parts.FactsOf), so
thousands of nodes cost a handful of tuples and placement compares them by identity.
"""

from __future__ import annotations

from collections.abc import Mapping

from extender.core.platforms import Platform, Rule, node_platform
from extender.core.runtimes import runtime_rule

AARCH32_LABEL = "archfit.io/aarch32"
"""Set to "true" by the operator on arm64 nodes whose CPUs run 32-bit Arm code (AArch32),
so that `policy.arm32OnArm64: labelled` lets their runtime's pull rule take arm/v5..v8
builds there (docs/configuration.md)."""

NodeFacts = tuple[Platform | None, Rule, bool]
"""What archfit knows of a node: its platform (None when it names no architecture), the
matching rule of its runtime, and whether it carries AARCH32_LABEL. Thousands of nodes
share a handful of these."""

UNKNOWN_NODE: NodeFacts = (None, Rule.STRICT, False)
"""What a node name archfit has not seen gets: no platform, so the failure policy decides."""


def node_facts(labels: Mapping[str, str], node_info: Mapping[str, str]) -> NodeFacts:
    """A node's platform (platforms.node_platform), the rule its runtime follows, and
    whether the operator says its CPUs run AArch32."""
    platform = node_platform(labels, node_info)
    version = node_info.get("containerRuntimeVersion")
    os = platform.os if platform is not None else "linux"
    aarch32 = labels.get(AARCH32_LABEL) == "true"
    return platform, runtime_rule(version if isinstance(version, str) else "", os), aarch32
