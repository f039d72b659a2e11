"""Pull secrets and docker config files, matched to images the way kubelet's keyring does.

Pure: parsing and matching only. A credential shows itself only as a one-way identity,
never its user name or password (not in repr, logs, errors or cache keys).
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from extender.errors import CredentialSourceError
from extender.registry.pure.reference import LEGACY_DEFAULT_DOMAIN, Reference

DOCKER_CONFIG_JSON = "kubernetes.io/dockerconfigjson"
DOCKER_CONFIG_JSON_KEY = ".dockerconfigjson"
DOCKERCFG = "kubernetes.io/dockercfg"
DOCKERCFG_KEY = ".dockercfg"
ANONYMOUS = "anonymous"


class CredentialError(CredentialSourceError, ValueError):
    """A pull secret or config file cannot be read; the message names it, never its content."""


@dataclass(frozen=True, slots=True)
class Credential:
    """A user name and password for one registry key."""

    username: str = field(repr=False)
    password: str = field(repr=False)
    source: str = ""
    """Where it came from (`secret default/regcred`), for logs."""
    server: str = ""
    """The key it is stored under (`registry.example.com`, `*.example.com:5000/team`): like
    containerd's ServerAddress, it says which hosts may receive it (`serves`)."""

    @property
    def identity(self) -> str:
        """A one-way fingerprint: equal for equal credentials, useless to an attacker."""
        digest = hashlib.sha256(b"archfit-credential\0")
        digest.update(self.username.encode() + b"\0" + self.password.encode())
        return digest.hexdigest()[:20]

    def basic(self) -> str:
        """The value of an `Authorization: Basic` header."""
        return "Basic " + self._pair_base64()

    def _pair_base64(self) -> str:
        return base64.b64encode(f"{self.username}:{self.password}".encode()).decode()

    def sent_forms(self) -> tuple[str, ...]:
        """Every form archfit sends this credential in, for scrubbing echoes of it:
        the password, the user:password pair, and the pair's base64 (padded or not)."""
        encoded = self._pair_base64()
        return (self.password, f"{self.username}:{self.password}", encoded, encoded.rstrip("="))

    def serves(self, host: str) -> bool:
        """Whether `host` (host[:port]) is the server this credential is for.

        containerd's CRI sends a pull credential only to the host its ServerAddress names
        (ParseAuth); a registry's mirror is another host, so it gets no credential unless
        one is stored for the mirror itself. Host labels glob-match as kubelet's keys do.
        """
        key_host = self.server.partition("/")[0]
        return bool(key_host) and _match(key_host, host)

    def __repr__(self) -> str:
        return f"Credential(source={self.source!r}, identity={self.identity!r})"


@dataclass(frozen=True, slots=True)
class PullSecret:
    """A Secret as read from the API server: its type and data (already base64-decoded)."""

    namespace: str
    name: str
    type: str
    data: Mapping[str, bytes] = field(repr=False)


@dataclass(frozen=True, slots=True)
class Keyring:
    """Credentials by registry key, in the order kubelet tries them."""

    entries: tuple[tuple[str, Credential], ...] = ()
    """(key without scheme or /v1/, credential), in the order the secrets listed them."""

    def lookup(self, image: Reference) -> list[Credential]:
        """Credentials whose key matches `image`: most specific key first, as kubelet."""
        target = f"{image.domain}/{image.path}"
        found = [cred for key, cred in self._sorted() if _match(key, target)]
        if not found and _is_docker_hub(image):
            # kubelet keeps Docker Hub credentials under the legacy domain (index.docker.io).
            found = [cred for key, cred in self.entries if key == LEGACY_DEFAULT_DOMAIN]
        return found

    def _sorted(self) -> list[tuple[str, Credential]]:
        # Reverse lexicographic order puts `quay.io/team` before `quay.io`; sort is
        # stable, so credentials under one key keep their secrets' order.
        return sorted(self.entries, key=lambda entry: entry[0], reverse=True)


def keyring(secrets: Iterable[PullSecret]) -> tuple[Keyring, list[str]]:
    """One keyring over all of a pod's secrets, plus a problem per unreadable secret."""
    entries: list[tuple[str, Credential]] = []
    problems: list[str] = []
    for secret in secrets:
        try:
            entries.extend(secret_entries(secret))
        except CredentialError as error:
            problems.append(str(error))
    return Keyring(tuple(entries)), problems


def secret_entries(secret: PullSecret) -> list[tuple[str, Credential]]:
    """(key, credential) pairs of a dockerconfigjson or dockercfg Secret."""
    source = f"secret {secret.namespace}/{secret.name}"
    if secret.type == DOCKER_CONFIG_JSON:
        raw, wrapped = secret.data.get(DOCKER_CONFIG_JSON_KEY), True
    elif secret.type == DOCKERCFG:
        raw, wrapped = secret.data.get(DOCKERCFG_KEY), False
    else:
        return []  # kubelet ignores other types among imagePullSecrets
    if not raw:
        return []
    document = _load(raw, source)
    if not wrapped:
        return _entries(document, source)
    auths = document.get("auths")
    if not isinstance(auths, dict):
        raise CredentialError(f"{source}: .dockerconfigjson has no auths object")
    return _entries(auths, source)


def config_file_entries(raw: bytes, source: str) -> list[tuple[str, Credential]]:
    """(key, credential) pairs of a docker `config.json` (`auths`), or a legacy `.dockercfg`."""
    document = _load(raw, source)
    auths = document.get("auths")
    return _entries(auths if isinstance(auths, dict) else document, source)


def key_matches(key: str, target: str) -> bool:
    """Whether a config key matches an image `domain/path`, by kubelet's rules.

    The key loses its scheme and a leading /v1/ or /v2/; hosts need the same number of
    labels, each glob-matched; ports must be equal; the key's path must prefix the image's.
    """
    return _match(strip_key(key), target)


def _match(key: str, target: str) -> bool:
    key_host, key_path = _split(key)
    target_host, target_path = _split(target)
    key_labels, key_port = _host_port(key_host)
    target_labels, target_port = _host_port(target_host)
    if key_port != target_port or len(key_labels) != len(target_labels):
        return False
    if not target_path.startswith(key_path):
        return False
    return all(fnmatch.fnmatchcase(t, k) for k, t in zip(key_labels, target_labels, strict=True))


def strip_key(key: str) -> str:
    """A config key without its scheme and a leading /v1/ or /v2/, as keys are matched."""
    for scheme in ("https://", "http://"):
        if key.startswith(scheme):
            key = key[len(scheme) :]
            break
    host, slash, path = key.partition("/")
    path = slash + path
    if path.startswith(("/v1/", "/v2/")):
        path = path[3:]
    return host + ("" if path == "/" else path)


def _split(text: str) -> tuple[str, str]:
    host, slash, path = text.partition("/")
    return host, slash + path


def _host_port(host: str) -> tuple[list[str], str]:
    if host.startswith("["):
        inner, _, rest = host[1:].partition("]")
        return [inner], rest.removeprefix(":")
    name, colon, port = host.rpartition(":")
    if colon and name:
        return name.split("."), port
    return host.split("."), ""


def _is_docker_hub(image: Reference) -> bool:
    return image.domain == "docker.io"


def _load(raw: bytes, source: str) -> dict[str, Any]:
    try:
        document = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise CredentialError(f"{source}: not valid JSON") from None  # the text may be a secret
    if not isinstance(document, dict):
        raise CredentialError(f"{source}: not a JSON object")
    return document


def _entries(auths: Mapping[str, Any], source: str) -> list[tuple[str, Credential]]:
    entries = []
    for key, value in auths.items():
        if not isinstance(value, dict) or not key:
            continue
        username, password = value.get("username"), value.get("password")
        encoded = value.get("auth")
        if isinstance(encoded, str) and encoded:
            username, password = _decode_auth(encoded, source)
        if isinstance(username, str) and isinstance(password, str) and (username or password):
            server = strip_key(key)
            entries.append((server, Credential(username, password, source, server)))
    return entries


def _decode_auth(encoded: str, source: str) -> tuple[str, str]:
    if not encoded.endswith("="):
        encoded += "=" * (-len(encoded) % 4)  # kubelet also reads unpadded base64
    try:
        decoded = base64.b64decode(encoded, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise CredentialError(f"{source}: an auth field is not base64 of user:password") from None
    username, colon, password = decoded.partition(":")
    if not colon:
        raise CredentialError(f"{source}: an auth field is not base64 of user:password")
    return username, password


@dataclass(frozen=True, slots=True)
class CredentialChain:
    """The credentials to try for one image, in order; anonymous access comes after them."""

    items: tuple[Credential, ...] = ()
    failed_providers: tuple[str, ...] = ()
    """Credential provider plugins that matched the image but gave nothing (not in identity)."""

    @property
    def identity(self) -> str:
        """One-way identity of the whole chain (part of cache keys); `anonymous` when empty."""
        if not self.items:
            return ANONYMOUS
        digest = hashlib.sha256("\0".join(c.identity for c in self.items).encode())
        return digest.hexdigest()[:20]

    def __len__(self) -> int:
        return len(self.items)
