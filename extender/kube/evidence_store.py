"""Learned evidence shared through a ConfigMap in archfit's namespace, for clusters without
Redis: the watcher's leader writes each entry as one key, every replica reads it again every
`watcher.evidenceSyncSeconds`, and `archfit evidence` reads and writes it with the operator's
kubeconfig (docs/operations.md, "Learned evidence").

A ConfigMap holds at most 1 MiB; the evidence book keeps far fewer entries than fit
(extender.resolution.evidence_book.MAX_ENTRIES). Writes are merge patches of `data` keys, so the
leader and an operator's `clear` never overwrite each other's other keys.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import structlog

from extender.kube.client.api import STRATEGIC_MERGE_PATCH, KubeApi
from extender.kube.client.calls import DaemonCalls
from extender.kube.client.errors import ApiError, short_error
from extender.kube.client.watching import REQUEST_TIMEOUT

log = structlog.get_logger("archfit.evidence")

_LABELS = {"app.kubernetes.io/name": "archfit", "app.kubernetes.io/component": "evidence"}


class ConfigMapEvidence:
    """extender.resolution.evidence_book.SharedEvidence over the ConfigMap `name` in `namespace`."""

    def __init__(self, api: KubeApi, namespace: str, name: str) -> None:
        self._api = api
        self._namespace = namespace
        self._name = name
        self._collection = f"/api/v1/namespaces/{namespace}/configmaps"
        self._calls = DaemonCalls(REQUEST_TIMEOUT[1])
        self.missing = False
        """The last read found no ConfigMap (404): nothing learned yet, or the wrong
        namespace, which `archfit evidence` says."""

    async def read(self) -> dict[str, str] | None:
        try:
            found = await self._calls.run(
                lambda: self._api.get(f"{self._collection}/{self._name}", timeout=REQUEST_TIMEOUT)
            )
        except ApiError as error:
            if error.status == HTTPStatus.NOT_FOUND:
                self.missing = True
                return {}
            self._failed("read", error)
            return None
        except Exception as error:  # a transport failure: the next sync tries again
            self._failed("read", error)
            return None
        self.missing = False
        return dict(found.get("data") or {})

    async def write(self, entries: dict[str, str]) -> bool:
        return await self._patch(dict(entries))

    async def delete(self, keys: list[str]) -> None:
        if keys:
            await self._patch(dict.fromkeys(keys))

    async def aclose(self) -> None:
        return None

    async def _patch(self, data: dict[str, Any]) -> bool:
        body = {"data": data}
        try:
            try:
                # A null value deletes its key (strategic merge, as the client sent a dict).
                await self._calls.run(
                    lambda: self._api.patch(
                        f"{self._collection}/{self._name}",
                        body,
                        content_type=STRATEGIC_MERGE_PATCH,
                        timeout=REQUEST_TIMEOUT,
                    )
                )
            except ApiError as error:
                if error.status != HTTPStatus.NOT_FOUND:
                    raise
                made_map = {
                    "metadata": {"name": self._name, "labels": _LABELS},
                    "data": {k: v for k, v in data.items() if v is not None},
                }
                await self._calls.run(
                    lambda: self._api.post(self._collection, made_map, timeout=REQUEST_TIMEOUT)
                )
        except Exception as error:  # kept unsaved: written again at the next sync
            self._failed("write", error)
            return False
        return True

    def _failed(self, what: str, error: BaseException) -> None:
        log.warning(
            "evidence_store_failed",
            what=what,
            configmap=f"{self._namespace}/{self._name}",
            error=short_error(error),
        )
