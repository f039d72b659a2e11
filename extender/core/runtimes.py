"""Which matching rule a node's container runtime follows, from its containerRuntimeVersion.

Pure: kubelet reports `<runtime>://<version>` in status.nodeInfo.containerRuntimeVersion
(`containerd://2.0.5`, `cri-o://1.31.2`); this maps it to a platforms.Rule.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from extender.core.platforms import Platform, Rule, node_platform

_VERSION = re.compile(r"v?([0-9]+)\.([0-9]+)", re.ASCII)
_TRANSFER_SERVICE_PULL = (2, 1)
"""containerd 2.1 made CRI pull through the transfer service, which matches exactly."""


def runtime_rule(container_runtime_version: str, os: str) -> Rule:
    """The rule by which a node running `container_runtime_version` on `os` picks a manifest.

    - containerd ≥ 2.1: internal/cri/server/images/image_pull.go pullImageWithTransferService
      stores with transferimage.WithPlatforms(platforms.DefaultSpec()), matched by
      core/transfer/image/imagestore.go as platforms.Ordered(...): exact (Rule.STRICT).
    - containerd < 2.1 on Linux: client.Pull with platforms.Default() = Only() (Rule.LOOSE).
    - containerd on Windows: defaults_windows.go Default() is NewMatcher, exact (Rule.STRICT).
    - CRI-O: containers/image WantedPlatforms (Rule.CONTAINERS_IMAGE).
    - anything else, or a version that does not parse: Rule.STRICT, the narrowest.
    """
    runtime, _, version = container_runtime_version.partition("://")
    runtime = runtime.lower()
    if runtime == "cri-o":
        return Rule.CONTAINERS_IMAGE
    if runtime != "containerd" or os == "windows":
        return Rule.STRICT
    found = _VERSION.match(version)
    if found is None:
        return Rule.STRICT
    major, minor = int(found.group(1)), int(found.group(2))
    return Rule.STRICT if (major, minor) >= _TRANSFER_SERVICE_PULL else Rule.LOOSE


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
