"""The admission webhook's decision: which constraints, tolerations and warnings a new pod gets.

Every patch is applied with jsonpatch (RFC 6902), as kube-apiserver applies it, so the
tests check the pod that results, not only the operations.
"""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

import jsonpatch
import pytest

from extender.core.mutation import (
    MutationRules,
    TaintRule,
    decide_mutation,
    fits_of,
)
from extender.core.platforms import Platform, Resolved, Rule, Unknown, parse
from extender.core.pods import PLATFORMS_ANNOTATION, ShapeError, read_pod
from tests.objects import pod
from tests.support import affinity

AMD = frozenset({parse("linux/amd64")})
ARM = frozenset({parse("linux/arm64")})
MULTI = AMD | ARM
CLUSTER = frozenset({parse("linux/amd64"), parse("linux/arm64")})
GKE_TAINT = TaintRule("arm64", "kubernetes.io/arch", "arm64", "NoSchedule")
ARCH_IN_AMD = {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}
ARCH_IN_ARM = {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}
AMD_ONLY: dict[str, Resolved] = {"acme/amd:1": AMD}


def rules(**overrides: Any) -> MutationRules:
    base: dict[str, Any] = {"platforms": CLUSTER, "arch_preference": {"arm64": 10, "amd64": 0}}
    base.update(overrides)
    return MutationRules(**base)


def admit(
    obj: dict[str, Any], resolved: dict[str, Resolved], how: MutationRules | None = None
) -> tuple[dict[str, Any], Any]:
    """Decide for the pod and return (the pod after the patch, the decision)."""
    mutation = decide_mutation(read_pod(obj), tuple(resolved), resolved, how or rules())
    patched = jsonpatch.apply_patch(copy.deepcopy(obj), mutation.operations(dry_run=False))
    return patched, mutation


def node_affinity(obj: dict[str, Any]) -> dict[str, Any]:
    return dict(obj["spec"].get("affinity", {}).get("nodeAffinity", {}))


def required_terms(obj: dict[str, Any]) -> list[dict[str, Any]]:
    required = node_affinity(obj).get("requiredDuringSchedulingIgnoredDuringExecution", {})
    return list(required.get("nodeSelectorTerms", []))


def with_terms(obj: dict[str, Any], *terms: dict[str, Any]) -> dict[str, Any]:
    obj["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
        }
    }
    return obj


def test_an_amd64_only_pod_gets_one_required_term_with_arch_in_amd64() -> None:
    """No affinity yet: one term is created, holding only the arch expression."""
    patched, mutation = admit(pod("acme/amd:1"), {"acme/amd:1": AMD})
    assert [{"matchExpressions": [ARCH_IN_AMD]}] == required_terms(patched)
    assert "mutated" == mutation.outcome
    assert ["required_affinity"] == mutation.changes
    assert "linux/amd64" == patched["metadata"]["annotations"][PLATFORMS_ANNOTATION]


def test_a_multi_arch_pod_gets_no_requirement_and_a_weighted_arm64_preference() -> None:
    """archPreference arm64: 10 becomes a preferred term of weight 100."""
    patched, mutation = admit(pod("acme/multi:1"), {"acme/multi:1": MULTI})
    assert [] == required_terms(patched)
    preferred = node_affinity(patched)["preferredDuringSchedulingIgnoredDuringExecution"]
    assert [{"weight": 100, "preference": {"matchExpressions": [ARCH_IN_ARM]}}] == preferred
    assert ["preferred_affinity"] == mutation.changes
    assert "linux/amd64,linux/arm64" == patched["metadata"]["annotations"][PLATFORMS_ANNOTATION]


def test_the_prefer_arch_annotation_overrides_the_configured_preference() -> None:
    """archfit.io/prefer-arch: amd64 makes amd64 the preferred term."""
    obj = pod("acme/multi:1", annotations={"archfit.io/prefer-arch": "amd64"})
    patched, _ = admit(obj, {"acme/multi:1": MULTI})
    preferred = node_affinity(patched)["preferredDuringSchedulingIgnoredDuringExecution"]
    assert [{"weight": 100, "preference": {"matchExpressions": [ARCH_IN_AMD]}}] == preferred


def test_a_pods_own_architecture_preference_is_kept_as_it_is() -> None:
    """A preferred term on kubernetes.io/arch written by the team wins over archfit's."""
    obj = pod("acme/multi:1")
    own = {"weight": 5, "preference": {"matchExpressions": [ARCH_IN_AMD]}}
    obj["spec"]["affinity"] = {
        "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [own]}
    }
    patched, mutation = admit(obj, {"acme/multi:1": MULTI})
    assert [own] == node_affinity(patched)["preferredDuringSchedulingIgnoredDuringExecution"]
    assert [] == mutation.changes


def test_the_arch_expression_joins_a_zone_only_term_and_keeps_the_zone() -> None:
    """Expressions in one term are ANDed: adding arch narrows the term, never loosens it."""
    zone = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["eu-west-1a"]}
    obj = with_terms(pod("acme/arm:1"), {"matchExpressions": [zone]})
    patched, _ = admit(obj, {"acme/arm:1": ARM})
    assert [{"matchExpressions": [zone, ARCH_IN_ARM]}] == required_terms(patched)


def test_every_existing_term_gets_the_arch_expression() -> None:
    """Terms are ORed, so a constraint left out of one term would not constrain at all."""
    zone_a = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}
    fields = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
    obj = with_terms(pod("acme/amd:1"), {"matchExpressions": [zone_a]}, fields)
    patched, _ = admit(obj, {"acme/amd:1": AMD})
    assert [
        {"matchExpressions": [zone_a, ARCH_IN_AMD]},
        {**fields, "matchExpressions": [ARCH_IN_AMD]},
    ] == required_terms(patched)


def test_a_pod_that_requires_arm64_with_an_amd64_only_image_is_left_alone_with_a_warning() -> None:
    """Adding a constraint could only make it unschedulable; kubectl prints the warning."""
    obj = pod("acme/amd:1")
    obj["spec"]["nodeSelector"] = {"kubernetes.io/arch": "arm64"}
    patched, mutation = admit(obj, {"acme/amd:1": AMD})
    assert ["archfit: image acme/amd:1 has no linux/arm64, but this pod requires arm64"] == (
        mutation.warnings
    )
    assert "conflict" == mutation.outcome
    assert [] == mutation.patch
    assert obj["spec"] == patched["spec"]


def test_a_pod_whose_every_term_excludes_the_images_platforms_gets_a_warning() -> None:
    """NotIn [amd64] in the only term excludes the only platform the image has."""
    not_amd = {"key": "kubernetes.io/arch", "operator": "NotIn", "values": ["amd64"]}
    obj = with_terms(pod("acme/amd:1"), {"matchExpressions": [not_amd]})
    _, mutation = admit(obj, {"acme/amd:1": AMD})
    assert ["archfit: image acme/amd:1 has no linux/arm64, but this pod requires arm64"] == (
        mutation.warnings
    )
    assert [] == mutation.patch


def test_a_pod_already_pinned_to_what_its_images_run_on_needs_no_constraint() -> None:
    """nodeSelector arch=amd64 for an amd64-only image: nothing to add."""
    obj = pod("acme/amd:1")
    obj["spec"]["nodeSelector"] = {"kubernetes.io/arch": "amd64"}
    _, mutation = admit(obj, {"acme/amd:1": AMD})
    assert ([], [], "unchanged") == (mutation.patch, mutation.warnings, mutation.outcome)


def test_an_image_that_runs_on_no_cluster_platform_gets_a_warning_and_no_constraint() -> None:
    """An s390x-only image in an amd64/arm64 cluster: the extender explains it at scheduling."""
    s390x = frozenset({parse("linux/s390x")})
    _, mutation = admit(pod("acme/s390x:1"), {"acme/s390x:1": s390x})
    assert [
        "archfit: image acme/s390x:1 runs on none of this cluster's platforms "
        "(linux/amd64, linux/arm64)"
    ] == mutation.warnings
    assert [] == mutation.patch


def test_an_unknown_image_fails_open_with_no_patch_at_all() -> None:
    """Registry down, 401, timeout: no constraint, no toleration, no annotation."""
    resolved: dict[str, Resolved] = {"acme/multi:1": MULTI, "acme/down:1": Unknown("refused")}
    obj = pod("acme/multi:1", "acme/down:1")
    patched, mutation = admit(obj, resolved, rules(taints=(GKE_TAINT,)))
    assert obj == patched
    assert ("unknown", ("acme/down:1",)) == (mutation.outcome, mutation.unknown)


def test_a_multi_arch_pod_tolerates_the_gke_arm64_taint() -> None:
    """Every image runs on arm64, so the tainted arm64 nodes become candidates."""
    patched, mutation = admit(
        pod("acme/multi:1"), {"acme/multi:1": MULTI}, rules(taints=(GKE_TAINT,))
    )
    added = {
        "key": "kubernetes.io/arch",
        "operator": "Equal",
        "value": "arm64",
        "effect": "NoSchedule",
    }
    assert added in patched["spec"]["tolerations"]
    assert ["preferred_affinity", "toleration"] == mutation.changes


def test_an_amd64_only_pod_does_not_tolerate_the_arm64_taint() -> None:
    """The taint keeps it off arm64, which is right."""
    patched, _ = admit(pod("acme/amd:1"), {"acme/amd:1": AMD}, rules(taints=(GKE_TAINT,)))
    assert all(t.get("key") != "kubernetes.io/arch" for t in patched["spec"]["tolerations"])


def test_a_pod_without_tolerations_gets_a_new_list() -> None:
    """`add /spec/tolerations/-` needs the list to exist; a missing one is created."""
    obj = pod("acme/arm:1")
    del obj["spec"]["tolerations"]
    patched, _ = admit(obj, {"acme/arm:1": ARM}, rules(taints=(GKE_TAINT,)))
    assert [
        {"key": "kubernetes.io/arch", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"}
    ] == (patched["spec"]["tolerations"])


@pytest.mark.parametrize(
    "toleration",
    [
        {"operator": "Exists"},
        {"key": "kubernetes.io/arch", "operator": "Exists"},
        {"key": "kubernetes.io/arch", "operator": "Equal", "value": "arm64"},
        {"key": "kubernetes.io/arch", "value": "arm64", "effect": "NoSchedule"},
    ],
    ids=["exists-everything", "exists-key", "equal-any-effect", "default-operator"],
)
def test_a_toleration_the_pod_already_has_is_not_added_again(toleration: dict[str, str]) -> None:
    """ToleratesTaint semantics (k8s.io/api/core/v1/toleration.go)."""
    obj = pod("acme/arm:1")
    obj["spec"]["tolerations"] = [toleration]
    _, mutation = admit(obj, {"acme/arm:1": ARM}, rules(taints=(GKE_TAINT,)))
    assert "toleration" not in mutation.changes


def test_a_second_call_on_the_patched_pod_adds_nothing() -> None:
    """reinvocationPolicy: IfNeeded may call the webhook again; it must be idempotent."""
    zone = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}
    how = rules(taints=(GKE_TAINT,), scheduler_name="archfit-scheduler")
    for image, platforms in (("acme/amd:1", AMD), ("acme/multi:1", MULTI), ("acme/arm:1", ARM)):
        obj = with_terms(pod(image), {"matchExpressions": [zone]})
        once, first = admit(obj, {image: platforms}, how)
        twice, second = admit(once, {image: platforms}, how)
        assert first.patch, image
        assert ([], [], once) == (second.patch, second.annotation, twice), image


def test_dry_run_writes_only_the_platforms_annotation() -> None:
    """Dry-run decides and explains, but the answer constrains nothing."""
    obj = pod("acme/amd:1")
    mutation = decide_mutation(read_pod(obj), ("acme/amd:1",), {"acme/amd:1": AMD}, rules())
    patched = jsonpatch.apply_patch(copy.deepcopy(obj), mutation.operations(dry_run=True))
    assert ["required_affinity"] == mutation.changes
    assert obj["spec"] == patched["spec"]
    assert "linux/amd64" == patched["metadata"]["annotations"][PLATFORMS_ANNOTATION]


def test_routing_sends_default_scheduler_pods_to_the_second_scheduler_only() -> None:
    """A pod that chose its own scheduler keeps it."""
    how = rules(scheduler_name="archfit-scheduler")
    patched, _ = admit(pod("acme/multi:1"), {"acme/multi:1": MULTI}, how)
    assert "archfit-scheduler" == patched["spec"]["schedulerName"]
    custom = pod("acme/multi:1")
    custom["spec"]["schedulerName"] = "volcano"
    patched, _ = admit(custom, {"acme/multi:1": MULTI}, how)
    assert "volcano" == patched["spec"]["schedulerName"]


def test_the_os_expression_is_added_only_where_the_os_tells_platforms_apart() -> None:
    """A linux/amd64 image in a cluster with windows/amd64 nodes: os In [linux], no arch."""
    cluster = frozenset({parse("linux/amd64"), parse("windows/amd64")})
    patched, _ = admit(pod("acme/amd:1"), {"acme/amd:1": AMD}, rules(platforms=cluster))
    assert [
        {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}
    ] == (required_terms(patched))


def test_a_pod_without_annotations_gets_the_annotation_map() -> None:
    """metadata.annotations absent: the whole map is added (a deeper add would fail)."""
    obj = pod("acme/amd:1")
    obj["metadata"].pop("annotations")
    patched, _ = admit(obj, {"acme/amd:1": AMD})
    assert {PLATFORMS_ANNOTATION: "linux/amd64"} == patched["metadata"]["annotations"]


def test_the_annotation_lists_only_platforms_every_image_runs_on() -> None:
    """A multi-arch container beside an arm64-only init container runs on arm64."""
    obj = pod("acme/multi:1", init_images=("acme/arm:1",))
    patched, _ = admit(obj, {"acme/arm:1": ARM, "acme/multi:1": MULTI})
    assert "linux/arm64" == patched["metadata"]["annotations"][PLATFORMS_ANNOTATION]


def test_an_affinity_that_is_not_an_object_is_a_shape_error() -> None:
    """The API server validates after mutating webhooks: archfit must not guess."""
    obj = pod("acme/amd:1")
    obj["spec"]["affinity"] = "arm64 please"
    with pytest.raises(ShapeError, match=r"spec.affinity must be an object"):
        decide_mutation(read_pod(obj), ("acme/amd:1",), {"acme/amd:1": AMD}, rules())


def test_platforms_only_variants_tell_apart_add_no_empty_term() -> None:
    """arm/v6 vs arm/v7 nodes: labels cannot say it, and an empty term would match nothing."""
    cluster = frozenset({parse("linux/arm/v7"), parse("linux/arm/v6")})
    v7_only = frozenset({Platform("linux", "arm", "v7")})
    patched, mutation = admit(pod("acme/v7:1"), {"acme/v7:1": v7_only}, rules(platforms=cluster))
    assert (("linux/arm/v7",), []) == (tuple(map(str, mutation.runs_on)), required_terms(patched))


def test_under_auto_matching_an_arm_v7_image_is_not_kept_off_arm64_nodes_that_run_it():
    """A containerd 2.0 arm64 node pulls arm/v7 (Only()); with `arm32OnArm64: pull-rule` (its
    CPUs run AArch32) the webhook must not rule it out."""
    v7 = frozenset({parse("linux/arm/v7")})
    patched, _ = admit(pod("acme/v7:1"), {"acme/v7:1": v7}, rules(rule=Rule.LOOSE, aarch32=True))
    assert [{"matchExpressions": [ARCH_IN_ARM]}] == required_terms(patched)
    strict = decide_mutation(
        read_pod(pod("acme/v7:1")), ("acme/v7:1",), {"acme/v7:1": v7}, rules(rule=Rule.STRICT)
    )
    assert ("conflict", []) == (strict.outcome, strict.patch)


# --- empty terms: never loosen (kube-scheduler reads an empty term as matching no node) ---

ZONE_A = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a"]}
PINNED = {"key": "metadata.name", "operator": "In", "values": ["pinned"]}


def test_an_empty_term_stays_empty_and_only_the_other_term_gets_the_arch() -> None:
    """`[{}, zone-a]` admits zone-a only; an arch ANDed into {} would admit every amd64 node."""
    patched, _ = admit(with_terms(pod("acme/amd:1"), {}, {"matchExpressions": [ZONE_A]}), AMD_ONLY)
    assert [{}, {"matchExpressions": [ZONE_A, ARCH_IN_AMD]}] == required_terms(patched)


def test_empty_match_expressions_stay_empty_beside_a_match_fields_term() -> None:
    """`matchExpressions: []` is an empty term too; the name-pinned term is narrowed."""
    obj = with_terms(pod("acme/amd:1"), {"matchExpressions": []}, {"matchFields": [PINNED]})
    patched, _ = admit(obj, AMD_ONLY)
    assert [
        {"matchExpressions": []},
        {"matchFields": [PINNED], "matchExpressions": [ARCH_IN_AMD]},
    ] == required_terms(patched)


@pytest.mark.parametrize(
    "required",
    [{"nodeSelectorTerms": [{}]}, {"nodeSelectorTerms": []}, {"nodeSelectorTerms": None}, {}],
    ids=["only-an-empty-term", "no-terms", "null-terms", "no-terms-key"],
)
def test_a_pod_whose_required_affinity_admits_no_node_is_left_as_it_is(
    required: dict[str, Any],
) -> None:
    """It stays unschedulable (or refused by the apiserver), with a warning, never a term."""
    obj = pod("acme/amd:1")
    obj["spec"]["affinity"] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}
    }
    patched, mutation = admit(obj, AMD_ONLY)
    assert ("conflict", required) == (
        mutation.outcome,
        node_affinity(patched)["requiredDuringSchedulingIgnoredDuringExecution"],
    )
    assert [
        "archfit: this pod's own nodeSelector or required node affinity admits none of "
        "this cluster's platforms"
    ] == mutation.warnings


def test_a_null_match_expressions_beside_match_fields_gets_the_arch() -> None:
    """`matchExpressions: null` in a name-pinned term is read as absent, not a crash."""
    obj = with_terms(pod("acme/amd:1"), {"matchExpressions": None, "matchFields": [PINNED]})
    patched, _ = admit(obj, AMD_ONLY)
    assert [{"matchExpressions": [ARCH_IN_AMD], "matchFields": [PINNED]}] == required_terms(patched)


def test_the_patch_never_admits_a_node_the_pod_did_not_admit_for_random_pods() -> None:
    """Property, 5,000 seeded random pods on 64 nodes: patched-admitted ⊆ originally-admitted."""
    rng = random.Random(23)
    all_nodes = affinity.nodes()
    names = [n.name for n in all_nodes]
    loosened = []
    for _ in range(5_000):
        images = affinity.random_images(rng)
        obj = affinity.random_pod(rng, tuple(images), names)
        cluster = frozenset(rng.sample(affinity.PLATFORMS, rng.randint(1, 4)))
        resolved: dict[str, Resolved] = dict(images)
        patched, _ = admit(obj, resolved, rules(platforms=cluster, rule=rng.choice(list(Rule))))
        extra = [
            n.name for n in all_nodes if affinity.admits(patched, n) and not affinity.admits(obj, n)
        ]
        if extra:
            loosened.append((obj, extra))
    assert [] == loosened[:3]


AMD_V7 = frozenset({parse("linux/amd64"), parse("linux/arm/v7")})


def test_a_32_bit_arm_build_does_not_send_a_pod_to_arm64_by_default() -> None:
    """amd64 + arm/v7 under auto: required amd64, no arm64 preference, and the annotation
    names no arm64 either."""
    patched, mutation = admit(pod("acme/amd-v7:1"), {"acme/amd-v7:1": AMD_V7})
    preferred = node_affinity(patched).get("preferredDuringSchedulingIgnoredDuringExecution")
    assert ([{"matchExpressions": [ARCH_IN_AMD]}], None, ("linux/amd64",)) == (
        required_terms(patched),
        preferred,
        tuple(map(str, mutation.runs_on)),
    )
    assert "linux/amd64,linux/arm/v7" == patched["metadata"]["annotations"][PLATFORMS_ANNOTATION]


def test_with_pull_rule_a_32_bit_arm_build_admits_arm64_but_never_prefers_it() -> None:
    """arm32OnArm64: pull-rule: arm64 stays allowed, gets no preferred term, and the
    annotation names it."""
    patched, mutation = admit(
        pod("acme/amd-v7:1"), {"acme/amd-v7:1": AMD_V7}, rules(rule=Rule.LOOSE, aarch32=True)
    )
    assert ([], {}, ("linux/amd64", "linux/arm64")) == (
        required_terms(patched),
        node_affinity(patched),
        tuple(map(str, mutation.runs_on)),
    )
    annotation = patched["metadata"]["annotations"][PLATFORMS_ANNOTATION]
    assert "linux/amd64,linux/arm/v7,linux/arm64" == annotation


@pytest.mark.parametrize("aarch32", [False, True])
@pytest.mark.parametrize("rule", list(Rule))
@pytest.mark.parametrize(
    "entries",
    [
        ("linux/amd64", "linux/arm/v7"),
        ("linux/arm/v7",),
        ("linux/arm/v6",),
        ("linux/386",),
        ("linux/amd64", "linux/arm64"),
        ("linux/arm64/v8",),
    ],
)
def test_the_platforms_annotation_names_every_platform_the_pod_is_sent_to(
    entries: tuple[str, ...], rule: Rule, aarch32: bool
) -> None:
    """What the webhook decides the pod runs on is in `archfit.io/platforms`, never missing."""
    image = frozenset(map(parse, entries))
    _, mutation = admit(pod("i"), {"i": image}, rules(rule=rule, aarch32=aarch32))
    annotated = mutation.annotation[0]["value"]
    annotated = annotated[PLATFORMS_ANNOTATION] if isinstance(annotated, dict) else annotated
    assert [] == [str(p) for p in mutation.runs_on if str(p) not in annotated.split(",")]


def test_docs_webhook_md_says_which_rule_the_webhook_matches_by_under_auto() -> None:
    """The webhook's rule under `auto` (loose, 32-bit Arm only under pull-rule) is documented."""
    text = (Path(__file__).resolve().parents[3] / "docs" / "webhook.md").read_text()
    section = text[text.index("- **Which matching rule.**") :].split("\n- **")[0]
    assert ["`loose`", "`policy.arm32OnArm64: pull-rule`", "archfit.io/aarch32"] == [
        word
        for word in ("`loose`", "`policy.arm32OnArm64: pull-rule`", "archfit.io/aarch32")
        if word in section
    ]


def test_a_null_term_is_read_as_the_empty_term_the_apiserver_makes_of_it() -> None:
    """`nodeSelectorTerms: [null]` decodes as `[{}]` in Go: it admits no node, and no crash."""
    obj = with_terms(pod("acme/amd:1"), None, {"matchExpressions": [ZONE_A]})  # type: ignore[arg-type]
    patched, mutation = admit(obj, AMD_ONLY)
    assert [{}, {"matchExpressions": [ZONE_A, ARCH_IN_AMD]}] == required_terms(patched)
    assert "mutated" == mutation.outcome


def test_pods_whose_images_share_platform_sets_share_one_match_and_a_new_rule_matches_anew() -> (
    None
):
    """The platform match is cached by platform sets, never across matching rules."""
    # s390x: a set no other test names, so the first strict match is a miss here.
    v7_and_amd = frozenset({parse("linux/arm/v7"), parse("linux/amd64"), parse("linux/s390x")})
    loose = rules(rule=Rule.LOOSE, aarch32=True)
    first = decide_mutation(
        read_pod(pod("acme/a:1")), ("acme/a:1",), {"acme/a:1": v7_and_amd}, loose
    )
    before = fits_of.cache_info()
    again = decide_mutation(
        read_pod(pod("acme/b:2")), ("acme/b:2",), {"acme/b:2": v7_and_amd}, loose
    )
    strict = decide_mutation(
        read_pod(pod("acme/b:2")), ("acme/b:2",), {"acme/b:2": v7_and_amd}, rules()
    )
    after = fits_of.cache_info()
    assert (1, 1) == (after.hits - before.hits, after.misses - before.misses)
    assert (("linux/amd64", "linux/arm64"), ("linux/amd64", "linux/arm64"), ("linux/amd64",)) == (
        tuple(map(str, first.runs_on)),
        tuple(map(str, again.runs_on)),
        tuple(map(str, strict.runs_on)),
    )
