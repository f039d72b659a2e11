"""kubelet's image credential provider files and messages, read and checked (no I/O).

The `CredentialProviderConfig` (kubelet.config.k8s.io/v1) that kubelet takes with
`--image-credential-provider-config`, and the `CredentialProviderRequest`/`Response`
(credentialprovider.kubelet.k8s.io/v1) exchanged with a plugin over stdin/stdout.
Errors never quote a plugin's output: it may hold a password.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from extender.errors import CredentialSourceError, SetupError
from extender.registry.pure.credentials import Credential, key_matches, strip_key

CONFIG_KIND = "CredentialProviderConfig"
CONFIG_API_VERSIONS = frozenset({"kubelet.config.k8s.io/v1", "kubelet.config.k8s.io/v1beta1"})
PLUGIN_API_VERSIONS = frozenset(
    {
        "credentialprovider.kubelet.k8s.io/v1",
        "credentialprovider.kubelet.k8s.io/v1beta1",
        "credentialprovider.kubelet.k8s.io/v1alpha1",
    }
)
CacheKeyType = Literal["Image", "Registry", "Global"]
_CACHE_KEY_TYPES: tuple[CacheKeyType, ...] = ("Image", "Registry", "Global")
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


class PluginConfigError(SetupError, ValueError):
    """The CredentialProviderConfig file is invalid; the message names the field."""


class PluginAnswerError(CredentialSourceError, ValueError):
    """A plugin's answer is unusable; the message never quotes the answer."""


@dataclass(frozen=True, slots=True)
class Provider:
    """One `providers[]` entry: a plugin binary and the images it serves."""

    name: str
    """The binary's file name in the plugin directory."""
    match_images: tuple[str, ...]
    """Globs matched like docker config keys (`*.dkr.ecr.*.amazonaws.com`)."""
    default_cache_seconds: float
    """How long an answer without `cacheDuration` is reused."""
    api_version: str
    """The request's apiVersion; the answer must carry the same."""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    """(name, value) pairs added to the plugin's environment."""

    def matches(self, image: str) -> bool:
        """Whether `image` (`domain/path`) is one this plugin serves (kubelet isImageAllowed)."""
        return any(key_matches(pattern, image) for pattern in self.match_images)


@dataclass(frozen=True, slots=True)
class PluginAnswer:
    """A decoded CredentialProviderResponse."""

    cache_key_type: CacheKeyType
    cache_seconds: float | None
    """None when the plugin gave no cacheDuration (the provider's default applies)."""
    auth: tuple[tuple[str, Credential], ...]
    """(key without scheme, credential), keys being globs like matchImages."""


def parse_duration(text: str) -> float:
    """Seconds in a Go duration string (`12h`, `1h30m`, `500ms`, `0`); ValueError otherwise."""
    body = text.strip()
    sign = -1.0 if body.startswith("-") else 1.0
    body = body.lstrip("+-")
    if body == "0":
        return 0.0
    total, position = 0.0, 0
    for match in _DURATION_PART.finditer(body):
        if match.start() != position:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    if not body or position != len(body):
        raise ValueError(f"{text[:40]!r} is not a duration such as 12h, 5m or 30s")
    return sign * total


def load_config(raw: bytes, source: str) -> list[Provider]:
    """The providers of a CredentialProviderConfig (YAML or JSON), validated as kubelet does."""
    import yaml  # only when plugins are configured: serve's start-up skips it otherwise

    try:
        document = yaml.safe_load(raw)
    except yaml.YAMLError as error:
        raise PluginConfigError(f"{source}: not valid YAML or JSON: {error}") from None
    if not isinstance(document, dict):
        raise PluginConfigError(f"{source}: must hold a mapping")
    if document.get("kind") != CONFIG_KIND:
        raise PluginConfigError(f"{source}: kind must be {CONFIG_KIND}")
    if document.get("apiVersion") not in CONFIG_API_VERSIONS:
        known = ", ".join(sorted(CONFIG_API_VERSIONS))
        raise PluginConfigError(f"{source}: apiVersion must be one of {known}")
    entries = document.get("providers")
    if not isinstance(entries, list) or not entries:
        raise PluginConfigError(f"{source}: providers must be a non-empty list")
    providers = [_provider(entry, f"{source}: providers[{i}]") for i, entry in enumerate(entries)]
    names = [p.name for p in providers]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise PluginConfigError(f"{source}: provider names must be unique: {duplicates}")
    return providers


def _provider(entry: object, where: str) -> Provider:
    if not isinstance(entry, dict):
        raise PluginConfigError(f"{where}: must be a mapping")
    if entry.get("tokenAttributes") is not None:
        # kubelet's service account token mode binds tokens to the pod being pulled for;
        # archfit pulls for no pod, so a plugin that needs one would silently get nothing.
        raise PluginConfigError(
            f"{where}.tokenAttributes: service account token mode is not supported"
        )
    name = entry.get("name")
    # kubelet refuses names that would leave the plugin directory.
    if not isinstance(name, str) or not name or name in (".", "..") or "/" in name:
        raise PluginConfigError(f"{where}.name: must be a file name in the plugin directory")
    match_images = entry.get("matchImages")
    if not isinstance(match_images, list) or not match_images:
        raise PluginConfigError(f"{where}.matchImages: must be a non-empty list")
    for pattern in match_images:
        if not isinstance(pattern, str) or not pattern.strip():
            raise PluginConfigError(f"{where}.matchImages: entries must be non-empty strings")
    raw_duration = entry.get("defaultCacheDuration")
    if not isinstance(raw_duration, str):
        raise PluginConfigError(f"{where}.defaultCacheDuration: required, e.g. 12h")
    try:
        default_seconds = parse_duration(raw_duration)
    except ValueError as error:
        raise PluginConfigError(f"{where}.defaultCacheDuration: {error}") from None
    if default_seconds < 0:
        raise PluginConfigError(f"{where}.defaultCacheDuration: must not be negative")
    api_version = entry.get("apiVersion")
    if api_version not in PLUGIN_API_VERSIONS:
        known = ", ".join(sorted(PLUGIN_API_VERSIONS))
        raise PluginConfigError(f"{where}.apiVersion: must be one of {known}")
    args = entry.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise PluginConfigError(f"{where}.args: must be a list of strings")
    if any("\0" in a for a in args):
        raise PluginConfigError(f"{where}.args: a NUL character cannot be passed to a program")
    return Provider(
        name=name,
        match_images=tuple(match_images),
        default_cache_seconds=default_seconds,
        api_version=str(api_version),
        args=tuple(args),
        env=_env(entry.get("env") or [], f"{where}.env"),
    )


def _env(entries: object, where: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(entries, list):
        raise PluginConfigError(f"{where}: must be a list of name/value pairs")
    pairs = []
    for i, item in enumerate(entries):
        if not isinstance(item, dict):
            raise PluginConfigError(f"{where}[{i}]: must be a mapping with name and value")
        name, value = item.get("name"), item.get("value", "")
        if not isinstance(name, str) or not name or "=" in name or not isinstance(value, str):
            raise PluginConfigError(f"{where}[{i}]: needs a string name (no =) and value")
        if "\0" in name or "\0" in value:
            raise PluginConfigError(f"{where}[{i}]: a NUL character cannot be in the environment")
        pairs.append((name, value))
    return tuple(pairs)


def request_body(provider: Provider, image: str) -> bytes:
    """The CredentialProviderRequest written to the plugin's stdin."""
    document = {"apiVersion": provider.api_version, "kind": "CredentialProviderRequest"}
    return json.dumps({**document, "image": image}).encode()


def parse_answer(raw: bytes, provider: Provider) -> PluginAnswer:
    """Decode a CredentialProviderResponse the way kubelet checks it."""
    try:
        document = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise PluginAnswerError("stdout is not JSON") from None
    if not isinstance(document, dict):
        raise PluginAnswerError("stdout is not a JSON object")
    if document.get("apiVersion") != provider.api_version:
        raise PluginAnswerError(f"answer's apiVersion is not {provider.api_version}")
    if document.get("kind") != "CredentialProviderResponse":
        raise PluginAnswerError("answer's kind is not CredentialProviderResponse")
    key_type = document.get("cacheKeyType")
    if key_type not in _CACHE_KEY_TYPES:
        raise PluginAnswerError("answer's cacheKeyType is not Image, Registry or Global")
    return PluginAnswer(
        cache_key_type=key_type,
        cache_seconds=_cache_seconds(document.get("cacheDuration")),
        auth=_auth(document.get("auth"), provider.name),
    )


def _cache_seconds(value: object) -> float | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise PluginAnswerError("answer's cacheDuration is not a duration string")
    try:
        seconds = parse_duration(value)
    except ValueError:
        raise PluginAnswerError("answer's cacheDuration is not a duration string") from None
    return max(seconds, 0.0)


def _auth(value: object, name: str) -> tuple[tuple[str, Credential], ...]:
    if value is None:
        return ()
    if not isinstance(value, Mapping):
        raise PluginAnswerError("answer's auth is not a mapping")
    entries = []
    for key, entry in value.items():
        if not isinstance(entry, Mapping) or not isinstance(key, str) or not key:
            raise PluginAnswerError("answer's auth entries must map keys to username/password")
        username, password = entry.get("username", ""), entry.get("password", "")
        if not isinstance(username, str) or not isinstance(password, str):
            raise PluginAnswerError("answer's auth username and password must be strings")
        if username or password:
            server = strip_key(key)
            credential = Credential(username, password, f"credential provider {name}", server)
            entries.append((server, credential))
    return tuple(entries)


def cache_key(key_type: CacheKeyType, image: str) -> tuple[str, str]:
    """The cache key kubelet files an answer under: the image, its registry, or global."""
    if key_type == "Image":
        return key_type, image
    if key_type == "Registry":
        return key_type, image.split("/", 1)[0]
    return key_type, ""


def lookup_keys(image: str) -> tuple[tuple[str, str], ...]:
    """Cache keys to look an image up by, most specific first (kubelet getCachedCredentials)."""
    return tuple(cache_key(key_type, image) for key_type in _CACHE_KEY_TYPES)
