"""Which matching rule a node's container runtime follows, from its containerRuntimeVersion.

Pure: kubelet reports `<runtime>://<version>` in status.nodeInfo.containerRuntimeVersion
(`containerd://2.0.5`, `cri-o://1.31.2`); this maps it to a platforms.Rule.
"""

from __future__ import annotations

import re

from extender.core.platforms import Rule

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
