"""Filter and score decisions over resolved image platforms (pure table tests)."""

import pytest

from extender.core.node_facts import UNKNOWN_NODE
from extender.core.placement import UNKNOWN_GROUP, Candidates, NodeGroups, Policy, mismatch_reason
from extender.core.placement import decide_filter as decide_filter_on_names
from extender.core.placement import decide_scores as decide_scores_on_names
from extender.core.platforms import Rule, Unknown, parse


def Candidate(name, platform, rule=Rule.STRICT, aarch32=False):
    return name, (platform, rule, aarch32)


def candidates(nodes):
    return Candidates.of([n for n, _ in nodes], [f for _, f in nodes])


def decide_filter(images, resolved, nodes, policy):
    """decide_filter over (name, facts) rows."""
    return decide_filter_on_names(images, resolved, candidates(nodes), policy)


def decide_scores(images, resolved, nodes, policy, prefer=()):
    return decide_scores_on_names(images, resolved, candidates(nodes), policy, prefer)


def doubted(decision):
    return [n for v, nodes in decision.groups if v.outcome == "doubt" for n in nodes]


def plats(*texts):
    return frozenset(parse(t) for t in texts)


MULTI = plats("linux/amd64", "linux/arm64")
AMD = plats("linux/amd64")
ARM = plats("linux/arm64")
ARMV7 = plats("linux/arm/v7")

NODES = [
    Candidate("amd-1", parse("linux/amd64")),
    Candidate("amd-2", parse("linux/amd64")),
    Candidate("arm-1", parse("linux/arm64")),
    Candidate("arm-2", parse("linux/arm64")),
]


@pytest.mark.parametrize(
    ("resolved", "passed", "rejected"),
    [
        ({"a": MULTI}, ["amd-1", "amd-2", "arm-1", "arm-2"], []),
        ({"a": AMD}, ["amd-1", "amd-2"], ["arm-1", "arm-2"]),
        ({"a": ARM}, ["arm-1", "arm-2"], ["amd-1", "amd-2"]),
        ({"a": ARMV7}, [], ["amd-1", "amd-2", "arm-1", "arm-2"]),
        ({"a": frozenset()}, [], ["amd-1", "amd-2", "arm-1", "arm-2"]),
        ({"a": MULTI, "b": AMD}, ["amd-1", "amd-2"], ["arm-1", "arm-2"]),
    ],
)
def test_a_node_passes_only_if_every_image_has_a_matching_entry(resolved, passed, rejected):
    """Mismatched nodes are rejected; matching nodes pass."""
    decision = decide_filter(list(resolved), resolved, NODES, Policy())
    assert (passed, rejected) == (decision.passed, list(decision.unresolvable))


def test_arm64_node_is_rejected_when_an_init_container_is_amd64_only():
    """The init container's image restricts the pod like any other."""
    resolved = {"migrate:1": AMD, "app:1": MULTI}
    decision = decide_filter(["migrate:1", "app:1"], resolved, NODES, Policy())
    assert {
        "arm-1": mismatch_reason("migrate:1", parse("linux/arm64")),
        "arm-2": mismatch_reason("migrate:1", parse("linux/arm64")),
    } == decision.unresolvable


def test_the_reason_is_the_same_for_every_node_of_a_platform_and_omits_the_node_name():
    """kube-scheduler groups identical reasons into one event clause."""
    decision = decide_filter(
        ["docker.io/acme/api:1.2"], {"docker.io/acme/api:1.2": AMD}, NODES, Policy()
    )
    reasons = set(decision.unresolvable.values())
    assert {"node(s) didn't match image platform: docker.io/acme/api:1.2 has no linux/arm64"} == (
        reasons
    )
    assert not any(node in reason for node, reason in decision.unresolvable.items())


def test_a_huge_image_name_is_cut_in_the_reason():
    """Event messages are cut at 1024 bytes, so reasons stay short."""
    image = "registry.example.com/" + "a" * 2000 + ":1"
    decision = decide_filter([image], {image: AMD}, NODES, Policy())
    assert all(len(reason) < 250 for reason in decision.unresolvable.values())


def test_unknown_images_pass_every_node_under_fail_open():
    """Fail-open: archfit's ignorance never rejects a node."""
    resolved = {"a": Unknown("registry timeout")}
    decision = decide_filter(["a"], resolved, NODES, Policy("fail-open"))
    assert ([n for n, _ in NODES], {}, {}) == (
        decision.passed,
        decision.failed,
        decision.unresolvable,
    )
    assert 4 == decision.doubted


def test_unknown_images_fail_every_node_under_fail_closed_in_failed_nodes():
    """Fail-closed: FailedNodes (may pass later), never FailedAndUnresolvableNodes."""
    resolved = {"a": Unknown("registry timeout")}
    policy = Policy("fail-closed")
    decision = decide_filter(["a"], resolved, NODES, policy)
    expected = (
        "node(s) couldn't verify image platform: platforms of a are unknown: registry timeout"
    )
    assert ([], {n: expected for n, _ in NODES}, {}) == (
        decision.passed,
        decision.failed,
        decision.unresolvable,
    )


def test_a_known_mismatch_outranks_an_unknown_image():
    """One image that surely cannot run is enough to reject, whatever else is unknown."""
    resolved = {"a": Unknown("timeout"), "b": AMD}
    decision = decide_filter(["a", "b"], resolved, NODES, Policy("fail-closed"))
    assert (["arm-1", "arm-2"], ["amd-1", "amd-2"]) == (
        list(decision.unresolvable),
        doubted(decision),
    )


def test_a_node_without_architecture_follows_the_failure_policy():
    """A node that names no architecture cannot be judged either way."""
    nodes = [Candidate("mystery", None)]
    open_ = decide_filter(["a"], {"a": AMD}, nodes, Policy("fail-open"))
    closed = decide_filter(["a"], {"a": AMD}, nodes, Policy("fail-closed"))
    assert (["mystery"], []) == (open_.passed, closed.passed)
    assert ["mystery"] == list(closed.failed)


def test_loose_matching_lets_arm64_nodes_run_arm_v7_images_where_their_cpus_do():
    """`matching: loose` gives every node containerd's Only() fallbacks, 32-bit Arm included
    where the operator says the CPUs run it."""
    policy = Policy(matching="loose", arm32_on_arm64="pull-rule")
    decision = decide_filter(["a"], {"a": ARMV7}, NODES, policy)
    assert ["arm-1", "arm-2"] == decision.passed


MIXED = [
    Candidate("arm-2.0", parse("linux/arm64"), Rule.LOOSE),
    Candidate("arm-2.0-aarch32", parse("linux/arm64"), Rule.LOOSE, aarch32=True),
    Candidate("arm-2.2", parse("linux/arm64"), Rule.STRICT),
    Candidate("arm-crio", parse("linux/arm64"), Rule.CONTAINERS_IMAGE),
    Candidate("armv7-2.2", parse("linux/arm/v7"), Rule.STRICT),
    Candidate("armv7-crio", parse("linux/arm/v7"), Rule.CONTAINERS_IMAGE),
]


@pytest.mark.parametrize(
    ("matching", "image", "passed"),
    [
        ("auto", "linux/arm/v7", ["arm-2.0-aarch32", "armv7-2.2", "armv7-crio"]),
        ("auto", "linux/arm/v6", ["arm-2.0-aarch32", "armv7-crio"]),
        ("strict", "linux/arm/v7", ["armv7-2.2", "armv7-crio"]),
        ("loose", "linux/arm/v6", ["arm-2.0-aarch32", "armv7-2.2", "armv7-crio"]),
    ],
)
def test_auto_matching_judges_each_node_by_its_runtimes_rule(matching, image, passed):
    """`auto` takes each node's runtime rule; `strict` and `loose` override it for all."""
    decision = decide_filter(["a"], {"a": plats(image)}, MIXED, Policy(matching=matching))
    assert passed == decision.passed


def test_each_platform_and_rule_pair_is_judged_once_per_request():
    """A thousand nodes of one platform and two runtimes cost two judgements, not a thousand.

    Each judgement reads the image's set at most once (frozensets are read once, ever).
    """
    nodes = [Candidate(f"n{i}", parse("linux/arm64"), (Rule.LOOSE, Rule.STRICT)[i % 2], True)
             for i in range(1000)]  # fmt: skip
    calls = []

    class Counting(frozenset):
        def __iter__(self):
            calls.append(1)
            return super().__iter__()

    decision = decide_filter(["a"], {"a": Counting(ARMV7)}, nodes, Policy())
    assert (True, 500, 500) == (len(calls) <= 2, len(decision.passed), decision.rejected)


def test_a_rejection_names_the_rule_the_node_was_judged_by():
    """The nodes_rejected log line says which runtime rule refused the image."""
    decision = decide_filter(["a"], {"a": ARMV7}, MIXED[1:3], Policy())
    assert [(Rule.STRICT, ["arm-2.2"])] == [(v.rule, nodes) for v, nodes in decision.groups]


@pytest.mark.parametrize(
    ("resolved", "prefer", "expected", "multi"),
    [
        ({"a": MULTI}, (), {"arm-1": 10, "arm-2": 10}, True),
        ({"a": MULTI}, ("amd64",), {"amd-1": 10, "amd-2": 10}, True),
        (
            {"a": MULTI},
            ("amd64", "arm64"),
            {"amd-1": 10, "amd-2": 10, "arm-1": 5, "arm-2": 5},
            True,
        ),
        ({"a": AMD}, (), {}, False),
        ({"a": MULTI, "b": AMD}, (), {}, False),
        ({"a": Unknown("x")}, (), {}, False),
    ],
)
def test_only_pods_that_run_on_two_candidate_architectures_get_a_preference(
    resolved, prefer, expected, multi
):
    """Multi-arch pods favour the preferred architecture; everyone else gets no scores.

    Hosts scored 0 are left out: kube-scheduler counts a host missing from the list as 0.
    """
    decision = decide_scores(list(resolved), resolved, NODES, Policy(), prefer)
    assert (expected, multi) == (decision.scores, decision.multi_arch)


def test_a_multi_arch_image_is_not_multi_arch_among_single_arch_candidates():
    """With only arm64 candidates there is nothing to prefer between."""
    arm_only = [c for c in NODES if c[0].startswith("arm")]
    decision = decide_scores(["a"], {"a": MULTI}, arm_only, Policy())
    assert ({}, False) == (decision.scores, decision.multi_arch)


def test_configured_preference_applies_to_every_candidate_architecture():
    """An operator can prefer amd64 through the policy instead."""
    decision = decide_scores(["a"], {"a": MULTI}, NODES, Policy(arch_preference={"amd64": 7}))
    assert {"amd-1": 7, "amd-2": 7} == decision.scores


AMD_V7 = plats("linux/amd64", "linux/arm/v7")
LOOSE_ARM64 = [
    Candidate("amd", parse("linux/amd64"), Rule.LOOSE),
    Candidate("arm-1.7", parse("linux/arm64"), Rule.LOOSE),
    Candidate("arm-1.7-aarch32", parse("linux/arm64"), Rule.LOOSE, aarch32=True),
    Candidate("arm-2.2-aarch32", parse("linux/arm64"), Rule.STRICT, aarch32=True),
]


@pytest.mark.parametrize(
    ("setting", "matching", "passed"),
    [
        ("labelled", "auto", ["amd", "arm-1.7-aarch32"]),
        ("labelled", "loose", ["amd", "arm-1.7-aarch32", "arm-2.2-aarch32"]),
        ("labelled", "strict", ["amd"]),
        ("pull-rule", "auto", ["amd", "arm-1.7", "arm-1.7-aarch32"]),
        ("pull-rule", "strict", ["amd"]),
    ],
)
def test_a_32_bit_arm_build_lets_a_pod_onto_arm64_only_where_the_cpus_run_it(
    setting, matching, passed
):
    """By default only nodes labelled archfit.io/aarch32 run an arm/v7 build their runtime pulls."""
    policy = Policy(matching=matching, arm32_on_arm64=setting)
    decision = decide_filter(["a"], {"a": AMD_V7}, LOOSE_ARM64, policy)
    rejected = [name for name, _ in LOOSE_ARM64 if name not in passed]
    assert (passed, rejected) == (decision.passed, list(decision.unresolvable))


@pytest.mark.parametrize("setting", ["labelled", "pull-rule"])
def test_a_32_bit_arm_build_is_never_a_reason_to_prefer_arm64(setting):
    """amd64 + arm/v7 runs natively on amd64 alone: no architecture preference, no scores."""
    policy = Policy(arm32_on_arm64=setting)
    decision = decide_scores(["a"], {"a": AMD_V7}, LOOSE_ARM64, policy)
    assert ({}, False, ("amd64",)) == (
        decision.scores,
        decision.multi_arch,
        decision.architectures,
    )


def test_names_in_any_order_are_grouped_by_the_node_index_snapshot():
    """NodeGroups numbers each facts object once; a list in any order gets its groups."""
    amd, arm = (
        (parse("linux/amd64"), Rule.STRICT, False),
        (parse("linux/arm64"), Rule.STRICT, False),
    )
    groups = NodeGroups({"a1": amd, "r1": arm, "a2": amd})
    found = Candidates.among(["r1", "a2", "a1"], groups)
    assert ([2, 1, 1], {1: amd, 2: arm}, ["a2", "a1"]) == (
        list(found.keys),
        found.distinct,
        found.names_in([1]),
    )


def test_a_name_the_node_index_does_not_know_is_an_unknown_node():
    """Names missing from the snapshot fall in one group whose facts are UNKNOWN_NODE."""
    amd = (parse("linux/amd64"), Rule.STRICT, False)
    found = Candidates.among(["gone", "a1"], NodeGroups({"a1": amd}))
    assert ([UNKNOWN_GROUP, 1], {UNKNOWN_GROUP: UNKNOWN_NODE, 1: amd}) == (
        list(found.keys),
        found.distinct,
    )
