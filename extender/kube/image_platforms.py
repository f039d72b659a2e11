"""The ImagePlatforms object (archfit.io/v1alpha1, cluster-scoped) that archfit's
MutatingAdmissionPolicy reads as its parameter: whether the cluster serves the API, and
writing the object (extender.controllers.publisher decides when)."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from extender.errors import ConflictError
from extender.kube.client.api import KubeApi
from extender.kube.client.calls import blocking
from extender.kube.client.errors import ApiError, short_error

GROUP = "archfit.io"
VERSION = "v1alpha1"
PLURAL = "imageplatforms"
PARAMETER_KIND = "ImagePlatforms"
POLICY_RESOURCE = "mutatingadmissionpolicies"
_TIMEOUT = 10.0
_OBJECTS = f"/apis/{GROUP}/{VERSION}/{PLURAL}"


class ParameterConflict(ConflictError):
    """The object changed since it was read (409): read it again."""


def policy_api_missing(api: KubeApi) -> str:
    """Why the cluster cannot run archfit's policy (no admissionregistration.k8s.io/v1
    MutatingAdmissionPolicy, or no ImagePlatforms CRD), or "" when it can. Blocking."""
    try:
        resources = api.get("/apis/admissionregistration.k8s.io/v1", timeout=_TIMEOUT)
    except ApiError as error:
        return f"admissionregistration.k8s.io/v1 unreadable: {short_error(error)}"
    if not any(r.get("name") == POLICY_RESOURCE for r in resources.get("resources") or ()):
        return "the cluster serves no admissionregistration.k8s.io/v1 MutatingAdmissionPolicy"
    try:
        api.get(f"/apis/{GROUP}/{VERSION}", timeout=_TIMEOUT)
    except ApiError as error:
        if error.status == HTTPStatus.NOT_FOUND:
            return f"the cluster serves no {GROUP}/{VERSION} {PARAMETER_KIND} (apply the CRD)"
        return f"{GROUP}/{VERSION} unreadable: {short_error(error)}"
    return ""


async def check_policy_api(api: KubeApi) -> str:
    """`policy_api_missing`, off the event loop."""
    return await blocking(policy_api_missing, api)


class ImagePlatformsStore:
    """Reads and writes the one ImagePlatforms object."""

    def __init__(self, api: KubeApi, name: str) -> None:
        self._api = api
        self._name = name
        self._version = ""

    async def read(self) -> dict[str, Any] | None:
        """The object's spec, or None when there is none."""
        return await blocking(self._read)

    async def write(self, spec: dict[str, Any], status: dict[str, Any]) -> None:
        """Create or replace the object, guarded by the resourceVersion last read or
        written (ParameterConflict on 409)."""
        await blocking(self._write, spec, status)

    def _read(self) -> dict[str, Any] | None:
        try:
            found = _mapping(self._api.get(f"{_OBJECTS}/{self._name}", timeout=_TIMEOUT))
        except ApiError as error:
            if error.status == HTTPStatus.NOT_FOUND:
                self._version = ""
                return None
            raise
        self._version = str(found.get("metadata", {}).get("resourceVersion") or "")
        spec: dict[str, Any] = found.get("spec") or {}
        return spec

    def _write(self, spec: dict[str, Any], status: dict[str, Any]) -> None:
        body: dict[str, Any] = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": PARAMETER_KIND,
            "metadata": {
                "name": self._name,
                "labels": {"app.kubernetes.io/name": "archfit"},
            },
            "spec": spec,
            "status": status,
        }
        written: dict[str, Any]
        try:
            if self._version:
                body["metadata"]["resourceVersion"] = self._version
                written = _mapping(
                    self._api.put(f"{_OBJECTS}/{self._name}", body, timeout=_TIMEOUT)
                )
            else:
                written = _mapping(self._api.post(_OBJECTS, body, timeout=_TIMEOUT))
        except ApiError as error:
            if error.status == HTTPStatus.CONFLICT:
                self._version = ""
                what = f"{PARAMETER_KIND} {self._name}"
                raise ParameterConflict(f"{what} changed meanwhile") from error
            if error.status == HTTPStatus.NOT_FOUND and self._version:
                self._version = ""  # deleted meanwhile: created on the next write
            raise
        self._version = str(written.get("metadata", {}).get("resourceVersion") or "")


def _mapping(value: object) -> dict[str, Any]:
    """The answer as a JSON object (anything else counts as an empty one)."""
    return value if isinstance(value, dict) else {}
