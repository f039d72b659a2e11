"""Holding a pod with archfit's scheduling gate, and the one patch that releases it.

Patches are applied with jsonpatch (RFC 6902) as the apiserver applies them.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest

from extender.core.gates import (
    GATE,
    GATED_LABEL,
    GATED_REASON_ANNOTATION,
    gate_operations,
    is_gated,
    never_held,
    release_operations,
)
from extender.core.pods import RELEASED_ANNOTATION, read_pod
from tests.objects import pod


def held(obj: dict[str, Any]) -> dict[str, Any]:
    gated = jsonpatch.apply_patch(
        copy.deepcopy(obj), gate_operations(read_pod(obj), "acme/x:1 unknown")
    )
    gated["metadata"]["resourceVersion"] = "41"
    return gated


def test_a_pod_is_held_with_the_gate_the_label_and_the_reason() -> None:
    """Gate, label and annotation are added to a pod that has none of the three maps."""
    obj = pod("acme/x:1")
    obj["metadata"].pop("annotations", None)
    gated = held(obj)
    assert (
        [{"name": GATE}],
        {GATED_LABEL: "true"},
        "acme/x:1 unknown",
    ) == (
        gated["spec"]["schedulingGates"],
        {k: v for k, v in gated["metadata"]["labels"].items() if k == GATED_LABEL},
        gated["metadata"]["annotations"][GATED_REASON_ANNOTATION],
    )


def test_another_gate_is_kept_and_ours_is_appended() -> None:
    """A pod held by someone else's gate too keeps that gate."""
    obj = pod("acme/x:1")
    obj["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    assert [{"name": "example.com/quota"}, {"name": GATE}] == held(obj)["spec"]["schedulingGates"]


def test_holding_a_held_pod_again_adds_nothing() -> None:
    """reinvocationPolicy: IfNeeded may call the webhook twice for one pod."""
    assert [] == gate_operations(read_pod(held(pod("acme/x:1"))), "again")


def test_the_release_removes_only_our_gate_label_and_reason_and_says_how() -> None:
    """The other gate stays, the pod is no longer ours to hold, and the annotation says why."""
    obj = pod("acme/x:1")
    obj["metadata"]["labels"] = {"app": "web"}
    obj["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    gated = held(obj)
    released = jsonpatch.apply_patch(gated, release_operations(gated, [], "resolved"))
    assert (
        [{"name": "example.com/quota"}],
        {"app": "web"},
        "resolved",
        False,
    ) == (
        released["spec"]["schedulingGates"],
        released["metadata"]["labels"],
        released["metadata"]["annotations"][RELEASED_ANNOTATION],
        GATED_REASON_ANNOTATION in released["metadata"]["annotations"],
    )
    assert not is_gated(released)


def test_the_release_pins_the_resource_version_it_read_first() -> None:
    """The apiserver refuses (409) a patch whose resourceVersion is not the pod's current one."""
    gated = held(pod("acme/x:1"))
    first = release_operations(gated, [], "resolved")[0]
    assert {"op": "replace", "path": "/metadata/resourceVersion", "value": "41"} == first


def test_the_release_applies_the_constraints_before_the_gate_goes() -> None:
    """One patch: the arch expression and the gate's removal land together."""
    gated = held(pod("acme/x:1"))
    constraint = {
        "op": "add",
        "path": "/spec/affinity",
        "value": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}},
    }
    released = jsonpatch.apply_patch(gated, release_operations(gated, [constraint], "resolved"))
    assert ([], {"requiredDuringSchedulingIgnoredDuringExecution": {}}) == (
        released["spec"]["schedulingGates"],
        released["spec"]["affinity"]["nodeAffinity"],
    )


def test_a_release_against_a_pod_whose_gate_moved_fails_its_test() -> None:
    """If gates were reordered since the read, the `test` op stops the wrong gate's removal."""
    gated = held(pod("acme/x:1"))
    operations = release_operations(gated, [], "resolved")
    gated["spec"]["schedulingGates"].insert(0, {"name": "example.com/late"})
    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        jsonpatch.apply_patch(gated, operations)


def test_a_release_against_another_pod_of_the_same_name_fails_its_test() -> None:
    """A pod deleted and made again under its name has another uid: the release built for the
    first pod does not apply to it, even with the second's resourceVersion."""
    gated = held(pod("acme/x:1"))
    operations = release_operations(gated, [], "resolved")
    again = copy.deepcopy(gated)
    again["metadata"]["uid"] = "another-uid"
    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        jsonpatch.apply_patch(again, operations)


@pytest.mark.parametrize(
    ("excluded", "own", "expected"),
    [
        (("karpenter",), "archfit-system", {"karpenter", "kube-system", "archfit-system"}),
        ((), "tools", {"kube-system", "tools"}),
        (("kube-system", "tools"), "tools", {"kube-system", "tools"}),
    ],
    ids=["excluded-and-both", "none-excluded", "already-listed"],
)
def test_excluded_namespaces_kube_system_and_archfits_own_are_never_held(
    excluded: tuple[str, ...], own: str, expected: set[str]
) -> None:
    """Whatever the settings list, kube-system and archfit's namespace join it."""
    assert frozenset(expected) == never_held(excluded, own)
