"""Reads pods' pull secrets from the API server, as kubelet would, cached on a short TTL.

Implements `extender.registry.keychain.SecretSource`. The API client is synchronous (and
retries), so each read runs in a daemon thread that shutdown never waits for.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import time
from collections.abc import Callable, Mapping, Sequence
from http import HTTPStatus
from typing import Any

import structlog

from extender.core.pods import PullSecretsRef
from extender.kube.client.api import KubeApi
from extender.kube.client.calls import DaemonCalls
from extender.kube.client.errors import ApiError
from extender.registry.pure.credentials import PullSecret
from extender.ttlmap import Clock, TTLMap

log = structlog.get_logger(__name__)
_MAX_ENTRIES = 4096

_Key = tuple[str, str, str]
"""(kind, namespace, name)"""


class KubeSecretSource:
    """Secrets and ServiceAccounts read through the API, reused for `ttl_seconds`.

    A missing Secret or ServiceAccount is skipped (kubelet warns and goes on). Other API
    errors propagate, and the caller goes on anonymously. The objects are cached, never
    logged.
    """

    def __init__(
        self,
        api: KubeApi,
        ttl_seconds: float = 30.0,
        *,
        request_timeout_seconds: float = 5.0,
        clock: Clock = time.monotonic,
    ) -> None:
        self._api = api
        self._ttl = ttl_seconds
        self._timeout = request_timeout_seconds
        self._cache: TTLMap[_Key, Any] = TTLMap(_MAX_ENTRIES, clock)
        """Read objects, and None for a Secret that does not exist, for `ttl_seconds`."""
        self._calls = DaemonCalls(request_timeout_seconds)

    async def aclose(self) -> None:
        """Wait out reads still running (threads cannot be cancelled)."""
        await self._cache.aclose()

    async def pull_secrets(self, pull: PullSecretsRef) -> Sequence[PullSecret]:
        """The pod's imagePullSecrets, then its ServiceAccount's, de-duplicated, in order."""
        names = list(dict.fromkeys(pull.names))
        if pull.service_account:
            for name in await self._service_account_secrets(pull.namespace, pull.service_account):
                if name not in names:
                    names.append(name)
        found = await asyncio.gather(*(self._secret(pull.namespace, name) for name in names))
        return [secret for secret in found if secret is not None]

    async def _service_account_secrets(self, namespace: str, name: str) -> tuple[str, ...]:
        result: tuple[str, ...] = await self._cached(
            ("serviceaccount", namespace, name), lambda: self._read_service_account(namespace, name)
        )
        return result

    async def _secret(self, namespace: str, name: str) -> PullSecret | None:
        result: PullSecret | None = await self._cached(
            ("secret", namespace, name), lambda: self._read_secret(namespace, name)
        )
        return result

    async def _cached(self, key: _Key, read: Callable[[], Any]) -> Any:
        return await self._cache.get_or_load(key, lambda: self._calls.run(read), self._ttl_of)

    def _ttl_of(self, _value: Any) -> float:
        return self._ttl

    def _read_service_account(self, namespace: str, name: str) -> tuple[str, ...]:
        try:
            account = self._api.get(
                f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}", timeout=self._timeout
            )
        except ApiError as error:
            if error.status == HTTPStatus.NOT_FOUND:
                return ()
            raise
        refs = account.get("imagePullSecrets") or []
        return tuple(str(ref["name"]) for ref in refs if isinstance(ref, dict) and ref.get("name"))

    def _read_secret(self, namespace: str, name: str) -> PullSecret | None:
        try:
            secret = self._api.get(
                f"/api/v1/namespaces/{namespace}/secrets/{name}", timeout=self._timeout
            )
        except ApiError as error:
            if error.status == HTTPStatus.NOT_FOUND:
                log.warning("pull_secret_missing", namespace=namespace, secret=name)
                return None
            raise
        return PullSecret(
            namespace, name, str(secret.get("type") or ""), _decode(secret.get("data") or {})
        )


def _decode(data: Mapping[str, Any]) -> dict[str, bytes]:
    """Secret data as the API sends it (base64 text) to bytes; undecodable keys are dropped."""
    decoded: dict[str, bytes] = {}
    for key, value in data.items():
        raw = value.encode() if isinstance(value, str) else value
        if not isinstance(raw, bytes):
            continue
        try:
            decoded[key] = base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError):
            continue
    return decoded
