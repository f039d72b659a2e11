"""Reading manifests, indexes and image configs into platforms (pure, no I/O).

An index lists its platforms; a single manifest's platform lives in its config blob,
and a manifest whose config is not an image config is an artifact.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from extender.core.platforms import Platform, normalize
from extender.core.text import MAX_ERROR_IN_REASON, cut, error_text
from extender.registry.errors import DigestMismatch, ManifestInvalid, Schema1Unsupported
from extender.registry.pure.reference import parse_digest

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_SCHEMA1 = "application/vnd.docker.distribution.manifest.v1+json"
DOCKER_SCHEMA1_SIGNED = "application/vnd.docker.distribution.manifest.v1+prettyjws"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"

ACCEPT = ", ".join(
    # The order of docs/architecture.md, "Registries"; schema1 only to say why it is refused.
    (OCI_INDEX, DOCKER_MANIFEST_LIST, OCI_MANIFEST, DOCKER_MANIFEST, DOCKER_SCHEMA1_SIGNED)
)
INDEX_TYPES = frozenset({OCI_INDEX, DOCKER_MANIFEST_LIST})
MANIFEST_TYPES = frozenset({OCI_MANIFEST, DOCKER_MANIFEST})
SCHEMA1_TYPES = frozenset({DOCKER_SCHEMA1, DOCKER_SCHEMA1_SIGNED})
IMAGE_CONFIG_TYPES = frozenset({OCI_CONFIG, DOCKER_CONFIG})
ATTESTATION_ANNOTATION = "vnd.docker.reference.type"
UNKNOWN_PLATFORM_PART = "unknown"
"""An index entry's os or architecture that says it is no platform (BuildKit attestations)."""


@dataclass(frozen=True, slots=True)
class Index:
    """An OCI index or Docker manifest list, reduced to its runnable platforms."""

    media_type: str
    platforms: frozenset[Platform]


@dataclass(frozen=True, slots=True)
class Single:
    """A single manifest; its platform is in the config blob, if it is an image at all."""

    media_type: str
    config_media_type: str
    config_digest: str
    config_size: int

    @property
    def is_image(self) -> bool:
        """Whether the config is an image config (otherwise this is an artifact)."""
        return self.config_media_type in IMAGE_CONFIG_TYPES


def verify(body: bytes, digest: str) -> None:
    """Raise DigestMismatch unless `body` hashes to `digest`.

    Raises InvalidReference when `digest` is malformed (`parse_digest`).
    """
    algorithm, expected = parse_digest(digest)
    actual = hashlib.new(algorithm, body).hexdigest()
    if actual != expected:
        raise DigestMismatch(f"content does not match {digest} (got {algorithm}:{actual[:12]}...)")


def digest_of(body: bytes) -> str:
    """The sha256 digest of a body (for manifests fetched by tag)."""
    return "sha256:" + hashlib.sha256(body).hexdigest()


def media_type_of(content_type: str) -> str:
    """The bare media type of a Content-Type header."""
    return content_type.split(";", 1)[0].strip().lower()


def parse_manifest(body: bytes, content_type: str = "") -> Index | Single:
    """Classify a manifest body and pull out what the resolver needs.

    Raises Schema1Unsupported for schema 1, ManifestInvalid for anything unreadable.
    """
    document = json_object(body, "manifest")
    declared = document.get("mediaType")
    media_type = declared if isinstance(declared, str) and declared else media_type_of(content_type)
    if document.get("schemaVersion") == 1 or media_type in SCHEMA1_TYPES:
        raise Schema1Unsupported(
            "image uses Docker manifest schema 1, which containerd 2.x refuses to pull"
        )
    if media_type in INDEX_TYPES or (media_type not in MANIFEST_TYPES and "manifests" in document):
        return Index(media_type or OCI_INDEX, _index_platforms(document))
    if media_type in MANIFEST_TYPES or "config" in document:
        config = document.get("config")
        if not isinstance(config, dict):
            raise ManifestInvalid("manifest has no config descriptor")
        digest, size = config.get("digest"), config.get("size")
        config_type = config.get("mediaType")
        if not isinstance(digest, str) or not isinstance(config_type, str):
            raise ManifestInvalid("manifest config descriptor lacks digest or mediaType")
        parse_digest(digest)
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ManifestInvalid("manifest config descriptor has no valid size")
        return Single(media_type or OCI_MANIFEST, config_type, digest, size)
    raise ManifestInvalid(
        f"unsupported manifest media type {cut(media_type, MAX_ERROR_IN_REASON)!r}"
    )


def _index_platforms(document: dict[str, Any]) -> frozenset[Platform]:
    return frozenset(platform for _, platform in _runnable_entries(document))


@dataclass(frozen=True, slots=True)
class Entry:
    """One runnable entry of an index: the child manifest's digest and the platform claimed."""

    digest: str
    platform: Platform


def index_entries(body: bytes) -> list[Entry]:
    """The runnable entries of an index body, in its order (those `parse_manifest` counts).

    Raises ManifestInvalid for anything unreadable, or an entry without a valid digest.
    """
    found: list[Entry] = []
    for entry, platform in _runnable_entries(json_object(body, "index")):
        digest = entry.get("digest")
        if not isinstance(digest, str):
            raise ManifestInvalid("index entry has no digest")
        parse_digest(digest)
        found.append(Entry(digest, platform))
    return found


def _runnable_entries(document: dict[str, Any]) -> Iterator[tuple[dict[str, Any], Platform]]:
    entries = document.get("manifests")
    if not isinstance(entries, list):
        raise ManifestInvalid("index has no manifests list")
    for entry in entries:
        if not isinstance(entry, dict):
            raise ManifestInvalid("index entry is not an object")
        annotations = entry.get("annotations")
        if isinstance(annotations, dict) and ATTESTATION_ANNOTATION in annotations:
            continue  # BuildKit attestation manifest, not something a node runs
        platform = entry.get("platform")
        if not isinstance(platform, dict):
            continue  # nested index or artifact: says nothing about a runnable platform
        found = _platform(platform)
        if found is not None:
            yield entry, found


def config_check(claimed: Platform, config: bytes) -> tuple[Platform, str]:
    """What an index entry really is, believing its image config, and how the claim is wrong.

    Returns the believed platform and a plain sentence of the disagreement ("" when the
    config agrees). A config that names no os or architecture (some build tools write such
    configs) says nothing to believe: the claim stands, and the sentence says so. A variant
    counts only when the config names one: many configs leave it out.
    """
    fields = json_object(config, "image config")
    found = _platform(fields)
    if found is None:
        return claimed, f"index says {claimed}; its config names no os/architecture"
    stated = fields.get("variant")
    if found[:2] == claimed[:2] and (not isinstance(stated, str) or not stated):
        return claimed, ""
    if found[:3] == claimed[:3]:
        return claimed, ""
    return found, f"index says {claimed}; its config says {found}"


def platform_from_config(body: bytes) -> Platform:
    """The platform an image config names. Raises ManifestInvalid when it names none."""
    found = _platform(json_object(body, "image config"))
    if found is None:
        raise ManifestInvalid("image config names no os and architecture")
    return found


def _platform(fields: dict[str, Any]) -> Platform | None:
    os_, arch = fields.get("os"), fields.get("architecture")
    if not isinstance(os_, str) or not isinstance(arch, str) or not os_ or not arch:
        return None
    if UNKNOWN_PLATFORM_PART in (os_.lower(), arch.lower()):
        return None
    variant, os_version = fields.get("variant"), fields.get("os.version")
    return normalize(
        os_[:64],
        arch[:64],
        variant[:64] if isinstance(variant, str) else "",
        os_version[:64] if isinstance(os_version, str) else "",
    )


def json_object(body: bytes, what: str) -> dict[str, Any]:
    """`body` decoded as a JSON object; ManifestInvalid naming `what` otherwise."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise ManifestInvalid(
            f"{what} is not valid JSON: {error_text(error, MAX_ERROR_IN_REASON)}"
        ) from error
    if not isinstance(document, dict):
        raise ManifestInvalid(f"{what} is not a JSON object")
    return document
