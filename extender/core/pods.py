"""What archfit needs to know about a pod: its images, pull secrets and annotations, and
the read-only view of the parts a decision reads (`PodView`).

Pure functions over the pod's JSON (a `v1.Pod` as kube-scheduler sends it).
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping, Sequence, Sized
from typing import Any, NamedTuple

from extender.core.platforms import MAX_SCORE, normalize
from extender.errors import InputError

Pod = dict[str, Any]
"""A v1.Pod as the API server sends it, decoded from JSON."""

SKIP_ANNOTATION = "archfit.io/skip"
PREFER_ARCH_ANNOTATION = "archfit.io/prefer-arch"
PLATFORMS_ANNOTATION = "archfit.io/platforms"
"""Written by the webhook as it decides a pod at CREATE: where its images run."""
RELEASED_ANNOTATION = "archfit.io/released"
"""Written by the releaser as it lets a held pod go: how (`resolved`, or `fallback ...` /
`admit ...` at the cap)."""

# Bounds on the lists archfit walks, far above any real pod: each image costs a registry
# lookup, so a pod with a million containers must be refused, not resolved.
MAX_POD_CONTAINERS = 1_000
"""Containers, and init containers, per pod."""
MAX_PULL_SECRETS = 1_000
MAX_ANNOTATIONS = 10_000
"""The API server caps a pod's annotations at 256 KiB in all, so 10,000 is already absurd."""
REQUIRED_TERMS = "requiredDuringSchedulingIgnoredDuringExecution"


class PullSecretsRef(NamedTuple):
    """Where a pod's registry credentials come from, as kubelet looks them up (a NamedTuple:
    it keys every lookup of a request's images, and a tuple hashes and compares in C)."""

    namespace: str
    names: tuple[str, ...] = ()
    """`spec.imagePullSecrets[*].name`, in the pod's order."""
    service_account: str = "default"
    """`spec.serviceAccountName`; its own imagePullSecrets come next."""
    cluster: str = ""
    """The cluster the secrets live in, for `archfit audit` of a fleet; "" for the one
    archfit reads."""


class WorkloadId(NamedTuple):
    """Whose pods a pod is one of: its namespace and its controller, `Kind/name`
    (`Pod/name` for a pod no controller owns). Learned evidence is scoped by it."""

    namespace: str
    name: str


def workload_of(namespace: str, pod: str, controller: tuple[str, str] | None) -> WorkloadId:
    """The workload of a pod: its controller's (kind, name), else the pod itself."""
    if controller is None:
        return WorkloadId(namespace, f"Pod/{pod}")
    return WorkloadId(namespace, f"{controller[0]}/{controller[1]}")


def controller_of(owners: object) -> tuple[str, str] | None:
    """(kind, name) of the `controller: true` entry of `metadata.ownerReferences`, or None.
    A malformed entry is read as none: it decides only which learned evidence the pod
    shares, within its own namespace."""
    for owner in owners if isinstance(owners, list) else ():
        if isinstance(owner, Mapping) and owner.get("controller") is True:
            kind, name = owner.get("kind"), owner.get("name")
            if isinstance(kind, str) and isinstance(name, str) and kind and name:
                return kind, name
    return None


class PodFacts(NamedTuple):
    """The parts of a pod that decisions depend on (a NamedTuple: made once per admission and
    per extender call, where a frozen dataclass's field-by-field __init__ costs four times as
    much)."""

    namespace: str
    name: str
    images: tuple[str, ...]
    """Container and init container images, deduplicated, in pod order."""
    pull: PullSecretsRef
    skip: bool
    prefer_arch: tuple[str, ...]
    """From `archfit.io/prefer-arch`, most preferred first; empty when absent."""
    workload: WorkloadId
    decided: bool
    """archfit decided the pod already, at CREATE or on its release from the gate (its
    PLATFORMS_ANNOTATION or RELEASED_ANNOTATION): its own constraint keeps it where its images
    run, so the extender does not wait on a registry for it. The annotations are the pod
    owner's to forge, which only changes how long archfit waits for that very pod."""


class PodError(InputError):
    """The pod JSON lacks something archfit needs, or has the wrong type."""


class ShapeError(InputError):
    """A part of the pod a decision reads (its labels, nodeSelector, affinity or
    tolerations) is not shaped as the API defines it."""


class Placement(NamedTuple):
    """What of a pod spec says where it may run, its shape checked (`read_placement`)."""

    node_selector: Mapping[str, Any]
    node_affinity: Mapping[str, Any]
    """`spec.affinity.nodeAffinity` ({} when absent), its required terms checked to be
    objects (a null term is left as it is: the apiserver reads it as an empty term)."""


class PodView(NamedTuple):
    """The parts of a pod a decision reads, each read and its shape checked once
    (`read_pod`), so the webhook's mutation, the gate and the releaser read fields, not
    paths. Read-only: the mappings are the pod's own, never edited (a NamedTuple, as
    PodFacts, for its cost)."""

    obj: Mapping[str, Any]
    """The pod's JSON as it came."""
    facts: PodFacts
    metadata: Mapping[str, Any]
    labels: Mapping[str, Any]
    annotations: Mapping[str, Any]
    spec: Mapping[str, Any]
    placement: Placement


def facts(pod: Mapping[str, Any]) -> PodFacts:
    """Extract PodFacts from a v1.Pod. Raises PodError naming the bad field."""
    metadata = read_mapping(pod.get("metadata"), "Pod.metadata")
    spec = read_mapping(pod.get("spec"), "Pod.spec")
    namespace = _string(metadata.get("namespace"), "Pod.metadata.namespace") or "default"
    name = _string(metadata.get("name"), "Pod.metadata.name") or _string(
        metadata.get("generateName"), "Pod.metadata.generateName"
    )
    annotations = read_mapping(metadata.get("annotations"), "Pod.metadata.annotations")
    _bounded(annotations, "Pod.metadata.annotations", MAX_ANNOTATIONS)
    return PodFacts(
        namespace=namespace,
        name=name,
        images=images(spec),
        pull=PullSecretsRef(
            namespace=namespace,
            names=_pull_secret_names(spec),
            service_account=_string(spec.get("serviceAccountName"), "Pod.spec.serviceAccountName")
            or "default",
        ),
        skip=_string(annotations.get(SKIP_ANNOTATION), f"annotations[{SKIP_ANNOTATION}]")
        .strip()
        .lower()
        == "true",
        prefer_arch=prefer_arch(annotations.get(PREFER_ARCH_ANNOTATION)),
        workload=workload_of(namespace, name, controller_of(metadata.get("ownerReferences"))),
        decided=PLATFORMS_ANNOTATION in annotations or RELEASED_ANNOTATION in annotations,
    )


def read_pod(pod: Mapping[str, Any]) -> PodView:
    """The PodView of a v1.Pod. Raises PodError (as `facts`) or ShapeError naming the bad
    field."""
    pod_facts = facts(pod)
    # `facts` checked these are objects or null.
    metadata: Mapping[str, Any] = pod.get("metadata") or {}
    spec: Mapping[str, Any] = pod.get("spec") or {}
    placement = read_placement(spec)
    return PodView(
        obj=pod,
        facts=pod_facts,
        metadata=metadata,
        labels=read_mapping(metadata.get("labels"), "metadata.labels", ShapeError),
        annotations=metadata.get("annotations") or {},
        spec=spec,
        placement=placement,
    )


def read_placement(spec: Mapping[str, Any]) -> Placement:
    """The Placement of a pod spec (a pod's or a template's). Raises ShapeError naming the
    field that is not shaped as the API defines it."""
    node_selector = read_mapping(spec.get("nodeSelector"), "spec.nodeSelector", ShapeError)
    node_affinity = read_mapping_at(spec, "affinity.nodeAffinity", ShapeError, within="spec")
    if node_affinity:
        required = read_mapping(
            node_affinity.get(REQUIRED_TERMS), "requiredDuringScheduling", ShapeError
        )
        terms = required.get("nodeSelectorTerms")
        if terms is not None and not isinstance(terms, list):
            raise ShapeError("nodeSelectorTerms must be a list")
        for index, term in enumerate(terms or ()):
            read_mapping(term, f"nodeSelectorTerms[{index}]", ShapeError)
    return Placement(node_selector, node_affinity)


def skip_reason(pod: PodFacts, excluded_namespaces: Collection[str]) -> str | None:
    """Why archfit leaves this pod alone (annotation, excluded_namespace, no_images), or None."""
    if pod.skip:
        return "annotation"
    if pod.namespace in excluded_namespaces:
        return "excluded_namespace"
    if not pod.images:
        return "no_images"
    return None


def images(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """Every image the pod pulls before it runs: init containers and containers, deduplicated.

    Ephemeral containers are added after scheduling, so they never matter here.
    """
    seen: dict[str, None] = {}
    for key in ("initContainers", "containers"):
        containers = spec.get(key)
        if containers is None:
            continue
        if not isinstance(containers, list):
            raise PodError(f"Pod.spec.{key} must be a list")
        _bounded(containers, f"Pod.spec.{key}", MAX_POD_CONTAINERS)
        for index, container in enumerate(containers):
            image = container.get("image") if type(container) is dict else None
            image = image.strip() if type(image) is str else ""
            if not image:
                # Only a bad container names its field: the common case formats no text.
                where = f"Pod.spec.{key}[{index}]"
                image = _string(read_mapping(container, where).get("image"), f"{where}.image")
                image = image.strip()
                if not image:
                    raise PodError(f"{where}.image is empty")
            seen.setdefault(image, None)
    return tuple(seen)


def pod_template(kind: str, obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The pod template (metadata and spec) a workload object makes its pods from: its
    `spec.template`, a CronJob's `spec.jobTemplate.spec.template`; a Pod is its own.

    Raises PodError naming a field that is not an object.
    """
    if kind == "Pod":
        return obj
    spec = read_mapping(obj.get("spec"), "spec")
    if kind == "CronJob":
        job = read_mapping(spec.get("jobTemplate"), "spec.jobTemplate")
        spec = read_mapping(job.get("spec"), "spec")
    return read_mapping(spec.get("template"), "spec.template")


def template_spec(kind: str, obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The pod spec of `pod_template`. Raises PodError naming a field that is not an object."""
    where = "spec" if kind == "Pod" else "spec.template.spec"
    return read_mapping(pod_template(kind, obj).get("spec"), where)


def prefer_arch(value: object) -> tuple[str, ...]:
    """Parse `archfit.io/prefer-arch: arm64` or `amd64,arm64` into a preference order."""
    if not isinstance(value, str):
        return ()
    # The same alias table as images and nodes, so "aarch64" means arm64.
    order: dict[str, None] = {}
    for item in value.split(","):
        if item.strip():
            order.setdefault(normalize("linux", item.strip()).architecture, None)
    return tuple(order)


def annotation_preference(order: Sequence[str]) -> dict[str, int]:
    """`amd64,arm64` (prefer_arch's order) → {amd64: 10, arm64: 5}: first is best, unlisted
    get 0."""
    step = MAX_SCORE // len(order)
    return {arch: MAX_SCORE - i * step for i, arch in enumerate(order)}


def _pull_secret_names(spec: Mapping[str, Any]) -> tuple[str, ...]:
    refs = spec.get("imagePullSecrets")
    if refs is None:
        return ()
    if not isinstance(refs, list):
        raise PodError("Pod.spec.imagePullSecrets must be a list")
    _bounded(refs, "Pod.spec.imagePullSecrets", MAX_PULL_SECRETS)
    names: list[str] = []
    for index, ref in enumerate(refs):
        name = _string(read_mapping(ref, f"Pod.spec.imagePullSecrets[{index}]").get("name"), "name")
        if name:
            names.append(name)
    return tuple(names)


def _bounded(value: Sized, where: str, limit: int) -> None:
    if len(value) > limit:
        raise PodError(f"{where} has {len(value)} entries, more than any real pod ({limit})")


def read_mapping(value: object, where: str, error: type[Exception] = PodError) -> Mapping[str, Any]:
    """A field of a Kubernetes object that must be an object: {} when it is absent or null,
    else `error` naming the field `where`. The one reader for pods, the webhook's patches
    and the audit's workloads alike."""
    if type(value) is dict:  # what JSON decodes to: skip the ABC check on the hot path
        return value
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise error(f"{where} must be an object")
    return value


def read_mapping_at(
    obj: Mapping[str, Any], path: str, error: type[Exception] = PodError, *, within: str = ""
) -> Mapping[str, Any]:
    """The object at the dotted `path` of `obj` (`"spec.affinity.nodeAffinity"`), each level
    read as `read_mapping` reads one: {} once a level is absent or null, else `error` naming
    the first level that is not an object by its path (after `within.`, the name of `obj`,
    when given)."""
    found: Mapping[str, Any] = obj
    for key in _path_keys(path):
        value = found.get(key)
        if type(value) is not dict:  # absent, null, another Mapping, or wrong
            return _read_mapping_named(obj, path, error, within) if value is not None else {}
        found = value
    return found


def _read_mapping_named(
    obj: Mapping[str, Any], path: str, error: type[Exception], within: str
) -> Mapping[str, Any]:
    """read_mapping_at's walk, naming each level as it goes: for what is not a plain dict."""
    where = within
    found: Mapping[str, Any] = obj
    for key in _path_keys(path):
        where = f"{where}.{key}" if where else key
        found = read_mapping(found.get(key), where, error)
    return found


@functools.lru_cache(maxsize=64)
def _path_keys(path: str) -> tuple[str, ...]:
    """`"spec.affinity"` → ("spec", "affinity"): the few dotted paths the code names, split once."""
    return tuple(path.split("."))


def _string(value: object, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise PodError(f"{where} must be a string")
    return value
