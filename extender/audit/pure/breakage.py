"""Pods broken now by an architecture mismatch, from pod statuses and events.

Two symptoms: a pull that found no manifest for the node's platform (`ErrImagePull` /
`ImagePullBackOff`), and a binary for another architecture (`exec format error`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from extender.audit.pure.workloads import Owners, WorkloadKey
from extender.core.mismatch import EXEC_FORMAT, PULL_TEXTS
from extender.core.text import cut

NO_MATCHING_MANIFEST = "no matching manifest"
EXEC_FORMAT_ERROR = EXEC_FORMAT

# The runtimes' own texts (extender.core.mismatch cites where each comes from).
_MANIFEST_WORDS = PULL_TEXTS
_PULL_REASONS = frozenset({"ErrImagePull", "ImagePullBackOff"})
_IMAGE_IN_MESSAGE = re.compile(r'image "([^"]+)"')
_FIELD_PATH = re.compile(r"spec\.(initContainers|containers)\{([^}]+)\}")
_MAX_MESSAGE = 300


@dataclass(frozen=True, slots=True)
class Breakage:
    """One pod that cannot run an image on the node it is bound to."""

    namespace: str
    pod: str
    workload: WorkloadKey | None
    image: str
    node: str
    node_arch: str
    problem: str
    """NO_MATCHING_MANIFEST or EXEC_FORMAT_ERROR."""
    message: str
    """What kubelet said, cut short."""


def find(
    pods: Iterable[Mapping[str, Any]],
    events: Iterable[Mapping[str, Any]],
    owners: Owners,
    node_arch: Mapping[str, str],
) -> list[Breakage]:
    """Every broken pod and image, once, from statuses first and then events.

    An event belongs to the pod whose uid it names, as `kubectl describe` matches them: a pod
    recreated under the same name (a StatefulSet's) is not broken by its predecessor's events.
    """
    pods = list(pods)
    by_uid = {_meta(pod, "uid"): pod for pod in pods if _meta(pod, "uid")}
    found: dict[tuple[str, str, str, str], Breakage] = {}
    for pod in pods:
        for image, symptom, message in _from_status(pod):
            _add(found, pod, image, symptom, message, owners, node_arch)
    for event in events:
        involved = event.get("involvedObject") or {}
        if involved.get("kind") != "Pod":
            continue
        subject = by_uid.get(str(involved.get("uid") or ""))
        text = str(event.get("message") or "")
        problem = _problem(text)
        if subject is None or problem is None:
            continue  # a pod that is gone, or an earlier one of the same name, is not broken now
        image = _image_of_event(subject, str(involved.get("fieldPath") or ""), text)
        _add(found, subject, image, problem, text, owners, node_arch)
    return sorted(found.values(), key=lambda b: (b.namespace, b.pod, b.image, b.problem))


def _from_status(pod: Mapping[str, Any]) -> Iterable[tuple[str, str, str]]:
    status = pod.get("status") or {}
    for key in ("initContainerStatuses", "containerStatuses"):
        for container in status.get(key) or []:
            image = str(container.get("image") or "")
            state = container.get("state") or {}
            waiting = state.get("waiting") or {}
            message = str(waiting.get("message") or "")
            if waiting.get("reason") in _PULL_REASONS and _problem(message) == NO_MATCHING_MANIFEST:
                yield image, NO_MATCHING_MANIFEST, message
            terminated = [
                (state.get("terminated") or {}).get("message"),
                ((container.get("lastState") or {}).get("terminated") or {}).get("message"),
                message,  # RunContainerError carries the runtime's start error
            ]
            for text in terminated:
                if text and EXEC_FORMAT_ERROR in str(text):
                    yield image, EXEC_FORMAT_ERROR, str(text)
                    break


def _problem(message: str) -> str | None:
    lowered = message.lower()
    if any(words in lowered for words in _MANIFEST_WORDS):
        return NO_MATCHING_MANIFEST
    if EXEC_FORMAT_ERROR in lowered:
        return EXEC_FORMAT_ERROR
    return None


def _image_of_event(pod: Mapping[str, Any], field_path: str, message: str) -> str:
    """The container's image named by the event's fieldPath, else the one quoted in it."""
    match = _FIELD_PATH.fullmatch(field_path)
    if match:
        for container in (pod.get("spec") or {}).get(match.group(1)) or []:
            if container.get("name") == match.group(2):
                return str(container.get("image") or "")
    quoted = _IMAGE_IN_MESSAGE.search(message)
    return quoted.group(1) if quoted else ""


def _add(
    found: dict[tuple[str, str, str, str], Breakage],
    pod: Mapping[str, Any],
    image: str,
    problem: str,
    message: str,
    owners: Owners,
    node_arch: Mapping[str, str],
) -> None:
    namespace, name = _meta(pod, "namespace"), _meta(pod, "name")
    node = str((pod.get("spec") or {}).get("nodeName") or "")
    text = " ".join(message.split())  # kubelet messages may span lines
    found.setdefault(
        (namespace, name, image, problem),
        Breakage(
            namespace=namespace,
            pod=name,
            workload=owners.of(pod),
            image=image,
            node=node,
            node_arch=node_arch.get(node, "unknown") if node else "unscheduled",
            problem=problem,
            message=cut(text, _MAX_MESSAGE),
        ),
    )


def _meta(obj: Mapping[str, Any], field: str) -> str:
    return str((obj.get("metadata") or {}).get(field) or "")
