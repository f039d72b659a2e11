"""The matching rule of each node runtime, as containerd and CRI-O pull."""

import pytest

from extender.core.platforms import Rule
from extender.core.runtimes import runtime_rule


@pytest.mark.parametrize(
    ("version", "os", "expected"),
    [
        # containerd 2.0.x: internal/cri/server/images/image_pull.go calls client.Pull, whose
        # matcher is client.go's platforms.Default() = compare.go Only().
        ("containerd://2.0.5", "linux", Rule.LOOSE),
        ("containerd://2.0.0-rc.3", "linux", Rule.LOOSE),
        ("containerd://1.7.27", "linux", Rule.LOOSE),
        ("containerd://1.6.36-0ubuntu1~24.04.2", "linux", Rule.LOOSE),
        ("containerd://2.0.5-k3s1", "linux", Rule.LOOSE),
        # containerd ≥ 2.1: pullImageWithTransferService, matched by imagestore.go's
        # platforms.Ordered(DefaultSpec()), which is OnlyStrict.
        ("containerd://2.1.0", "linux", Rule.STRICT),
        ("containerd://2.1.0-rc.1", "linux", Rule.STRICT),
        ("containerd://2.2.0", "linux", Rule.STRICT),
        ("containerd://v2.3.4", "linux", Rule.STRICT),
        ("containerd://10.0.0", "linux", Rule.STRICT),
        # defaults_windows.go Default() is NewMatcher(DefaultSpec()): no fallbacks.
        ("containerd://1.7.27", "windows", Rule.STRICT),
        ("containerd://2.0.5", "windows", Rule.STRICT),
        # CRI-O pulls through containers/image.
        ("cri-o://1.31.2", "linux", Rule.CONTAINERS_IMAGE),
        ("CRI-O://1.33.0", "linux", Rule.CONTAINERS_IMAGE),
        # Anything archfit does not know is judged by the narrowest rule.
        ("docker://27.1.1", "linux", Rule.STRICT),
        ("none://0", "linux", Rule.STRICT),
        ("containerd://", "linux", Rule.STRICT),
        ("containerd://abc", "linux", Rule.STRICT),
        ("", "linux", Rule.STRICT),
    ],
)
def test_each_runtime_version_maps_to_the_rule_its_pull_uses(version, os, expected):
    """containerRuntimeVersion → the platform matcher that runtime's image pull applies."""
    assert expected == runtime_rule(version, os)
