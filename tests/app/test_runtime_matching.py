"""`policy.matching: auto` through the real app: each node judged by the runtime it reports."""

from tests.app.conftest import post, settings
from tests.objects import args_full, args_names, node, pod
from tests.support.static_nodes import StaticNodes

# Four arm64 nodes that differ only in status.nodeInfo.containerRuntimeVersion.
OLD = node("arm-containerd-2-0", "arm64", runtime="containerd://2.0.5")
NEW = node("arm-containerd-2-2", "arm64", runtime="containerd://2.2.0")
CRIO = node("arm-cri-o", "arm64", runtime="cri-o://1.31.2")
ODD = node("arm-unknown", "arm64", runtime="rkt://1.30.0")
MIXED = (OLD, NEW, CRIO, ODD)
NAMES = [n["metadata"]["name"] for n in MIXED]
#: containerd 2.0 pulls with Only(), which falls back from arm64 to arm/v8..v5; containerd
#: 2.2 (OnlyStrict), CRI-O (containers/image: arm64 wants v8 only) and unknown runtimes don't.
EXPECTED = (["arm-containerd-2-0"], {})  # a node passed: the others need no reasons


async def test_full_nodes_mix_containerd_2_0_and_2_2_and_only_2_0_runs_an_arm_v7_image(
    make_client,
):
    """nodeCacheCapable: false: the runtime comes from each Node object in the request."""
    client = await make_client()
    body = await post(client, "filter", args_full(pod("acme/v7:1"), *MIXED))
    kept = [n["metadata"]["name"] for n in body["Nodes"]["items"]]
    assert EXPECTED == (kept, body["FailedAndUnresolvableNodes"])


async def test_node_names_mix_containerd_2_0_and_2_2_and_only_2_0_runs_an_arm_v7_image(
    make_client,
):
    """nodeCacheCapable: true: the runtime comes from the node index."""
    client = await make_client(nodes=StaticNodes(*MIXED))
    body = await post(client, "filter", args_names(pod("acme/v7:1"), *NAMES))
    assert EXPECTED == (body["NodeNames"], body["FailedAndUnresolvableNodes"])


async def test_strict_matching_overrides_the_runtimes_of_a_mixed_fleet(make_client):
    """`matching: strict` judges the containerd 2.0 node strictly too."""
    client = await make_client(settings(policy={"matching": "strict"}), nodes=StaticNodes(*MIXED))
    body = await post(client, "filter", args_names(pod("acme/v7:1"), *NAMES))
    assert ([], sorted(NAMES)) == (body["NodeNames"], sorted(body["FailedAndUnresolvableNodes"]))


async def test_loose_matching_overrides_the_runtimes_of_a_mixed_fleet(make_client):
    """`matching: loose` gives every node containerd's Only() fallbacks."""
    client = await make_client(settings(policy={"matching": "loose"}), nodes=StaticNodes(*MIXED))
    body = await post(client, "filter", args_names(pod("acme/v7:1"), *NAMES))
    assert (NAMES, {}) == (body["NodeNames"], body["FailedAndUnresolvableNodes"])


async def test_prioritize_prefers_arm64_only_on_nodes_whose_runtime_runs_the_pod(make_client):
    """amd64 + arm/v7 image: the containerd 2.0 arm64 node makes it multi-arch and scores 10."""
    amd = node("amd-1", "amd64")
    client = await make_client(nodes=StaticNodes(OLD, NEW, amd))
    body = await post(client, "prioritize", args_names(pod("acme/amd-v7:1"), *NAMES[:2], "amd-1"))
    expected = [("arm-containerd-2-0", 10)]  # zeros are left out: they add nothing
    assert expected == [(entry["Host"], entry["Score"]) for entry in body]
