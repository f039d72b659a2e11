"""Platform normalisation and matching, as containerd and containers/image do them."""

import pytest

from extender.core.platforms import (
    Platform,
    Rule,
    accepts,
    any_accepts,
    node_platform,
    normalize,
    parse,
)


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
        ("linux/arm/v7", "linux/arm/v6", False),
        ("linux/arm/v7", "linux/arm/armel", False),
        ("linux/arm/v6", "linux/arm/v7", False),
    ],
)
def test_strict_matching_follows_containerd_2_1(node, image, expected):
    """A node accepts only its own architecture and variant: arm/v7 runs no arm/v6 image."""
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
    """With loose matching, 64-bit nodes accept their 32-bit relatives (if their CPUs run them)."""
    assert expected == accepts(parse(node), parse(image), loose=True, aarch32=True)


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


# --- Upstream tables ---------------------------------------------------------------------
# Expected values read from github.com/containerd/platforms v1.0.0-rc.5 as vendored by
# containerd main (vendor/github.com/containerd/platforms/) and containers/image.


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # database.go normalizeArch: arm64 "9", "9.0" and "v9.0" all become v9.
        (("linux", "arm64", "9"), ("arm64", "v9")),
        (("linux", "arm64", "9.0"), ("arm64", "v9")),
        (("linux", "aarch64", "v9.0"), ("arm64", "v9")),
        (("linux", "arm64", "V8"), ("arm64", "")),
        (("linux", "arm64", "v8.2"), ("arm64", "v8.2")),
        # armhf and armel force their variant, whatever variant is written.
        (("linux", "armhf", "v6"), ("arm", "v7")),
        (("linux", "armel", "v7"), ("arm", "v6")),
        # i386 drops its variant; 386 itself is left alone.
        (("linux", "i386", "v2"), ("386", "")),
        (("linux", "386", "v2"), ("386", "v2")),
        # Bare arm digits: only 5, 6, 7 and 8 gain a "v"; others stay as written.
        (("linux", "arm", "5"), ("arm", "v5")),
        (("linux", "arm", "8"), ("arm", "v8")),
        (("linux", "arm", "4"), ("arm", "4")),
        (("linux", "arm", "vfoo"), ("arm", "vfoo")),
        (("linux", "amd64", "V1"), ("amd64", "")),
        # Nothing is trimmed: containerd compares what the manifest says.
        (("linux", "arm64 ", ""), ("arm64 ", "")),
    ],
)
def test_architecture_and_variant_normalise_as_containerd_normalize_arch(raw, expected):
    """database.go normalizeArch, case by case."""
    platform = normalize(*raw)
    assert expected == (platform.architecture, platform.variant)


def test_macos_is_darwin_as_containerd_normalize_os():
    """database.go normalizeOS lowercases and maps macos to darwin."""
    assert "darwin" == normalize("MacOS", "arm64").os


# compare_test.go TestOnly: what Only(node) (compare.go platformVector) matches.
ONLY = [
    ("linux/amd64", ["linux/amd64", "linux/386"],
     ["linux/amd64/v2", "linux/arm/v7", "linux/arm64", "windows/amd64", "windows/arm"]),
    ("linux/amd64/v2", ["linux/amd64", "linux/amd64/v1", "linux/amd64/v2", "linux/386"],
     ["linux/amd64/v3", "linux/amd64/v4", "linux/arm/v7", "linux/arm64", "windows/amd64"]),
    ("linux/386", ["linux/386"], ["linux/amd64", "linux/arm/v7", "linux/arm64"]),
    ("linux/arm/v8", ["linux/arm", "linux/arm/v5", "linux/arm/v6", "linux/arm/v7", "linux/arm/v8"],
     ["linux/amd64", "linux/arm/v4", "linux/arm64", "windows/arm"]),
    ("linux/arm/v7", ["linux/arm", "linux/arm/v5", "linux/arm/v6", "linux/arm/v7"],
     ["linux/amd64", "linux/arm/v4", "linux/arm/v8", "linux/arm64", "linux/arm/vfoo"]),
    ("linux/arm/v6", ["linux/arm/v5", "linux/arm/v6"],
     ["linux/arm", "linux/arm/v4", "linux/arm/v7", "linux/arm/v8", "linux/arm64"]),
    ("linux/arm/v5", ["linux/arm/v5"],
     ["linux/arm", "linux/arm/v4", "linux/arm/v6", "linux/arm/v7", "linux/arm64"]),
    ("linux/arm/v4", ["linux/arm/v4"],
     ["linux/arm", "linux/arm/v5", "linux/arm/v6", "linux/arm/v7", "linux/arm64"]),
    ("linux/arm64/v9", ["linux/arm", "linux/arm/v5", "linux/arm/v8", "linux/arm64",
                        "linux/arm64/v8", "linux/arm64/v8.5", "linux/arm64/v9", "linux/arm64/v9.0"],
     ["linux/amd64", "linux/arm/v4", "linux/arm64/v8.6", "windows/arm"]),
    ("linux/arm64/v8.1", ["linux/arm", "linux/arm/v8", "linux/arm64", "linux/arm64/v8",
                          "linux/arm64/v8.1"],
     ["linux/amd64", "linux/arm/v4", "linux/arm/v9", "linux/arm64/v9"]),
    ("linux/arm64", ["linux/arm", "linux/arm/v5", "linux/arm/v6", "linux/arm/v7", "linux/arm/v8",
                     "linux/arm64", "linux/arm64/v8"],
     ["linux/amd64", "linux/arm/v4", "linux/arm/v9", "linux/arm64/v9", "linux/arm/vfoo"]),
]  # fmt: skip

# compare_test.go TestOnlyStrict: OnlyStrict(node) = Ordered(Normalize(node)) matches only
# the node's own normalised platform.
ONLY_STRICT = [
    ("linux/amd64", ["linux/amd64"],
     ["linux/386", "linux/amd64/v2", "linux/arm/v7", "linux/arm64", "windows/amd64"]),
    ("linux/386", ["linux/386"], ["linux/amd64", "linux/arm/v7", "linux/arm64"]),
    ("linux/arm/v8", ["linux/arm/v8"],
     ["linux/arm", "linux/arm/v5", "linux/arm/v6", "linux/arm/v7", "linux/arm/v4"]),
    ("linux/arm/v7", ["linux/arm", "linux/arm/v7"],
     ["linux/arm/v5", "linux/arm/v6", "linux/arm/v4", "linux/arm/v8", "linux/arm/vfoo",
      "linux/arm64"]),
    ("linux/arm/v6", ["linux/arm/v6"], ["linux/arm/v5", "linux/arm", "linux/arm/v7"]),
    ("linux/arm64", ["linux/arm64", "linux/arm64/v8"],
     ["linux/arm/v7", "linux/arm/v8", "linux/arm64/v9", "linux/amd64"]),
]  # fmt: skip


def _cases(table):
    return [
        (node, image, ok)
        for node, accepted, refused in table
        for ok, images in ((True, accepted), (False, refused))
        for image in images
    ]


@pytest.mark.parametrize(("node", "image", "expected"), _cases(ONLY))
def test_loose_matching_is_containerd_only(node, image, expected):
    """compare.go Only(node).Match(image), table from compare_test.go TestOnly (whose arm64
    CPUs all run AArch32)."""
    assert expected == accepts(parse(node), parse(image), loose=True, aarch32=True)


@pytest.mark.parametrize(("node", "image", "expected"), _cases(ONLY_STRICT))
def test_strict_matching_is_containerd_only_strict(node, image, expected):
    """compare.go OnlyStrict(node).Match(image), table from compare_test.go TestOnlyStrict."""
    assert expected == accepts(parse(node), parse(image))


@pytest.mark.parametrize(
    ("host", "image", "expected"),
    [
        # platform_windows_compat_test.go Test_PlatformCompat
        (17763, 17763, True),
        (17763, 20348, False),
        (20348, 17763, False),
        (20348, 20348, True),
        (22621, 17763, False),
        (22621, 20348, True),
        (25398, 17763, False),
        (25398, 20348, True),
        (26100, 20348, True),
        (20348, 26100, False),
        (20348, 22621, False),
        (26100, 22621, True),
        # rc.5 checkWindowsHostAndContainerCompat: a host past the newest LTSC keeps the
        # previous LTSC as its floor, and never runs an image newer than itself.
        (26200, 20348, True),
        (26200, 26100, True),
        (26100, 26200, False),
        (22621, 25398, False),
    ],
)
def test_windows_builds_follow_containerd_check_windows_host_and_container_compat(
    host, image, expected
):
    """platform_windows_compat.go checkWindowsHostAndContainerCompat, via the node matcher."""
    node = normalize("windows", "amd64", "", f"10.0.{host}")
    entry = normalize("windows", "amd64", "", f"10.0.{image}.1000")
    assert (expected, expected) == (accepts(node, entry), accepts(node, entry, loose=True))


@pytest.mark.parametrize(
    ("node_version", "image_version", "expected"),
    [
        ("", "10.0.20348.1", True),  # windowsVersionMatcher.isEmpty: the host says nothing
        ("10.0", "10.0.20348.1", True),  # fewer than two dots: the zero version, empty
        ("10.0.26100", "", True),  # no os.version on the entry matches
        ("10.0.26100", "10.0.x.1", False),  # unparsable: the zero version, major 0 != 10
        ("10.0.26100", "6.3.26100", False),  # major and minor must be equal
        ("10.0.99999", "10.0.20348", True),  # build 99999 overflows uint16: empty host
    ],
)
def test_windows_versions_parse_as_containerd_get_windows_os_version(
    node_version, image_version, expected
):
    """platform_windows_compat.go getWindowsOSVersion and windowsVersionMatcher.Match."""
    node = normalize("windows", "amd64", "", node_version)
    assert expected == accepts(node, normalize("windows", "amd64", "", image_version))


# containers/image internal/pkg/platform/platform_matcher.go: WantedPlatforms for the node's
# GOARCH and getCPUVariant ("v8" on arm64, the arm level on arm), then MatchesPlatform.
CONTAINERS_IMAGE = [
    ("linux/arm64", ["linux/arm64", "linux/arm64/v8"],
     ["linux/arm/v7", "linux/arm/v8", "linux/arm64/v8.2", "linux/arm64/v9", "linux/amd64"]),
    ("linux/amd64", ["linux/amd64"],
     ["linux/386", "linux/amd64/v2", "linux/amd64/v3", "linux/arm64"]),
    ("linux/arm/v7", ["linux/arm", "linux/arm/v7", "linux/arm/v6", "linux/arm/v5"],
     ["linux/arm/v8", "linux/arm/v4", "linux/arm/vfoo", "linux/arm64"]),
    # "" is wanted too, and a variant-less arm entry is accepted on any arm CPU.
    ("linux/arm/v6", ["linux/arm/v6", "linux/arm/v5", "linux/arm"], ["linux/arm/v8"]),
    ("linux/s390x", ["linux/s390x"], ["linux/s390x/z15", "linux/amd64"]),
]  # fmt: skip


@pytest.mark.parametrize(("node", "image", "expected"), _cases(CONTAINERS_IMAGE))
def test_cri_o_matching_is_containers_image_wanted_platforms(node, image, expected):
    """platform_matcher.go WantedPlatforms and MatchesPlatform, as CRI-O pulls."""
    assert expected == accepts(parse(node), parse(image), rule=Rule.CONTAINERS_IMAGE)


def test_cri_o_matching_ignores_the_windows_build():
    """WantedPlatforms says it does not use Platform.OSVersion at all."""
    node = normalize("windows", "amd64", "", "10.0.17763")
    image = normalize("windows", "amd64", "", "10.0.20348.1")
    assert (False, True) == (accepts(node, image), accepts(node, image, rule=Rule.CONTAINERS_IMAGE))


def test_any_accepts_takes_the_rule_and_the_older_loose_flag():
    """`loose=True` still means Rule.LOOSE, for callers written before rules existed."""
    node, images = parse("linux/amd64"), [parse("linux/386")]
    assert (False, True, True) == (
        any_accepts(node, images),
        any_accepts(node, images, rule=Rule.LOOSE),
        any_accepts(node, images, loose=True),
    )


@pytest.mark.parametrize("rule", list(Rule))
@pytest.mark.parametrize("image", ["linux/arm/v5", "linux/arm/v6", "linux/arm/v7", "linux/arm/v8"])
def test_an_arm64_node_runs_a_32_bit_arm_entry_only_if_its_cpus_run_aarch32(rule, image):
    """Pulling is not running: without `aarch32` no rule lets arm64 take a 32-bit Arm entry."""
    node, entries = parse("linux/arm64"), frozenset({parse(image)})
    pulls = rule is Rule.LOOSE
    assert (False, False, pulls, pulls) == (
        accepts(node, parse(image), rule=rule),
        any_accepts(node, entries, rule=rule),
        accepts(node, parse(image), rule=rule, aarch32=True),
        any_accepts(node, entries, rule=rule, aarch32=True),
    )


def test_a_large_set_is_judged_through_its_index_exactly_as_entry_by_entry():
    """Index lookups and a scan of every entry agree for every node and rule (Windows too)."""

    entries = [normalize("linux", f"fake{i}") for i in range(40)] + [
        normalize("linux", "arm", "v6"),
        normalize("linux", "amd64", "v2"),
        normalize("windows", "amd64", "", "10.0.17763.1"),
    ]
    images = frozenset(entries)
    nodes = [
        normalize("linux", "arm", "v7"),
        normalize("linux", "arm64"),
        normalize("linux", "amd64", "v3"),
        normalize("linux", "amd64"),
        normalize("windows", "amd64", "", "10.0.17763.5"),
        normalize("windows", "amd64", "", "10.0.20348.1"),
    ]
    judged = [
        (
            any_accepts(n, images, rule=r, aarch32=a),
            any(accepts(n, e, rule=r, aarch32=a) for e in entries),
        )
        for n in nodes
        for r in Rule
        for a in (False, True)
    ]
    assert [(scan, scan) for _, scan in judged] == judged
