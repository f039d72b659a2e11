"""Namespace and workload preferences and the arm64 share (extender.core.steering), and the
patch the webhook writes from them (extender.core.mutation)."""

from __future__ import annotations

import copy
import random
from typing import Any

import jsonpatch
import pytest

from extender.core.mutation import MutationRules, decide_mutation
from extender.core.platforms import Resolved, parse
from extender.core.pod_rules import steered_facts
from extender.core.pods import annotation_preference, facts, read_pod
from extender.core.steering import (
    CHOICE_LABEL,
    SHARE_ANNOTATION,
    OwnerKey,
    ShareError,
    ShareTally,
    Split,
    Steering,
    choose,
    parse_share,
    preference_order,
    steer,
)
from tests.objects import pod
from tests.support.clock import FakeClock
from tests.support.fakes import NamespacePreferences

GLOBAL = {"arm64": 10, "amd64": 0}
PREFER = "archfit.io/prefer-arch"
AMD = frozenset({parse("linux/amd64")})
ARM = frozenset({parse("linux/arm64")})
MULTI = AMD | ARM
OWNER = OwnerKey("shop", "0b6f0e1c-8a59-4d53-a1f0-8c1d2b3a4e5f")


def no_counts(owner: OwnerKey) -> Split:
    return Split()


def bare(obj: dict[str, Any]) -> dict[str, Any]:
    """The pod without its controller: created directly, not from a template."""
    del obj["metadata"]["ownerReferences"]
    return obj


# --- which level decides --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod_annotations", "namespace", "controlled", "expected"),
    [
        ({}, {}, True, ("global", GLOBAL)),
        ({}, {PREFER: "amd64"}, True, ("namespace", {"amd64": 10})),
        ({PREFER: "arm64"}, {PREFER: "amd64"}, True, ("workload", {"arm64": 10})),
        ({PREFER: "amd64,arm64"}, {PREFER: "arm64"}, False, ("pod", {"amd64": 10, "arm64": 5})),
        ({PREFER: " "}, {PREFER: "amd64"}, True, ("namespace", {"amd64": 10})),
    ],
    ids=["global", "namespace", "workload-over-namespace", "bare-pod", "blank-falls-through"],
)
def test_the_most_specific_level_that_names_a_preference_wins(
    pod_annotations: dict[str, str],
    namespace: dict[str, str],
    controlled: bool,
    expected: tuple[str, dict[str, int]],
) -> None:
    """pod (or workload, for a controller's pod) > namespace > global."""
    obj = pod("acme/api:1", annotations=pod_annotations)
    obj = obj if controlled else bare(obj)
    steering = steer(obj, namespace, GLOBAL, no_counts)
    assert expected == (steering.preference_from, dict(steering.preference))


def test_a_workloads_preference_opts_it_out_of_its_namespaces_share() -> None:
    """The namespace splits at 25, the workload prefers amd64: no split for its pods."""
    obj = pod("acme/api:1", annotations={PREFER: "amd64"})
    steering = steer(obj, {SHARE_ANNOTATION: "25"}, GLOBAL, no_counts)
    assert ("workload", None, "") == (steering.preference_from, steering.share, steering.choice)


def test_a_workloads_share_overrides_its_namespaces_preference() -> None:
    """The namespace prefers amd64, the workload's template says arm64-share 100."""
    obj = pod("acme/api:1", annotations={SHARE_ANNOTATION: "100"})
    steering = steer(obj, {PREFER: "amd64"}, GLOBAL, no_counts)
    assert (100, "workload", "arm64") == (steering.share, steering.share_from, steering.choice)


@pytest.mark.parametrize(("text", "expected"), [("25", 25), (" 10% ", 10), ("0", 0), ("100", 100)])
def test_a_share_is_a_whole_percentage(text: str, expected: int) -> None:
    """The share's spellings: digits, with an optional %."""
    assert expected == parse_share(text)


@pytest.mark.parametrize("text", ["", "101", "-5", "12.5", "a quarter", "25%%"])
def test_a_share_archfit_cannot_read_is_refused(text: str) -> None:
    """Never a guess: anything else is an error."""
    with pytest.raises(ShareError):
        parse_share(text)


def test_an_unreadable_workload_share_falls_through_to_the_namespace_and_is_reported() -> None:
    """`lots` on the template is ignored; the namespace's 100 applies, and the line says so."""
    obj = pod("acme/api:1", annotations={SHARE_ANNOTATION: "lots"})
    steering = steer(obj, {SHARE_ANNOTATION: "100"}, GLOBAL, no_counts)
    assert ("namespace", "arm64") == (steering.share_from, steering.choice)
    assert 1 == len(steering.problems)


@pytest.mark.parametrize(
    ("pod_annotations", "namespace"),
    [
        ({}, {}),
        ({}, {PREFER: "amd64"}),
        ({PREFER: "arm64"}, {PREFER: "amd64"}),
        ({PREFER: " "}, {PREFER: "amd64,arm64"}),
        ({SHARE_ANNOTATION: "25"}, {PREFER: "amd64"}),
        ({SHARE_ANNOTATION: "lots"}, {PREFER: "amd64"}),
        ({}, {SHARE_ANNOTATION: "25", PREFER: "amd64"}),
    ],
    ids=["global", "namespace", "workload", "blank", "share", "unreadable-share", "ns-share"],
)
def test_the_extenders_preference_is_the_one_the_webhooks_steering_applies(
    pod_annotations: dict[str, str], namespace: dict[str, str]
) -> None:
    """preference_order (what prioritize scores by) names the preference steer would write."""
    obj = pod("acme/api:1", annotations=pod_annotations)
    order = preference_order(obj["metadata"]["annotations"], namespace)
    expected = steer(obj, namespace, GLOBAL, no_counts).preference
    assert dict(expected) == (annotation_preference(order) if order else GLOBAL)


def test_the_extenders_verbs_take_the_namespace_preference_only_from_a_steering_source() -> None:
    """steered_facts: the namespace's order for a pod that says nothing; nothing without a
    source (an extender without the namespace watch keeps the pod's own annotation)."""
    obj = pod("acme/api:1", annotations={})
    source = NamespacePreferences({"shop": {PREFER: "amd64"}})
    assert (("amd64",), ()) == (
        steered_facts(facts(obj), obj, source).prefer_arch,
        steered_facts(facts(obj), obj, None).prefer_arch,
    )


# --- the choice and the tally -----------------------------------------------------------------


@pytest.mark.parametrize("share", [0, 10, 25, 33, 50, 75, 100])
def test_admissions_alone_keep_the_split_within_one_pod_of_the_share(share: int) -> None:
    """200 new pods in a row: after each one, arm64 is within 1 of share x pods."""
    split = Split()
    for _ in range(200):
        side = choose(share, split)
        split = Split(split.arm64 + (side == "arm64"), split.amd64 + (side == "amd64"))
        assert abs(split.arm64 * 100 - share * split.total) <= 100, split


@pytest.mark.parametrize("seed", range(20))
def test_admissions_and_deletions_never_move_the_split_further_than_one_pod_from_the_share(
    seed: int,
) -> None:
    """Random creates and deletes through the tally: an admission never leaves the split
    further than max(1 pod, where it was) from the share, and the split ends within 1."""
    rng = random.Random(seed)
    share = rng.choice([10, 25, 50, 80])
    clock = FakeClock()
    tally = ShareTally()
    live: dict[str, str] = {}

    def off(split: Split) -> float:
        return abs(split.arm64 - share * split.total / 100)

    for step in range(400):
        if live and rng.random() < 0.35:
            uid = rng.choice(sorted(live))
            del live[uid]
            tally.gone(uid)
        else:
            before = tally.split(OWNER, clock())
            side = choose(share, before)
            tally.chosen(OWNER, side, clock())
            after = tally.split(OWNER, clock())
            assert off(after) <= max(1.0, off(before)), (step, before, after)
            if rng.random() < 0.8:  # the watch shows most pods at once, others a bit later
                uid = f"pod-{step}"
                live[uid] = side
                tally.seen(uid, OWNER, side)
        clock.advance(0.1)
    for _ in range(100):  # then the workload scales up: it settles at the share
        side = choose(share, tally.split(OWNER, clock()))
        tally.chosen(OWNER, side, clock())
    assert off(tally.split(OWNER, clock())) <= 1.0


def test_a_pod_seen_by_the_watch_replaces_its_choice_in_flight() -> None:
    """Counted once: admitted (in flight), then seen (live), never both."""
    clock = FakeClock()
    tally = ShareTally()
    tally.chosen(OWNER, "arm64", clock())
    tally.seen("uid-1", OWNER, "arm64")
    tally.seen("uid-1", OWNER, "arm64")  # a MODIFIED event
    assert Split(1, 0) == tally.split(OWNER, clock())


def test_a_choice_the_watch_never_shows_stops_counting() -> None:
    """A pod refused after admission (a later webhook, a quota) counts for 30 s only."""
    clock = FakeClock()
    tally = ShareTally()
    tally.chosen(OWNER, "amd64", clock())
    clock.advance(29)
    counted = tally.split(OWNER, clock())
    clock.advance(2)
    assert (Split(0, 1), Split(0, 0)) == (counted, tally.split(OWNER, clock()))


def test_a_relist_forgets_pods_deleted_while_the_watch_was_down() -> None:
    """replace() keeps exactly the listed pods."""
    tally = ShareTally()
    for uid, side in (("a", "arm64"), ("b", "amd64"), ("c", "amd64")):
        tally.seen(uid, OWNER, side)
    tally.replace([("a", OWNER, "arm64"), ("d", OWNER, "arm64")])
    assert Split(2, 0) == tally.split(OWNER, FakeClock()())


# --- what the webhook writes ---------------------------------------------------------------


def rules(steering: Steering) -> MutationRules:
    cluster = frozenset({parse("linux/amd64"), parse("linux/arm64")})
    return MutationRules(platforms=cluster, arch_preference=GLOBAL, steering=steering)


def admit(obj: dict[str, Any], resolved: dict[str, Resolved], steering: Steering) -> Any:
    mutation = decide_mutation(read_pod(obj), tuple(resolved), resolved, rules(steering))
    patched = jsonpatch.apply_patch(copy.deepcopy(obj), mutation.operations(dry_run=False))
    return patched, mutation


def arch_terms(obj: dict[str, Any]) -> list[list[str]]:
    affinity = obj["spec"].get("affinity", {}).get("nodeAffinity", {})
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution", {})
    return [
        e["values"]
        for term in required.get("nodeSelectorTerms", [])
        for e in term["matchExpressions"]
        if e["key"] == "kubernetes.io/arch"
    ]


@pytest.mark.parametrize("side", ["arm64", "amd64"])
def test_a_multi_arch_pod_requires_the_chosen_side_and_is_labelled_with_it(side: str) -> None:
    """Required affinity for one architecture (what autoscalers read), and the label."""
    obj = pod("acme/api:1", annotations={SHARE_ANNOTATION: "100" if side == "arm64" else "0"})
    steering = steer(obj, {}, GLOBAL, no_counts)
    patched, mutation = admit(obj, {"acme/api:1": MULTI}, steering)
    expected = ([[side]], side, side, None)
    preferred = patched["spec"]["affinity"]["nodeAffinity"].get(
        "preferredDuringSchedulingIgnoredDuringExecution"
    )
    assert expected == (
        arch_terms(patched),
        patched["metadata"]["labels"][CHOICE_LABEL],
        mutation.arch_choice,
        preferred,
    )


def test_a_single_arch_pod_with_a_share_is_left_as_without_one() -> None:
    """An amd64-only image under arm64-share 100: the same patch as with no share at all."""
    obj = pod("acme/amd:1", annotations={SHARE_ANNOTATION: "100"})
    shared, with_share = admit(obj, {"acme/amd:1": AMD}, steer(obj, {}, GLOBAL, no_counts))
    plain, _ = admit(obj, {"acme/amd:1": AMD}, Steering(preference=GLOBAL))
    assert (plain, "") == (shared, with_share.arch_choice)
    assert CHOICE_LABEL not in shared["metadata"]["labels"]


def test_a_reinvocation_keeps_the_first_choice_and_adds_nothing() -> None:
    """The pod comes back with its label and constraint; the split now says the other side."""
    obj = pod("acme/api:1", annotations={SHARE_ANNOTATION: "50"})
    first, _ = admit(obj, {"acme/api:1": MULTI}, steer(obj, {}, GLOBAL, no_counts))
    chosen = first["metadata"]["labels"][CHOICE_LABEL]
    lopsided = Split(0, 9) if chosen == "amd64" else Split(9, 0)
    again = steer(first, {}, GLOBAL, lambda owner: lopsided)
    second, mutation = admit(first, {"acme/api:1": MULTI}, again)
    assert (True, chosen, []) == (again.kept, again.choice, mutation.patch)
    assert first == second


def test_a_pod_that_requires_one_architecture_itself_is_not_split() -> None:
    """Its own nodeSelector says amd64: a share's arm64 choice is not applied or counted."""
    obj = pod("acme/api:1", annotations={SHARE_ANNOTATION: "100"})
    obj["spec"]["nodeSelector"] = {"kubernetes.io/arch": "amd64"}
    patched, mutation = admit(obj, {"acme/api:1": MULTI}, steer(obj, {}, GLOBAL, no_counts))
    assert ("", None) == (mutation.arch_choice, patched["metadata"]["labels"].get(CHOICE_LABEL))


# --- the same pod sent again ----------------------------------------------------------------


def _statefulset_pod(name: str) -> dict[str, Any]:
    """A StatefulSet's pod: named at create (web-0), so a retry of its create shares it."""
    obj = pod("acme/web:1", name=name, annotations={SHARE_ANNOTATION: "50"})
    obj["metadata"].pop("generateName", None)
    return obj


def _fleet(clock: FakeClock) -> Any:
    """The webhook's steering, its watches not started: admissions alone feed the tally."""
    from extender.kube.client.api import connect
    from extender.kube.client.rest_config import RestConfig
    from extender.kube.steering_watches import FleetSteering

    return FleetSteering(connect(RestConfig(host="http://127.0.0.1:1")), clock=clock)


def test_a_retry_of_the_same_create_gets_the_same_side_and_counts_once() -> None:
    """web-0 admitted, then sent again (a new request uid, the client timed out): the same
    side, not the other one its own pending choice would tip the split to."""
    clock = FakeClock()
    fleet = _fleet(clock)
    first = fleet.steer(_statefulset_pod("web-0"), GLOBAL)
    fleet.chosen(first, first.choice)
    clock.advance(2)
    retry = fleet.steer(_statefulset_pod("web-0"), GLOBAL)
    fleet.chosen(retry, retry.choice)
    other = fleet.steer(_statefulset_pod("web-1"), GLOBAL)
    assert (first.choice, True, Split(0, 1) if first.choice == "amd64" else Split(1, 0)) == (
        retry.choice,
        retry.kept,
        other.split,
    )


def test_a_remembered_choice_lasts_as_long_as_a_choice_in_flight() -> None:
    """After the in-flight window the name is forgotten, as the choice stops counting."""
    clock = FakeClock()
    tally = ShareTally()
    tally.chosen(OWNER, "arm64", clock(), pod="web-0")
    clock.advance(29)
    within = tally.remembered(OWNER, "web-0", clock())
    clock.advance(2)
    assert ("arm64", "") == (within, tally.remembered(OWNER, "web-0", clock()))
