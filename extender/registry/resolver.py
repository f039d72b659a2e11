"""The registry-backed PlatformResolver, and the factory the app and CLI build it with.

`build_resolver(...)` wires transport, auth, cache and credentials; `aclose()` undoes it.
When a tag's registry fails for a while (`RegistryError.transient`), the tag's last good
digest answers, up to `cache.staleIfErrorSeconds` old; such an answer says it is stale.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import structlog

from extender.config.registry_settings import CacheSettings, RegistrySettings
from extender.core.platforms import Platform, describe_failure
from extender.core.pods import PullSecretsRef
from extender.metrics import Metrics
from extender.registry.cache import CachedSource, KnownDigest, Store
from extender.registry.client import RegistryClient, TagList
from extender.registry.errors import (
    DigestMismatch,
    NoCredentials,
    RegistryError,
    Unauthorized,
)
from extender.registry.hosts import HostTable
from extender.registry.keychain import Keychain, SecretSource
from extender.registry.manifests import INDEX_TYPES
from extender.registry.plugins import CredentialPlugins
from extender.registry.pure.credentials import CredentialChain
from extender.registry.pure.reference import Reference, parse
from extender.registry.source import ImageSource, RegistrySource
from extender.registry.transport import Transport
from extender.registry.verify import IndexVerifier, Verification
from extender.ttlmap import Clock

log = structlog.get_logger(__name__)
Closer = Callable[[], Awaitable[None]]


class RememberingSource(ImageSource, Protocol):
    """An ImageSource that also keeps each tag's last good digest (the cache)."""

    async def last_digest(self, ref: Reference, creds: CredentialChain) -> KnownDigest | None:
        """The tag's last good digest while it may still answer a failing registry."""
        ...


@dataclass(frozen=True, slots=True)
class Stale:
    """Why an answer is a tag's last good digest rather than the registry's word of now."""

    age_seconds: float
    """Seconds since the registry last gave this digest for the tag."""
    error: str
    """The registry's failure (timeout, no connection, 5xx, 429), cut short."""
    kind: str
    """The failure's class: Timeout, Unreachable or UnexpectedStatus."""


@dataclass(frozen=True, slots=True)
class ImageResolution:
    """Everything learned about one image reference."""

    reference: Reference
    """The normalised reference (`docker.io/library/nginx:latest`)."""
    digest: str
    """The digest the reference resolved to (its own digest when pinned)."""
    media_type: str
    platforms: frozenset[Platform]
    """Runnable platforms; empty for an artifact or an index without usable entries."""
    artifact: bool
    """True when the manifest is not a runnable image (its config is not an image config)."""
    stale: Stale | None = None
    """Set when the registry failed and the tag's last good digest answered instead."""


class RegistryResolver:
    """Implements extender.resolution.within_deadline.PlatformResolver by asking registries
    (through a cache)."""

    def __init__(
        self,
        source: RememberingSource,
        keychain: Keychain,
        closers: Sequence[Closer] = (),
        metrics: Metrics | None = None,
        client: RegistryClient | None = None,
        verifier: IndexVerifier | None = None,
    ) -> None:
        self._source = source
        self._keychain = keychain
        self._closers = tuple(closers)
        self._metrics = metrics
        self._client = client
        self._verifier = verifier

    async def platforms(self, image: str, pull: PullSecretsRef) -> frozenset[Platform]:
        """The image's platforms. Raises a RegistryError when it cannot tell."""
        return (await self.resolve(image, pull)).platforms

    async def resolve(self, image: str, pull: PullSecretsRef | None = None) -> ImageResolution:
        """Resolve `image` to its digest and platforms, with the pod's credentials if given.

        Raises InvalidReference for a bad name and other RegistryErrors for registry trouble.
        """
        ref = parse(image)
        creds = await self._keychain.credentials(ref, pull)
        stale: Stale | None = None
        try:
            if ref.digest:
                digest = ref.digest
            else:
                digest, stale = await self._tag_digest(ref, creds)
            try:
                facts = await self._source.facts(ref, digest, creds)
            except DigestMismatch:
                if not ref.digest:
                    # The registry named a digest it cannot serve: its tag answer is as
                    # suspect as the body, so the next lookup asks for the tag again.
                    await self._source.forget_tag(ref, creds)
                raise
        except Unauthorized as error:
            if creds:
                raise
            raise NoCredentials(f"{_credentials_hint(creds)}: {error}") from error
        if stale is not None:
            log.warning(
                "image_answered_stale",
                image=str(ref),
                digest=digest,
                age_seconds=round(stale.age_seconds),
                error=stale.error,
            )
            if self._metrics is not None:
                self._metrics.stale_answer(stale.kind)
        return ImageResolution(
            ref, digest, facts.media_type, facts.platforms, facts.artifact, stale
        )

    async def verify(
        self, image: str, pull: PullSecretsRef | None = None
    ) -> tuple[ImageResolution, Verification]:
        """Resolve `image`, then check its index's entries against their configs
        (extender.registry.verify). Raises as `resolve` does, and for an entry it cannot read.
        """
        if self._verifier is None:
            raise RegistryError("this resolver checks no indexes")
        resolution = await self.resolve(image, pull)
        if resolution.artifact or resolution.media_type not in INDEX_TYPES:
            return resolution, Verification()
        ref = resolution.reference
        creds = await self._keychain.credentials(ref, pull)
        return resolution, await self._verifier.verify(ref, resolution.digest, creds)

    async def tags(
        self, image: str, pull: PullSecretsRef | None, *, page_size: int, pages: int
    ) -> TagList:
        """The tags of `image`'s repository (RegistryClient.tags), with the pod's credentials.

        Raises a RegistryError when they cannot be read.
        """
        if self._client is None:
            raise RegistryError("this resolver reads no tag lists")
        ref = parse(image)
        creds = await self._keychain.credentials(ref, pull)
        return await self._client.tags(ref, creds.items, page_size=page_size, pages=pages)

    async def _tag_digest(self, ref: Reference, creds: CredentialChain) -> tuple[str, Stale | None]:
        """The tag's digest now, else, if the registry fails for a while, its last good one."""
        try:
            return await self._source.digest(ref, creds), None
        except RegistryError as error:
            if not error.transient:
                raise
            known = await self._source.last_digest(ref, creds)
            if known is None:
                raise
            kind = type(error).__name__
            return known.digest, Stale(known.age_seconds, describe_failure(error), kind)

    async def aclose(self) -> None:
        """Stop background fetches and close connections (cache, sessions)."""
        for close in self._closers:
            await close()


def _credentials_hint(creds: CredentialChain) -> str:
    """Why a refusal is about credentials, first, so that a cut reason still says it; short,
    so that the registry's answer (its status) still fits in a cut reason after it."""
    if creds.failed_providers:
        names = ", ".join(creds.failed_providers)
        return f"credential provider {names} failed (see credential_provider_failed)"
    return (
        "no credentials for this image: set an imagePullSecret, registry.dockerConfigPath"
        " or registry.credentialProviders.configPath"
    )


async def build_resolver(
    registry: RegistrySettings,
    cache: CacheSettings,
    metrics: Metrics | None = None,
    secrets: SecretSource | None = None,
    clock: Clock = time.monotonic,
) -> RegistryResolver:
    """Build a resolver; call it inside the running loop and `aclose()` it at shutdown.

    `clock` times the cache's entries (tests move it instead of sleeping).

    Raises ValueError naming the setting when a CA bundle, the credential provider config
    or a proxy is unusable.
    """
    hosts = HostTable(registry)  # before the session exists, so a bad CA bundle leaks nothing
    plugins = CredentialPlugins.from_settings(registry.credential_providers, metrics=metrics)
    transport = Transport(registry, metrics)
    client = RegistryClient(transport, hosts)
    store = Store(cache, metrics, clock)
    origin = RegistrySource(client, registry)
    source = CachedSource(origin, store, metrics)
    keychain = Keychain(secrets, registry.docker_config_path, plugins)
    # Close in dependency order: stop fetches first, then what they were using. The store
    # runs the resolver's fetches (one per key), so closing it stops them, then Redis.
    closers: list[Closer] = [store.aclose, client.aclose, transport.aclose]
    if plugins is not None:
        closers.insert(0, plugins.aclose)
    verifier = IndexVerifier(origin, store)
    return RegistryResolver(source, keychain, closers, metrics, client, verifier)
