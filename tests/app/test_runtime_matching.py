"""`policy.matching: auto` through the real app: each node judged by the runtime it reports."""

from tests.app.conftest import post, settings
from tests.objects import args_full, args_names, node, pod
from tests.support.fakes import StaticNodes

# arm64 nodes that differ only in status.nodeInfo.containerRuntimeVersion, and one labelled
# archfit.io/aarch32 by the operator (its CPUs run 32-bit Arm code).
OLD = node("arm-containerd-2-0", "arm64", runtime="containerd://2.0.5")
NEW = node("arm-containerd-2-2", "arm64", runtime="containerd://2.2.0")
CRIO = node("arm-cri-o", "arm64", runtime="cri-o://1.31.2")
ODD = node("arm-unknown", "arm64", runtime="rkt://1.30.0")
AARCH32 = node("arm-containerd-2-0-aarch32", "arm64", runtime="containerd://2.0.5")
AARCH32["metadata"]["labels"]["archfit.io/aarch32"] = "true"
MIXED = (OLD, NEW, CRIO, ODD, AARCH32)
NAMES = [n["metadata"]["name"] for n in MIXED]
#: containerd 2.0 pulls with Only(), which falls back from arm64 to arm/v8..v5; containerd
#: 2.2 (OnlyStrict), CRI-O (containers/image: arm64 wants v8 only) and unknown runtimes don't.
#: Pulling is not running: by default only the node labelled as running AArch32 takes it.
EXPECTED = (["arm-containerd-2-0-aarch32"], {})  # a node passed: the others need no reasons


async def test_full_nodes_mixed_only_the_labelled_containerd_2_0_node_runs_an_arm_v7_image(
    make_client,
):
    """nodeCacheCapable: false: the runtime and the label come from each Node in the request."""
    client = await make_client()
    body = await post(client, "filter", args_full(pod("acme/v7:1"), *MIXED))
    kept = [n["metadata"]["name"] for n in body["Nodes"]["items"]]
    assert EXPECTED == (kept, body["FailedAndUnresolvableNodes"])


async def test_node_names_mixed_only_the_labelled_containerd_2_0_node_runs_an_arm_v7_image(
    make_client,
):
    """nodeCacheCapable: true: the runtime and the label come from the node index."""
    client = await make_client(nodes=StaticNodes(*MIXED))
    body = await post(client, "filter", args_names(pod("acme/v7:1"), *NAMES))
    assert EXPECTED == (body["NodeNames"], body["FailedAndUnresolvableNodes"])


async def test_with_pull_rule_every_containerd_2_0_arm64_node_runs_an_arm_v7_image(make_client):
    """`arm32OnArm64: pull-rule`: the runtime's pull rule alone decides, as containerd does."""
    config = settings(policy={"arm32OnArm64": "pull-rule"})
    client = await make_client(config, nodes=StaticNodes(*MIXED))
    body = await post(client, "filter", args_names(pod("acme/v7:1"), *NAMES))
    assert ["arm-containerd-2-0", "arm-containerd-2-0-aarch32"] == body["NodeNames"]


async def test_strict_matching_overrides_the_runtimes_of_a_mixed_fleet(make_client):
    """`matching: strict` judges the containerd 2.0 node strictly too."""
    client = await make_client(settings(policy={"matching": "strict"}), nodes=StaticNodes(*MIXED))
    body = await post(client, "filter", args_names(pod("acme/v7:1"), *NAMES))
    assert ([], sorted(NAMES)) == (body["NodeNames"], sorted(body["FailedAndUnresolvableNodes"]))


async def test_loose_matching_overrides_the_runtimes_of_a_mixed_fleet(make_client):
    """`matching: loose` with `pull-rule` gives every node containerd's Only() fallbacks."""
    policy = {"matching": "loose", "arm32OnArm64": "pull-rule"}
    client = await make_client(settings(policy=policy), nodes=StaticNodes(*MIXED))
    body = await post(client, "filter", args_names(pod("acme/v7:1"), *NAMES))
    assert (NAMES, {}) == (body["NodeNames"], body["FailedAndUnresolvableNodes"])


async def test_an_amd64_and_arm_v7_image_is_kept_off_unlabelled_arm64_and_gets_no_scores(
    make_client,
):
    """The issue's case: amd64 + arm/v7 passes amd64 and the labelled node, and prioritize
    prefers neither architecture (a 32-bit build is no reason to prefer arm64)."""
    amd = node("amd-1", "amd64")
    client = await make_client(nodes=StaticNodes(OLD, NEW, AARCH32, amd))
    names = [*NAMES[:2], NAMES[-1], "amd-1"]
    passed = await post(client, "filter", args_names(pod("acme/amd-v7:1"), *names))
    scores = await post(client, "prioritize", args_names(pod("acme/amd-v7:1"), *names))
    assert (["arm-containerd-2-0-aarch32", "amd-1"], []) == (passed["NodeNames"], scores)
