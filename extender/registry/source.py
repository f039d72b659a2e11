"""What an image is, asked of its registry: a tag's digest, then the digest's platforms
(or both from one answer, for a tag with nothing cached to revalidate).

`ImageSource` is the seam the cache wraps (and keeps); `RegistrySource` is the real one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from extender.config.registry_settings import RegistrySettings
from extender.core.platforms import Platform
from extender.registry.client import RegistryClient
from extender.registry.errors import TooLarge
from extender.registry.manifests import Index, Single, parse_manifest, platform_from_config
from extender.registry.pure.credentials import CredentialChain
from extender.registry.pure.reference import Reference


@dataclass(frozen=True, slots=True)
class ImageFacts:
    """What a digest is: its media type, its runnable platforms, whether it is an artifact."""

    media_type: str
    platforms: frozenset[Platform]
    artifact: bool = False
    """True when the manifest's config is not an image config (a Helm chart, a signature)."""


class ImageSource(Protocol):
    """Where image facts come from; the cache implements it by wrapping another one."""

    async def digest(self, ref: Reference, creds: CredentialChain) -> str:
        """The digest the reference's tag points at now."""
        ...

    async def tagged(self, ref: Reference, creds: CredentialChain) -> tuple[str, ImageFacts]:
        """The tag's digest and that digest's facts, from one answer where the registry can:
        for a tag with no digest known to revalidate."""
        ...

    async def facts(self, ref: Reference, digest: str, creds: CredentialChain) -> ImageFacts:
        """The facts of the manifest stored under `digest` in the reference's repository."""
        ...

    async def forget_tag(self, ref: Reference, creds: CredentialChain) -> None:
        """Drop any remembered digest of the reference's tag."""
        ...


class RegistrySource:
    """Asks the registry over HTTP."""

    def __init__(self, client: RegistryClient, settings: RegistrySettings) -> None:
        self._client = client
        self._settings = settings

    async def digest(self, ref: Reference, creds: CredentialChain) -> str:
        return await self._client.resolve_tag(ref, creds.items)

    async def forget_tag(self, ref: Reference, creds: CredentialChain) -> None:
        """Nothing is remembered here."""

    async def tagged(self, ref: Reference, creds: CredentialChain) -> tuple[str, ImageFacts]:
        """One GET of the tag (not HEAD, then GET by digest), then a single manifest's config;
        but HEAD, then GET by digest, where a pull-only mirror serves content."""
        if not self._client.content_from_tag_hosts(ref):
            digest = await self.digest(ref, creds)
            return digest, await self.facts(ref, digest, creds)
        digest, body, content_type = await self._client.tag_manifest(ref, creds.items)
        return digest, await self._facts_of(ref, parse_manifest(body, content_type), creds)

    async def facts(self, ref: Reference, digest: str, creds: CredentialChain) -> ImageFacts:
        _, manifest = await self.manifest(ref, digest, creds)
        return await self._facts_of(ref, manifest, creds)

    async def _facts_of(
        self, ref: Reference, manifest: Index | Single, creds: CredentialChain
    ) -> ImageFacts:
        if isinstance(manifest, Index):
            return ImageFacts(manifest.media_type, manifest.platforms)
        if not manifest.is_image:
            return ImageFacts(manifest.media_type, frozenset(), artifact=True)
        config = await self.config(ref, manifest, creds)
        return ImageFacts(manifest.media_type, frozenset({platform_from_config(config)}))

    async def manifest(
        self, ref: Reference, digest: str, creds: CredentialChain
    ) -> tuple[bytes, Index | Single]:
        """The manifest stored under `digest`: its body and what it is."""
        body, content_type = await self._client.manifest(ref, digest, creds.items)
        return body, parse_manifest(body, content_type)

    async def config(self, ref: Reference, manifest: Single, creds: CredentialChain) -> bytes:
        """A single manifest's config blob, within `registry.maxConfigBytes`."""
        cap = self._settings.max_config_bytes
        if manifest.config_size > cap:
            raise TooLarge(f"{ref.name}: config of {manifest.config_size} bytes exceeds {cap}")
        return await self._client.blob(ref, manifest.config_digest, creds.items, cap)
