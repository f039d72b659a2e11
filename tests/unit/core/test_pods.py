"""Extracting images, pull secrets and annotations from a v1.Pod."""

from types import MappingProxyType

import pytest

from extender.core.pods import PodError, PullSecretsRef, facts, read_mapping, read_mapping_at
from tests.objects import pod


def test_images_are_init_containers_then_containers_without_duplicates():
    """Every image pulled before the pod runs counts once, init containers first."""
    p = pod("app:1", "sidecar:2", "app:1", init_images=("migrate:1", "app:1"))
    assert ("migrate:1", "app:1", "sidecar:2") == facts(p).images


def test_pull_secrets_keep_the_pod_order_and_service_account():
    """Credentials are looked up in the order kubelet uses."""
    p = pod("app:1", pull_secrets=("b", "a"), service_account="builder", namespace="ci")
    assert PullSecretsRef("ci", ("b", "a"), "builder") == facts(p).pull


@pytest.mark.parametrize(
    ("annotations", "skip", "prefer"),
    [
        (None, False, ()),
        ({"archfit.io/skip": "true"}, True, ()),
        ({"archfit.io/skip": "True "}, True, ()),
        ({"archfit.io/skip": "false"}, False, ()),
        ({"archfit.io/prefer-arch": "amd64"}, False, ("amd64",)),
        ({"archfit.io/prefer-arch": "x86_64, aarch64"}, False, ("amd64", "arm64")),
    ],
)
def test_annotations_set_skip_and_preferred_architecture(annotations, skip, prefer):
    """The opt-out and prefer-arch annotations are read leniently."""
    f = facts(pod("app:1", annotations=annotations))
    assert (skip, prefer) == (f.skip, f.prefer_arch)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda p: p.update(spec=[]), "Pod.spec must be an object"),
        (lambda p: p["spec"].update(containers={}), "Pod.spec.containers must be a list"),
        (lambda p: p["spec"]["containers"][0].update(image=7), r"containers\[0\].image must be"),
        (lambda p: p["spec"]["containers"][0].update(image=" "), r"containers\[0\].image is empty"),
        (lambda p: p["metadata"].update(namespace=1), "metadata.namespace must be a string"),
        (lambda p: p["spec"].update(imagePullSecrets="x"), "imagePullSecrets must be a list"),
    ],
)
def test_wrongly_typed_pods_raise_an_error_naming_the_field(mutate, message):
    """A malformed pod is a PodError that says where."""
    p = pod("app:1")
    mutate(p)
    with pytest.raises(PodError, match=message):
        facts(p)


class _Refused(Exception):
    """The error a caller names (ShapeError, WorkloadError): the reader raises that one."""


def _node_affinity_read_level_by_level(spec):
    """What mutation._node_affinity read before read_mapping_at, one read_mapping per level."""
    affinity = read_mapping(spec.get("affinity"), "spec.affinity", _Refused)
    return read_mapping(affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity", _Refused)


AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}


@pytest.mark.parametrize(
    ("obj", "path", "expected"),
    [
        ({"spec": {"affinity": AFFINITY}}, "spec.affinity.nodeAffinity", AFFINITY["nodeAffinity"]),
        ({"spec": {"affinity": AFFINITY}}, "spec", {"affinity": AFFINITY}),
        ({}, "spec.affinity.nodeAffinity", {}),
        ({"spec": None}, "spec.affinity.nodeAffinity", {}),
        ({"spec": {"affinity": None}}, "spec.affinity.nodeAffinity", {}),
        ({"spec": {"affinity": {}}}, "spec.affinity.nodeAffinity", {}),
        # Another Mapping than a dict (what JSON decodes to) takes the reader's other path.
        (
            {"spec": MappingProxyType({"affinity": AFFINITY})},
            "spec.affinity.nodeAffinity",
            AFFINITY["nodeAffinity"],
        ),
        ({"spec": MappingProxyType({})}, "spec.affinity.nodeAffinity", {}),
    ],
)
def test_a_path_reads_the_object_at_its_end_or_nothing_once_a_level_is_missing(obj, path, expected):
    """Absent and null levels read as {} all the way down, as read_mapping reads one."""
    assert expected == read_mapping_at(obj, path)


@pytest.mark.parametrize(
    ("obj", "path", "message"),
    [
        ({"spec": {"affinity": []}}, "spec.affinity.nodeAffinity", "spec.affinity must be"),
        ({"spec": "x"}, "spec.affinity.nodeAffinity", "spec must be"),
        ({"spec": {"affinity": {"nodeAffinity": 7}}}, "spec.affinity.nodeAffinity", "nodeAffinity"),
        (
            {"spec": MappingProxyType({"affinity": []})},
            "spec.affinity.nodeAffinity",
            "^spec.affinity must be",
        ),
    ],
)
def test_a_level_that_is_not_an_object_is_refused_by_its_path(obj, path, message):
    """The first level that is not an object is named, in the error the caller asked for."""
    with pytest.raises(_Refused, match=message):
        read_mapping_at(obj, path, _Refused)


@pytest.mark.parametrize(
    "spec",
    [
        {"affinity": AFFINITY},
        {"affinity": None},
        {"affinity": ["in", "the", "middle"]},
        {"affinity": {"nodeAffinity": "at the end"}},
        {"affinity": {"nodeAffinity": None}},
        {},
    ],
)
def test_a_path_answers_what_reading_each_level_in_turn_answered(spec):
    """The same object, or the same error and text, as the level-by-level reads it replaces."""

    def outcome(read):
        try:
            return read()
        except _Refused as error:
            return f"refused: {error}"

    assert outcome(lambda: _node_affinity_read_level_by_level(spec)) == outcome(
        lambda: read_mapping_at(spec, "affinity.nodeAffinity", _Refused, within="spec")
    )
