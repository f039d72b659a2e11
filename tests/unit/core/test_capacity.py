"""The capacity view (extender.core.capacity): what a Karpenter NodePool's requirements let it
launch, read as Karpenter reads them, and when a decided pod's platforms meet none of the
cluster's capacity."""

from __future__ import annotations

from typing import Any

import pytest

from extender.core.capacity import Capacity, NodePoolOffer, node_pool_offer, shortfall
from extender.core.platforms import Platform, Resolved, Rule, Unknown, parse

API = "docker.io/acme/api:1.2"
SIDECAR = "docker.io/acme/proxy:3"
AMD64 = parse("linux/amd64")
ARM64 = parse("linux/arm64")


def platforms(*texts: str) -> frozenset[Platform]:
    return frozenset(parse(text) for text in texts)


def arch(operator: str, *values: str) -> dict[str, Any]:
    return {"key": "kubernetes.io/arch", "operator": operator, "values": list(values)}


def os_(operator: str, *values: str) -> dict[str, Any]:
    return {"key": "kubernetes.io/os", "operator": operator, "values": list(values)}


@pytest.mark.parametrize(
    ("requirements", "labels", "expected"),
    [
        ([arch("In", "arm64"), os_("In", "linux")], {}, {"linux/arm64"}),
        ([arch("In", "amd64", "arm64"), os_("In", "linux")], {}, {"linux/amd64", "linux/arm64"}),
        # Left open: Karpenter's well-known architectures and operating systems.
        ([], {}, {"linux/amd64", "linux/arm64", "windows/amd64", "windows/arm64"}),
        ([os_("In", "linux")], {}, {"linux/amd64", "linux/arm64"}),
        ([arch("NotIn", "arm64"), os_("In", "linux")], {}, {"linux/amd64"}),
        ([arch("Exists"), os_("NotIn", "windows")], {}, {"linux/amd64", "linux/arm64"}),
        ([arch("DoesNotExist")], {}, set()),
        ([{"key": "kubernetes.io/arch", "operator": "Gt", "values": ["1"]}], {}, set()),
        # Requirements on one key are ANDed: In [amd64, arm64] and NotIn [amd64].
        (
            [arch("In", "amd64", "arm64"), arch("NotIn", "amd64"), os_("In", "linux")],
            {},
            {"linux/arm64"},
        ),
        ([arch("In", "amd64"), arch("In", "arm64")], {}, set()),
        # A value beyond the well-known ones, named with In, is offered as named.
        ([arch("In", "s390x"), os_("In", "linux")], {}, {"linux/s390x"}),
        # The beta labels are the stable ones to Karpenter (NormalizedLabels).
        (
            [
                {"key": "beta.kubernetes.io/arch", "operator": "In", "values": ["arm64"]},
                os_("In", "linux"),
            ],
            {},
            {"linux/arm64"},
        ),
        # A template label is an In requirement of its own.
        ([os_("In", "linux")], {"kubernetes.io/arch": "arm64"}, {"linux/arm64"}),
        # Other keys do not narrow the platforms.
        (
            [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
                arch("In", "arm64"),
                os_("In", "linux"),
            ],
            {"team": "a"},
            {"linux/arm64"},
        ),
    ],
)
def test_a_node_pool_offers_what_its_requirements_let_karpenter_launch(
    requirements: list[dict[str, Any]], labels: dict[str, str], expected: set[str]
):
    """In, NotIn, Exists, DoesNotExist and Gt on kubernetes.io/arch and kubernetes.io/os,
    ANDed per key as Karpenter's requirements intersect, with its well-known values for a key
    left open."""
    offer = node_pool_offer("pool", requirements, labels)
    assert expected == {str(p) for p in offer.platforms}


GRAVITON = NodePoolOffer("graviton", platforms("linux/arm64"))
GENERAL = NodePoolOffer("general", platforms("linux/amd64"))


def decided(arches: list[str] | None = None, selector: dict[str, str] | None = None) -> dict:
    """A pod spec as the webhook leaves it: `kubernetes.io/arch In arches` required."""
    spec: dict[str, Any] = {"nodeSelector": selector}
    if arches is not None:
        term = {"matchExpressions": [arch("In", *arches)]}
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
            }
        }
    return spec


def test_an_amd64_only_image_in_a_cluster_of_arm64_node_pools_is_told_in_the_extenders_words():
    """The issue's own case: the webhook wrote arch In [amd64], the only NodePool is arm64."""
    found = shortfall(
        decided(["amd64"]),
        [API],
        {API: platforms("linux/amd64")},
        Capacity(frozenset(), (GRAVITON,)),
    )
    assert found is not None
    assert (
        (AMD64,),
        (API,),
        "no node or NodePool offers linux/amd64 for docker.io/acme/api:1.2; NodePools: "
        "graviton (arm64)",
    ) == (found.needs, found.images, found.message)


@pytest.mark.parametrize(
    "capacity",
    [
        Capacity(platforms("linux/amd64")),
        Capacity(frozenset(), (GRAVITON, GENERAL)),
        Capacity(frozenset(), (GRAVITON,), platforms("linux/amd64")),
        Capacity(frozenset(), (NodePoolOffer("open", node_pool_offer("open", [], {}).platforms),)),
    ],
    ids=["a node", "a NodePool", "declared", "a NodePool left open"],
)
def test_a_pod_whose_platform_some_capacity_offers_has_no_shortfall(capacity: Capacity):
    """A node, a NodePool or a declared platform that runs every image and the pod admits."""
    assert None is shortfall(decided(["amd64"]), [API], {API: platforms("linux/amd64")}, capacity)


def test_an_image_not_known_yet_is_never_called_short_of_capacity():
    """Unknown platforms: nothing is said (never guess)."""
    resolved: dict[str, Resolved] = {API: Unknown("registry down")}
    assert None is shortfall(decided(), [API], resolved, Capacity(frozenset(), (GRAVITON,)))


def test_a_pod_that_runs_nowhere_whatever_the_capacity_is_not_a_capacity_matter():
    """Its own constraint (arm64) and its image (amd64 only) share no platform: the webhook's
    conflict warning says so, not the capacity check."""
    found = shortfall(
        decided(["arm64"]), [API], {API: platforms("linux/amd64")}, Capacity(frozenset(), ())
    )
    assert None is found


def test_a_pin_the_images_do_not_need_is_named_when_it_excludes_every_capacity():
    """A multi-arch pod pinned to amd64 (an arm64 share's choice, say) where only arm64 is
    offered: no image lacks capacity, the pod's own constraints do."""
    resolved: dict[str, Resolved] = {API: platforms("linux/amd64", "linux/arm64")}
    found = shortfall(decided(["amd64"]), [API], resolved, Capacity(platforms("linux/arm64")))
    assert found is not None
    assert (
        (),
        "no node or NodePool offers linux/amd64 for this pod's nodeSelector and node "
        "affinity; nodes: arm64",
    ) == (found.images, found.message)


def test_only_the_images_that_lack_every_capacity_are_named():
    """A multi-arch sidecar is not why an amd64-only image waits."""
    resolved: dict[str, Resolved] = {
        API: platforms("linux/amd64"),
        SIDECAR: platforms("linux/amd64", "linux/arm64"),
    }
    capacity = Capacity(platforms("linux/arm64"), (GRAVITON,), platforms("linux/arm64"))
    found = shortfall(decided(), [API, SIDECAR], resolved, capacity)
    assert found is not None
    assert (API,) == found.images
    assert found.message.endswith(
        "; nodes: arm64; NodePools: graviton (arm64); declared (capacity.declared): arm64"
    )


def test_an_empty_cluster_says_it_has_nothing():
    """No node, NodePool or declaration: the message says so instead of listing nothing."""
    found = shortfall(decided(), [API], {API: platforms("linux/amd64")}, Capacity(frozenset()))
    assert found is not None
    assert found.message.endswith("the cluster has no node, no NodePool and nothing declared")


def test_a_32_bit_arm_image_meets_arm64_capacity_only_under_the_pull_rule():
    """arm/v7 on arm64 counts only where the webhook's matching says so (policy.arm32OnArm64)."""
    resolved: dict[str, Resolved] = {API: platforms("linux/arm/v7")}
    capacity = Capacity(frozenset(), (GRAVITON,))
    assert shortfall(decided(), [API], resolved, capacity, rule=Rule.LOOSE) is not None
    assert None is shortfall(decided(), [API], resolved, capacity, rule=Rule.LOOSE, aarch32=True)
