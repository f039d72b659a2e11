"""archfit's scheduling gate: how a pod is held at CREATE and how it is released.

Pure: JSONPatch operations over the pod as the API serves it. A pod whose images are not
all known within the webhook's deadline gets the gate (kube-scheduler, Karpenter and
Cluster Autoscaler all leave a gated pod alone), a label that makes held pods cheap to
list, and an annotation that says why. The releaser later writes the constraints and
removes the gate in one update, guarded by the pod's uid and resourceVersion. What such an
update may change follows the apiserver's rules for gated pods (KEP-3838,
`ValidatePodUpdate` in k8s.io/kubernetes pkg/apis/core/validation): required terms only
gain expressions, preferred terms and tolerations may be added, and the scheduler name
never changes.
See docs/webhook.md, "Held pods".
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from extender.core.json_patch import pointer, set_in_metadata
from extender.core.pods import RELEASED_ANNOTATION, PodView
from extender.errors import ConflictError

GATE = "archfit.io/platforms-unknown"
"""The scheduling gate's name."""
GATED_LABEL = "archfit.io/gated"
"""Label on held pods (value `true`), so the releaser lists and watches only those."""
GATED_REASON_ANNOTATION = "archfit.io/gated-reason"
"""Why the pod is held: the images whose platforms were unknown, and what the lookup said."""

GATED_SELECTOR = f"{GATED_LABEL}=true"


class PodChanged(ConflictError):
    """The pod changed since it was read (409, or the gate moved): read it again."""


class ReleaseRefused(ConflictError):
    """The apiserver refused the release patch (422): the constraints break its rules."""


_MAX_REASON = 512


def never_held(excluded_namespaces: Collection[str], own_namespace: str) -> frozenset[str]:
    """The namespaces whose pods are never held, by the webhook or by the admission policy:
    every excluded one, and kube-system and archfit's own whatever the settings say (the
    control plane must start without archfit, and a held archfit could never release itself).
    """
    return frozenset({*excluded_namespaces, "kube-system", own_namespace})


def is_gated(pod: Mapping[str, Any]) -> bool:
    """Whether archfit's gate is among the pod's scheduling gates."""
    return _gate_index(pod.get("spec")) is not None


def gate_operations(pod: PodView, reason: str) -> list[dict[str, Any]]:
    """Hold a pod at CREATE: the gate, the label and the reason. Nothing if already held,
    so a reinvocation of the webhook adds nothing."""
    spec = pod.spec
    if _gate_index(spec) is not None:
        return []
    gate = {"name": GATE}
    ops: list[dict[str, Any]] = []
    if spec.get("schedulingGates"):
        ops.append({"op": "add", "path": "/spec/schedulingGates/-", "value": gate})
    else:
        ops.append({"op": "add", "path": "/spec/schedulingGates", "value": [gate]})
    metadata = pod.metadata
    ops += _set_in(metadata, "labels", GATED_LABEL, "true")
    ops += _set_in(metadata, "annotations", GATED_REASON_ANNOTATION, reason[:_MAX_REASON])
    return ops


def lift_operations(pod: PodView) -> list[dict[str, Any]]:
    """At CREATE, take back a hold the admission policy put on a pod whose images the
    webhook has now decided (kube-apiserver runs policies before webhooks): the gate, the
    label and the reason. Nothing if the pod is not held."""
    index = _gate_index(pod.spec)
    if index is None:
        return []
    where = f"/spec/schedulingGates/{index}"
    ops: list[dict[str, Any]] = [
        {"op": "test", "path": f"{where}/name", "value": GATE},
        {"op": "remove", "path": where},
    ]
    if GATED_LABEL in pod.labels:
        ops.append({"op": "remove", "path": pointer("metadata", "labels", GATED_LABEL)})
    if GATED_REASON_ANNOTATION in pod.annotations:
        path = pointer("metadata", "annotations", GATED_REASON_ANNOTATION)
        ops.append({"op": "remove", "path": path})
    return ops


def release_operations(
    pod: Mapping[str, Any],
    constraints: Sequence[Mapping[str, Any]],
    released: str,
) -> list[dict[str, Any]]:
    """Write `constraints` (the mutation's operations) and remove the gate, in one patch.

    The first operations pin the pod: its resourceVersion, so the apiserver refuses the patch
    (409) if the pod changed since it was read, and its uid, so a pod made since under the
    same name (a StatefulSet's replacement) fails the `test` rather than receive what was
    decided for another pod. The releaser then reads it again. The label and the reason go;
    `archfit.io/released` says how it was released.
    """
    metadata = pod.get("metadata") or {}
    ops: list[dict[str, Any]] = [
        {
            "op": "replace",
            "path": "/metadata/resourceVersion",
            "value": str(metadata.get("resourceVersion") or ""),
        },
        {"op": "test", "path": "/metadata/uid", "value": str(metadata.get("uid") or "")},
        *(dict(op) for op in constraints),
    ]
    index = _gate_index(pod.get("spec"))
    if index is not None:
        where = f"/spec/schedulingGates/{index}"
        ops += [
            {"op": "test", "path": f"{where}/name", "value": GATE},
            {"op": "remove", "path": where},
        ]
    labels = metadata.get("labels") or {}
    if GATED_LABEL in labels:
        ops.append({"op": "remove", "path": pointer("metadata", "labels", GATED_LABEL)})
    annotations = metadata.get("annotations") or {}
    if GATED_REASON_ANNOTATION in annotations:
        ops.append(
            {"op": "remove", "path": pointer("metadata", "annotations", GATED_REASON_ANNOTATION)}
        )
    # The constraints may have just created the annotations map; the reason was in it.
    if annotations or any(op.get("path") == "/metadata/annotations" for op in constraints):
        path = pointer("metadata", "annotations", RELEASED_ANNOTATION)
        ops.append({"op": "add", "path": path, "value": released[:_MAX_REASON]})
    else:
        value = {RELEASED_ANNOTATION: released[:_MAX_REASON]}
        ops.append({"op": "add", "path": "/metadata/annotations", "value": value})
    return ops


def _gate_index(spec: object) -> int | None:
    """Where archfit's gate is among the scheduling gates of `spec` (a pod's, read or not)."""
    gates = spec.get("schedulingGates") if isinstance(spec, Mapping) else None
    for index, gate in enumerate(gates if isinstance(gates, list) else ()):
        if isinstance(gate, Mapping) and gate.get("name") == GATE:
            return index
    return None


def _set_in(metadata: Mapping[str, Any], member: str, key: str, value: str) -> list[dict[str, Any]]:
    return [set_in_metadata(metadata, member, key, value)]
