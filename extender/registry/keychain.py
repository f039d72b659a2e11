"""Which credentials to try for an image, in kubelet's order.

First the pod's pull secrets and its ServiceAccount's (one keyring, most specific key
first), then kubelet's default keyring: the mounted docker config.json together with the
credential provider plugins' answers; anonymous access comes last.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import structlog

from extender.core.pods import PullSecretsRef
from extender.core.text import error_text
from extender.registry.plugins import MAX_CONFIG_BYTES, CredentialPlugins
from extender.registry.pure.credentials import (
    Credential,
    CredentialChain,
    CredentialError,
    Keyring,
    PullSecret,
    config_file_entries,
    keyring,
)
from extender.registry.pure.reference import Reference

log = structlog.get_logger(__name__)
_RECHECK_SECONDS = 10.0


class SecretSource(Protocol):
    """Reads a pod's pull secrets: its own imagePullSecrets, then its ServiceAccount's."""

    async def pull_secrets(self, pull: PullSecretsRef) -> Sequence[PullSecret]:
        """The Secrets in kubelet's order; missing ones are left out."""
        ...


class QueuedSecretSource:
    """A SecretSource that runs at most `limit` lookups at once; the others wait their turn.

    For batches that look up thousands of images at once (`archfit audit`): the API reads
    behind a lookup are few and cached, and waiting beats failing over to anonymous access.
    """

    def __init__(self, inner: SecretSource, limit: int) -> None:
        self._inner = inner
        self._gate = asyncio.Semaphore(limit)

    async def pull_secrets(self, pull: PullSecretsRef) -> Sequence[PullSecret]:
        async with self._gate:
            return await self._inner.pull_secrets(pull)


class Keychain:
    """Credential chains for images, from a SecretSource and a docker config file."""

    def __init__(
        self,
        secrets: SecretSource | None = None,
        docker_config_path: str = "",
        plugins: CredentialPlugins | None = None,
    ) -> None:
        self._secrets = secrets
        self._plugins = plugins
        self._path = Path(docker_config_path) if docker_config_path else None
        self._file_ring = Keyring()
        self._file_stamp: tuple[float, int] | None = None
        self._checked = float("-inf")

    async def credentials(self, ref: Reference, pull: PullSecretsRef | None) -> CredentialChain:
        """The credentials to try for `ref`, in order, without duplicates."""
        found: list[Credential] = []
        if self._secrets is not None and pull is not None:
            found += await self._from_secrets(ref, pull)
        plugin_entries: tuple[tuple[str, Credential], ...] = ()
        failed: list[str] = []
        if self._plugins is not None:
            plugin_entries, failed = await self._plugins.entries(ref.name)
        # kubelet merges its providers (docker config file, plugins) into one keyring, so
        # the most specific key wins across them.
        found += Keyring(self._config_file().entries + plugin_entries).lookup(ref)
        unique: dict[str, Credential] = {}
        for cred in found:
            unique.setdefault(cred.identity, cred)
        return CredentialChain(tuple(unique.values()), tuple(failed))

    async def _from_secrets(self, ref: Reference, pull: PullSecretsRef) -> list[Credential]:
        assert self._secrets is not None
        try:
            secrets = await self._secrets.pull_secrets(pull)
        except Exception as error:  # RBAC, API down: go on anonymously, as kubelet does
            log.warning(
                "pull_secrets_unavailable",
                namespace=pull.namespace,
                error=type(error).__name__,
                detail=error_text(error),
            )
            return []
        ring, problems = keyring(secrets)
        for problem in problems:
            log.warning("pull_secret_unreadable", problem=problem)
        return ring.lookup(ref)

    def _config_file(self) -> Keyring:
        if self._path is None:
            return self._file_ring
        now = time.monotonic()
        if now - self._checked < _RECHECK_SECONDS:
            return self._file_ring
        self._checked = now
        try:
            stat = self._path.stat()
        except OSError:
            if self._file_stamp is not None:
                log.warning("docker_config_missing", path=str(self._path))
            self._file_ring, self._file_stamp = Keyring(), None
            return self._file_ring
        stamp = (stat.st_mtime, stat.st_size)
        if stamp != self._file_stamp:
            self._file_stamp = stamp
            self._file_ring = _load_config(self._path, stat.st_size)
        return self._file_ring


def _load_config(path: Path, size: int) -> Keyring:
    source = f"docker config {path}"
    if size > MAX_CONFIG_BYTES:
        log.warning("docker_config_too_large", path=str(path), size=size)
        return Keyring()
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_CONFIG_BYTES)
        return Keyring(tuple(config_file_entries(raw, source)))
    except (OSError, CredentialError) as error:
        log.warning("docker_config_unreadable", path=str(path), problem=error_text(error))
        return Keyring()
