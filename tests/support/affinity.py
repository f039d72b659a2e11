"""Which nodes a pod's scheduling constraints admit, read as kube-scheduler reads them.

A port of what kube-scheduler's NodeAffinity filter checks (k8s.io/component-helpers
scheduling/corev1/nodeaffinity: `GetRequiredNodeAffinity(pod).Match(node)`): the
nodeSelector's pairs all present, and, when the pod has required node affinity, at least
one term that is not empty and whose expressions and fields all match. An empty term
(no expressions and no fields) matches no node, and so does a required selector with no
terms (which the apiserver refuses outright). Used to prove that the webhook's patch only
ever narrows where a pod may go, for random realistic pods (`random_pod`).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from extender.core.platforms import Platform, parse

ARCH = "kubernetes.io/arch"
OS = "kubernetes.io/os"
ZONE = "topology.kubernetes.io/zone"
#: An integer label, for Gt/Lt.
GENERATION = "example.com/generation"


@dataclass(frozen=True)
class Node:
    """What node affinity reads of a node: its name (matchFields) and labels."""

    name: str
    labels: Mapping[str, str]


def admits(pod: Mapping[str, Any], node: Node) -> bool:
    """Whether kube-scheduler's NodeAffinity filter lets `pod` onto `node`."""
    spec = pod.get("spec") or {}
    selector = spec.get("nodeSelector") or {}
    if any(node.labels.get(key) != value for key, value in selector.items()):
        return False
    affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return True
    return any(_term_matches(term, node) for term in required.get("nodeSelectorTerms") or ())


def _term_matches(term: Mapping[str, Any], node: Node) -> bool:
    expressions = term.get("matchExpressions") or ()
    fields = term.get("matchFields") or ()
    if not expressions and not fields:
        return False  # nodeSelectorTerm.isEmpty: matches nothing
    return all(_requirement(e, node.labels) for e in expressions) and all(
        _requirement(f, {"metadata.name": node.name}) for f in fields
    )


def _requirement(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """k8s.io/apimachinery labels.Requirement.Matches."""
    key, operator = expression["key"], expression["operator"]
    values = expression.get("values") or []
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt"):
        if not present:
            return False
        try:
            have, bound = int(labels[key]), int(values[0])
        except (ValueError, IndexError):
            return False
        return have > bound if operator == "Gt" else have < bound
    raise ValueError(f"unknown operator {operator!r}")


# --- random realistic pods and the nodes to judge them on ---------------------------------

PLATFORMS: tuple[Platform, ...] = tuple(
    parse(p) for p in ("linux/amd64", "linux/arm64", "linux/arm/v7", "linux/s390x", "windows/amd64")
)
_ARCHES = ("amd64", "arm64", "arm", "s390x")
_OSES = ("linux", "windows")
_ZONES = ("zone-a", "zone-b")


def nodes() -> list[Node]:
    """Every mix of architecture, OS, zone (or none) and generation: 64 nodes."""
    found = []
    for arch in _ARCHES:
        for os_ in _OSES:
            for zone in (*_ZONES, None):
                for generation in ("1", "3"):
                    labels = {ARCH: arch, OS: os_, GENERATION: generation}
                    if zone is not None:
                        labels[ZONE] = zone
                    found.append(Node(f"{os_}-{arch}-{zone or 'nozone'}-g{generation}", labels))
    return found


def random_images(rng: random.Random) -> dict[str, frozenset[Platform]]:
    """One to three images, each running on a random non-empty set of platforms."""
    return {
        f"acme/app{i}:1": frozenset(rng.sample(PLATFORMS, rng.randint(1, 3)))
        for i in range(rng.randint(1, 3))
    }


def random_pod(rng: random.Random, images: Sequence[str], names: Sequence[str]) -> dict[str, Any]:
    """A pod shaped like what Helm charts and people write, empty terms included."""
    spec: dict[str, Any] = {
        "containers": [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]
    }
    if rng.random() < 0.3:
        spec["nodeSelector"] = rng.choice(
            [{ARCH: rng.choice(_ARCHES)}, {OS: "linux"}, {ZONE: rng.choice(_ZONES)}, {}]
        )
    if rng.random() < 0.8:
        spec["affinity"] = {"nodeAffinity": _random_node_affinity(rng, names)}
    return {"metadata": {"name": "p", "namespace": "shop"}, "spec": spec}


def _random_node_affinity(rng: random.Random, names: Sequence[str]) -> dict[str, Any]:
    affinity: dict[str, Any] = {}
    shape = rng.random()
    if shape < 0.1:
        affinity["requiredDuringSchedulingIgnoredDuringExecution"] = rng.choice(
            [{}, {"nodeSelectorTerms": []}, {"nodeSelectorTerms": None}]
        )
    elif shape < 0.85:
        terms = [_random_term(rng, names) for _ in range(rng.randint(1, 3))]
        affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": terms}
    if rng.random() < 0.3:
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": rng.randint(1, 100), "preference": _random_term(rng, names)}
        ]
    return affinity


def _random_term(rng: random.Random, names: Sequence[str]) -> dict[str, Any]:
    roll = rng.random()
    if roll < 0.1:
        return {}
    if roll < 0.2:
        return {"matchExpressions": []}
    term: dict[str, Any] = {}
    if rng.random() < 0.85:
        term["matchExpressions"] = [_random_expression(rng) for _ in range(rng.randint(1, 3))]
    elif rng.random() < 0.5:
        term["matchExpressions"] = []
    if rng.random() < 0.2 or not term.get("matchExpressions"):
        term["matchFields"] = [
            {
                "key": "metadata.name",
                "operator": rng.choice(["In", "NotIn"]),
                "values": [rng.choice(names)],
            }
        ]
    return term


def _random_expression(rng: random.Random) -> dict[str, Any]:
    key = rng.choice((ARCH, ARCH, OS, ZONE, GENERATION))
    choices = {ARCH: _ARCHES, OS: _OSES, ZONE: _ZONES, GENERATION: ("1", "2", "3")}[key]
    if key == GENERATION and rng.random() < 0.5:
        return {"key": key, "operator": rng.choice(["Gt", "Lt"]), "values": ["2"]}
    operator = rng.choice(["In", "In", "NotIn", "Exists", "DoesNotExist"])
    if operator in ("Exists", "DoesNotExist"):
        return {"key": key, "operator": operator}
    return {"key": key, "operator": operator, "values": rng.sample(choices, rng.randint(1, 2))}
