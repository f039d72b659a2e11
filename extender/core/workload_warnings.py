"""Warnings for the person who deploys: what a workload's images mean for where it can run.

Pure: takes a Deployment, StatefulSet, DaemonSet, ReplicaSet, Job or CronJob as the API
serves it, what its images run on and the cluster's nodes per platform, and returns the
`warnings` of an allowed AdmissionReview (kubectl, Argo CD and Flux print them). It never
denies. `template_changed` tells an UPDATE that needs no lookup at all. See docs/webhook.md,
"Warnings on workloads".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from extender.core.mutation import MutationRules, allowed_by_pod, image_runs_on
from extender.core.platforms import ARCH_LABEL, OS_LABEL, Platform, Resolved
from extender.core.pods import (
    REQUIRED_TERMS,
    SKIP_ANNOTATION,
    PodError,
    PodView,
    PullSecretsRef,
    pod_template,
    read_pod,
    template_spec,
)
from extender.core.text import short_image

WARNED_KINDS: Mapping[str, str] = {
    "Deployment": "apps",
    "StatefulSet": "apps",
    "DaemonSet": "apps",
    "ReplicaSet": "apps",
    "Job": "batch",
    "CronJob": "batch",
}
"""The workload kinds warned about, and their API group."""

MAX_WARNING = 256
"""The API asks for warnings under 120 characters where it can, and may cut those above 256
(admission.k8s.io/v1 AdmissionResponse.warnings): the image name is cut to keep under this."""
_MIN_IMAGE = 24
_PLATFORM_LABELS = frozenset({ARCH_LABEL, OS_LABEL})
_SCHEDULING_FIELDS = ("nodeSelector", "affinity", "tolerations")
"""What of a pod template decides its platform, besides its images (`template_changed`).
The whole of `affinity`: pod (anti-)affinity rarely changes alone, and a change there costs
one lookup, which the resolver's cache answers."""


@dataclass(frozen=True, slots=True)
class Template:
    """The parts of a workload's pod template that warnings depend on."""

    kind: str
    images: tuple[str, ...]
    """Init container and container images, deduplicated, in pod order."""
    roles: Mapping[str, str]
    """What each image is to the pod: `image` (the first container), `sidecar` or
    `init container`; a warning names it so."""
    pull: PullSecretsRef
    pod: PodView
    """The pod template read as one of its pods (for its nodeSelector and affinity)."""
    skip: bool
    """`archfit.io/skip: "true"` on the workload or its pod template."""
    owned: bool
    """Made by a controller (a Deployment's ReplicaSet, a CronJob's Job): the person who
    deploys is warned on the owner."""


def template(kind: str, obj: Mapping[str, Any], namespace: str) -> Template:
    """The Template of a workload object. Raises PodError naming a bad field."""
    made = pod_template(kind, obj)
    spec = template_spec(kind, obj)
    made_metadata = made.get("metadata")
    annotated = made_metadata.get("annotations") if isinstance(made_metadata, Mapping) else None
    # As one of its pods: the template's annotations (archfit.io/skip) and spec.
    meta = {"namespace": namespace or "default", "name": "-", "annotations": annotated}
    pod = read_pod({"metadata": meta, "spec": spec})
    # The workload's own metadata, read leniently: the API server validates it.
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    annotations = metadata.get("annotations")
    annotations = annotations if isinstance(annotations, Mapping) else {}
    owners = metadata.get("ownerReferences")
    return Template(
        kind=kind,
        images=pod.facts.images,
        roles=_roles(spec),
        pull=pod.facts.pull,
        pod=pod,
        skip=pod.facts.skip or str(annotations.get(SKIP_ANNOTATION, "")).strip().lower() == "true",
        owned=isinstance(owners, list)
        and any(isinstance(o, Mapping) and o.get("controller") is True for o in owners),
    )


def template_changed(kind: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether an UPDATE changed what the warnings depend on: the template's images (init
    containers too) or its platform constraints. An unreadable old object counts as changed.
    """
    try:
        before, after = template_spec(kind, old), template_spec(kind, new)
    except PodError:
        return True
    return _placement_view(before) != _placement_view(after)


def _placement_view(spec: Mapping[str, Any]) -> tuple[Any, ...]:
    images = tuple(
        tuple(c.get("image") if isinstance(c, Mapping) else c for c in containers)
        if isinstance(containers := spec.get(key), list)
        else containers
        for key in ("initContainers", "containers")
    )
    return (images, *(spec.get(name) for name in _SCHEDULING_FIELDS))


def warnings(
    workload: Template,
    resolved: Mapping[str, Resolved],
    rules: MutationRules,
    nodes: Mapping[Platform, int] | None,
) -> list[str]:
    """What will happen to this workload's pods, and how to fix it; empty when nothing will
    go wrong. Images not resolved (Unknown) are not warned about.

    `rules.platforms` are the platforms its pods could land on (nodes now, and those
    autoscalers may add); `nodes` counts today's nodes per platform (None without a node
    index). A DaemonSet runs a pod on every node it admits, and the pod webhook leaves its
    pods alone, so each node whose platform an image lacks is a pod that fails there. The
    other kinds' pods are kept off such nodes (by the webhook or the extender), so they are
    told which architectures they cannot use.
    """
    known = [(i, r) for i in workload.images if isinstance(r := resolved.get(i), frozenset)]
    if not known:
        return []
    possible = rules.platforms | frozenset(nodes or ())
    allowed = allowed_by_pod(workload.pod.placement, possible)
    if not allowed:
        return []  # its own constraints admit no platform at all: not archfit's to say
    fits = frozenset(p for p in allowed if all(image_runs_on(p, ps, rules) for _, ps in known))
    fix = sorted({p.architecture for p in fits})
    found: list[str] = []
    for image, image_platforms in known:
        missing = sorted(p for p in allowed if not image_runs_on(p, image_platforms, rules))
        if not missing:
            continue
        role = workload.roles.get(image, "image")
        if workload.kind == "DaemonSet":
            bound = _selects_more(workload.pod)
            found += _daemonset(role, image, missing, nodes, fix, bound)
        else:
            found.append(_cannot_use(workload.kind, role, image, image_platforms, missing, fix))
    return found


def _daemonset(
    role: str,
    image: str,
    missing: Sequence[Platform],
    nodes: Mapping[Platform, int] | None,
    fix: Sequence[str],
    bound: bool,
) -> list[str]:
    """`bound`: the template selects nodes by more than their platform, so the count of
    nodes of a platform is what it may run on at most."""
    found = []
    for platform in missing:
        count = None if nodes is None else nodes.get(platform, 0)
        if count == 0:
            continue  # no such node today: nothing fails yet
        where = f"{_label(platform)} nodes" if count is None else _nodes(count, platform)
        where = f"up to {where}" if bound and count is not None else where
        advice = (
            f"add nodeAffinity {ARCH_LABEL} In [{', '.join(fix)}]"
            if fix
            else "it runs on no node here"
        )
        text = f"has no {platform}; this DaemonSet will run on {where} and fail there; {advice}"
        found.append(_warning(role, image, text))
    return found


def _cannot_use(
    kind: str,
    role: str,
    image: str,
    image_platforms: frozenset[Platform],
    missing: Sequence[Platform],
    fix: Sequence[str],
) -> str:
    if not fix:
        return _warning(role, image, f"has no {missing[0]}; this {kind}'s pods can run nowhere")
    runs = {_label(p) for p in image_platforms}
    has = f"is {runs.pop()}-only" if len(runs) == 1 else f"has no {missing[0]}"
    arches = ", ".join(sorted({_label(p) for p in missing}))
    return _warning(role, image, f"{has}, so this {kind} cannot use {arches} nodes")


def _selects_more(pod: PodView) -> bool:
    """Whether the template's nodeSelector or required node affinity names a label (or a
    field) other than the platform's: the node index knows only nodes' platforms."""
    placement = pod.placement
    if set(placement.node_selector) - _PLATFORM_LABELS:
        return True
    required = placement.node_affinity.get(REQUIRED_TERMS)
    terms = required.get("nodeSelectorTerms") if isinstance(required, Mapping) else None
    for term in terms if isinstance(terms, list) else ():
        if not isinstance(term, Mapping) or term.get("matchFields"):
            return True
        for expression in term.get("matchExpressions") or ():
            if not isinstance(expression, Mapping) or expression.get("key") not in _PLATFORM_LABELS:
                return True
    return False


def _nodes(count: int, platform: Platform) -> str:
    return f"{count} {_label(platform)} node{'s' if count != 1 else ''}"


def _label(platform: Platform) -> str:
    """How a warning names nodes of a platform: `arm64` on Linux, `windows/amd64` elsewhere."""
    return (
        platform.architecture
        if platform.os == "linux"
        else f"{platform.os}/{platform.architecture}"
    )


def _warning(role: str, image: str, text: str) -> str:
    room = MAX_WARNING - len(f"archfit: {role}  ") - len(text)
    return f"archfit: {role} {short_image(image, max(room, _MIN_IMAGE))} {text}"


def _roles(spec: Mapping[str, Any]) -> dict[str, str]:
    """image → what it is to the pod; the first container's image is the workload's own."""
    roles: dict[str, str] = {}
    containers = spec.get("containers") or []
    for index, container in enumerate(containers):
        image = str(container.get("image") or "").strip()
        roles.setdefault(image, "image" if index == 0 else "sidecar")
    for container in spec.get("initContainers") or []:
        image = str(container.get("image") or "").strip()
        sidecar = container.get("restartPolicy") == "Always"  # a native sidecar
        roles.setdefault(image, "sidecar" if sidecar else "init container")
    return roles
