"""The ImagePlatforms object (archfit.io/v1alpha1, cluster-scoped) that archfit's
MutatingAdmissionPolicy reads as its parameter: whether the cluster serves the API, writing
the object (extender.controllers.publisher decides when), and watching it (every replica reads
it as a cache tier: extender.resolution.shared_tier)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import msgspec
import structlog

from extender.core.parameter import EMPTY_TABLE, ParameterSpec, PublishedTable
from extender.errors import ConflictError
from extender.kube.client.api import KubeApi
from extender.kube.client.calls import blocking
from extender.kube.client.errors import ApiError, short_error
from extender.kube.client.watching import REQUEST_TIMEOUT, Expired, ListMeta, ListWatch

log = structlog.get_logger("archfit.policy")

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


def read_object(api: KubeApi, name: str) -> dict[str, Any] | None:
    """The whole object (spec and status), or None when there is none. Blocking."""
    try:
        return _mapping(api.get(f"{_OBJECTS}/{name}", timeout=_TIMEOUT))
    except ApiError as error:
        if error.status == HTTPStatus.NOT_FOUND:
            return None
        raise


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


class _Meta(msgspec.Struct, rename="camel", frozen=True):
    name: str = ""
    resource_version: str = ""


class _Object(msgspec.Struct, frozen=True):
    metadata: _Meta = _Meta()
    spec: ParameterSpec = ParameterSpec()


class _List(msgspec.Struct, frozen=True):
    metadata: ListMeta = ListMeta()
    items: list[msgspec.Raw] | None = None


_decode_list = msgspec.json.Decoder(_List).decode
_decode_object = msgspec.json.Decoder(_Object).decode

OnTable = Callable[[PublishedTable], None]
"""Told, in the event loop, the object as published now (an empty table when it is gone)."""


class ParameterWatch:
    """List-watch of the one ImagePlatforms object (a field selector on its name), each
    version read back as a PublishedTable."""

    def __init__(self, api: KubeApi, name: str) -> None:
        self._api = api
        self._query = {"fieldSelector": f"metadata.name={name}"}
        self._on_table: OnTable | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watch = ListWatch(
            "archfit-policy-table",
            self.list_all,
            self.watch_from,
            log,
            ("policy_table_watch_expired", "policy_table_watch_error"),
        )

    def start(self, on_table: OnTable) -> None:
        self._on_table = on_table
        self._loop = asyncio.get_running_loop()
        self._watch.start()

    async def stop(self) -> None:
        await self._watch.stop()

    def list_all(self) -> str:
        try:
            data = self._api.request("GET", _OBJECTS, query=self._query, timeout=REQUEST_TIMEOUT)
        except ApiError as error:
            if error.status == 410:
                raise Expired from error
            raise
        found = _decode_list(data)
        items = found.items or []
        self._tell(_table_of(items[0]) if items else EMPTY_TABLE)
        return found.metadata.resource_version

    def watch_from(self, version: str) -> str:
        return self._watch.follow(self._api, _OBJECTS, version, self._apply, self._query)

    def _apply(self, kind: str, raw: msgspec.Raw, version: str) -> str:
        meta = _decode_meta(raw).metadata
        if kind in ("ADDED", "MODIFIED"):
            self._tell(_table_of(raw))
        elif kind == "DELETED":
            self._tell(EMPTY_TABLE)
        return meta.resource_version or version

    def _tell(self, table: PublishedTable) -> None:
        loop, on_table = self._loop, self._on_table
        if loop is not None and on_table is not None and not loop.is_closed():
            loop.call_soon_threadsafe(on_table, table)


class _Metadata(msgspec.Struct, frozen=True):
    metadata: _Meta = _Meta()


_decode_meta = msgspec.json.Decoder(_Metadata).decode


def _table_of(raw: msgspec.Raw) -> PublishedTable:
    """The object read back; an empty table (this replica answers without it) when a field
    has the wrong type (an edit by hand), said in one line."""
    try:
        return PublishedTable.of(_decode_object(raw).spec)
    except msgspec.ValidationError as error:
        log.warning("policy_table_unreadable", error=str(error))
        return EMPTY_TABLE


def _mapping(value: object) -> dict[str, Any]:
    """The answer as a JSON object (anything else counts as an empty one)."""
    return value if isinstance(value, dict) else {}
