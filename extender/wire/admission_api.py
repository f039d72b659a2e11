"""The AdmissionReview wire types (admission.k8s.io/v1): parse a request, render a response.

Pure functions. archfit never denies: every answer allows the object, with a JSONPatch
(the pod webhook) or warnings (the workload warnings) or neither. See docs/webhook.md.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from extender.errors import WireError as WireError
from extender.wire import wire_json

API_VERSION = "admission.k8s.io/v1"


class AdmissionRequest(NamedTuple):
    """The fields of `AdmissionReview.request` the webhook reads (a NamedTuple: one is made
    per review, and a frozen dataclass's __init__ costs four times as much)."""

    uid: str
    kind: Mapping[str, str]
    """group, version and kind of the object."""
    operation: str
    namespace: str
    sub_resource: str
    dry_run: bool
    object: Mapping[str, Any]
    old_object: Mapping[str, Any] | None = None
    """The object before an UPDATE; None on CREATE."""
    pod_create: bool = False
    """A pod's CREATE (no subresource): what the pod webhook decides."""


def parse_review(body: bytes) -> AdmissionRequest:
    """Decode an AdmissionReview body. Raises WireError naming the problem."""
    try:
        data = wire_json.loads(body)
    except wire_json.JsonError as error:
        raise WireError(str(error)) from error
    if not isinstance(data, dict):
        raise WireError("body must be a JSON object (AdmissionReview)")
    if data.get("apiVersion") != API_VERSION or data.get("kind") != "AdmissionReview":
        raise WireError(f"body must be an AdmissionReview of {API_VERSION}")
    request = data.get("request")
    if not isinstance(request, dict):
        raise WireError("request must be an object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise WireError("request.uid must be a non-empty string")
    if not uid.isprintable():
        # kube-apiserver's uids are UUIDs; a lone surrogate (which the standard library's
        # parser lets through) could not even be written back in the answer.
        raise WireError("request.uid must be printable UTF-8 text")
    kind = request.get("kind")
    if not isinstance(kind, dict):
        raise WireError("request.kind must be an object")
    obj = request.get("object")
    if obj is not None and not isinstance(obj, dict):
        raise WireError("request.object must be an object")
    old = request.get("oldObject")
    if old is not None and not isinstance(old, dict):
        raise WireError("request.oldObject must be an object")
    kinds = {str(k): v for k, v in kind.items() if isinstance(v, str)}
    operation = _string(request, "operation")
    sub_resource = _string(request, "subResource")
    return AdmissionRequest(
        uid=uid,
        kind=kinds,
        operation=operation,
        namespace=_string(request, "namespace"),
        sub_resource=sub_resource,
        dry_run=request.get("dryRun") is True,
        object=obj or {},
        old_object=old,
        pod_create=operation == "CREATE"
        and not sub_resource
        and kinds.get("group", "") == ""
        and kinds.get("kind") == "Pod",
    )


def render_allowed(
    uid: str, patch: Sequence[Mapping[str, Any]] = (), warnings: Sequence[str] = ()
) -> bytes:
    """An AdmissionReview that allows the object, applying `patch` (RFC 6902) if any.

    Raises wire_json.JsonError when the patch or a warning (parts of the pod copied) cannot
    be encoded.
    """
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(wire_json.dumps(list(patch))).decode("ascii")
    if warnings:
        response["warnings"] = list(warnings)
    return wire_json.dumps(
        {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}
    )


def _string(request: Mapping[str, Any], key: str) -> str:
    value = request.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise WireError(f"request.{key} must be a string")
    return value
