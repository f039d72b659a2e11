"""Platform normalisation and strict matching, as containerd does them (DESIGN §2)."""

import pytest

from extender.platforms import Platform, accepts, node_platform, normalize, parse


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (("linux", "aarch64", ""), "linux/arm64"),
        (("linux", "arm64", "v8"), "linux/arm64"),
        (("linux", "arm64", "8"), "linux/arm64"),
        (("linux", "arm64", "v8.0"), "linux/arm64"),
        (("linux", "arm64", "v9"), "linux/arm64/v9"),
        (("linux", "x86_64", ""), "linux/amd64"),
        (("linux", "x86-64", ""), "linux/amd64"),
        (("linux", "amd64", "v1"), "linux/amd64"),
        (("linux", "amd64", "v3"), "linux/amd64/v3"),
        (("linux", "i386", ""), "linux/386"),
        (("linux", "armhf", ""), "linux/arm/v7"),
        (("linux", "armel", ""), "linux/arm/v6"),
        (("linux", "arm", ""), "linux/arm/v7"),
        (("linux", "arm", "7"), "linux/arm/v7"),
        (("Linux", "AMD64", ""), "linux/amd64"),
        (("windows", "amd64", ""), "windows/amd64"),
    ],
)
def test_raw_platform_values_normalise_like_containerd(raw, expected):
    """Aliases and redundant variants collapse to one canonical platform."""
    assert expected == str(normalize(*raw))


@pytest.mark.parametrize(
    ("node", "image", "expected"),
    [
        ("linux/arm64", "linux/arm64", True),
        ("linux/arm64", "linux/arm64/v8", True),
        ("linux/arm64", "linux/arm/v7", False),
        ("linux/arm64", "linux/amd64", False),
        ("linux/amd64", "linux/amd64", True),
        ("linux/amd64", "linux/amd64/v1", True),
        ("linux/amd64", "linux/386", False),
        ("linux/amd64", "linux/amd64/v3", False),
        ("linux/amd64", "windows/amd64", False),
        ("linux/arm/v7", "linux/arm/v6", True),
        ("linux/arm/v6", "linux/arm/v7", False),
    ],
)
def test_strict_matching_follows_containerd_2(node, image, expected):
    """A node accepts only its own architecture and base variant."""
    assert expected == accepts(parse(node), parse(image))


@pytest.mark.parametrize(
    ("node", "image", "expected"),
    [
        ("linux/arm64", "linux/arm/v7", True),
        ("linux/arm64", "linux/arm/v6", True),
        ("linux/amd64", "linux/386", True),
        ("linux/amd64", "linux/arm64", False),
    ],
)
def test_loose_matching_adds_the_containerd_1_fallbacks(node, image, expected):
    """With loose matching, 64-bit nodes accept their 32-bit relatives."""
    assert expected == accepts(parse(node), parse(image), loose=True)


def test_windows_nodes_need_the_same_build_as_the_image():
    """Process isolation runs an image only on the Windows build it was made for."""
    node = normalize("windows", "amd64", "", "10.0.17763")
    assert accepts(node, normalize("windows", "amd64", "", "10.0.17763.5820"))
    assert not accepts(node, normalize("windows", "amd64", "", "10.0.20348.2700"))


def test_node_platform_prefers_labels_and_falls_back_to_node_info():
    """Labels win; status.nodeInfo fills in when they are missing."""
    assert Platform("linux", "arm64") == node_platform(
        {"kubernetes.io/arch": "arm64", "kubernetes.io/os": "linux"}, {"architecture": "amd64"}
    )
    assert Platform("linux", "amd64") == node_platform(
        {}, {"architecture": "amd64", "operatingSystem": "linux"}
    )
    assert None is node_platform({}, {})


@pytest.mark.parametrize("text", ["", "linux", "linux/", "/arm64", "a/b/c/d"])
def test_parse_rejects_text_that_is_not_os_arch_variant(text):
    """Bad platform text is a ValueError naming it."""
    with pytest.raises(ValueError, match="os/arch"):
        parse(text)
