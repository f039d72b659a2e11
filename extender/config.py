"""Settings: frozen dataclasses loaded from YAML plus `ARCHFIT_` env overrides, validated at start.

YAML keys are the camelCase of the field names; env overrides name the path in
upper snake case with `__` between levels: `ARCHFIT_POLICY__FAILURE_POLICY=fail-closed`.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from extender.platforms import normalize
from extender.registry.settings import CacheSettings, RegistrySettings

ENV_PREFIX = "ARCHFIT_"
DEFAULT_CONFIG = Path("config/archfit.yaml")


class ConfigError(ValueError):
    """A setting is missing, misspelt or invalid; the message names its key."""


@dataclass(frozen=True)
class ServerSettings:
    host: str = "0.0.0.0"
    """Address to listen on."""
    port: int = 8888
    """TCP port for the extender verbs, health checks and metrics."""
    prefix: str = "/scheduler"
    """Path prefix of the verbs: the `urlPrefix` path in KubeSchedulerConfiguration."""
    max_body_bytes: int = 64 * 1024 * 1024
    """Largest request body accepted; larger ones get 413. Full Node lists are big."""
    shutdown_grace_seconds: float = 10.0
    """On SIGTERM, how long in-flight requests may take to finish."""

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise ValueError(f"port: {self.port} is not a TCP port")
        if not self.prefix.startswith("/") or (self.prefix.endswith("/") and self.prefix != "/"):
            raise ValueError(f"prefix: {self.prefix!r} must start with / and not end with /")
        if self.max_body_bytes < 1024:
            raise ValueError("maxBodyBytes: must be at least 1024")
        if self.shutdown_grace_seconds < 0:
            raise ValueError("shutdownGraceSeconds: must not be negative")


@dataclass(frozen=True)
class PolicySettings:
    mode: Literal["enforce", "dry-run"] = "enforce"
    """`dry-run` decides, logs and counts, but never rejects or scores."""
    failure_policy: Literal["fail-open", "fail-closed"] = "fail-open"
    """What an image with unknown platforms does: pass every node, or fail them (FailedNodes)."""
    excluded_namespaces: tuple[str, ...] = ("kube-system",)
    """Pods in these namespaces are never filtered or scored."""
    arch_preference: dict[str, int] = field(default_factory=lambda: {"arm64": 10, "amd64": 0})
    """Score (0..10) per architecture, for pods whose images run on two or more candidates."""
    matching: Literal["auto", "strict", "loose"] = "auto"
    """`auto` judges each node by its runtime's rule; `strict` or `loose` judge all nodes alike."""
    resolve_deadline_seconds: float = 1.5
    """Time a request waits for registries; keep it below the scheduler's httpTimeout."""

    def __post_init__(self) -> None:
        for arch, score in self.arch_preference.items():
            if not 0 <= score <= 10:
                raise ValueError(f"archPreference.{arch}: score {score} is outside 0..10")
        # Normalise aliases once, so "aarch64: 10" means arm64.
        preference = self.arch_preference.items()
        normal = {normalize("linux", arch.strip()).architecture: s for arch, s in preference}
        object.__setattr__(self, "arch_preference", normal)
        if not 0 < self.resolve_deadline_seconds <= 60:
            raise ValueError("resolveDeadlineSeconds: must be in (0, 60]")

    @property
    def loose_matching(self) -> bool:
        """Whether every node gets containerd's Only() fallbacks (the pre-`matching` flag)."""
        return self.matching == "loose"


@dataclass(frozen=True)
class KubernetesSettings:
    mode: Literal["auto", "in-cluster", "kubeconfig", "off"] = "auto"
    """API server access. `auto`: in-cluster in a pod, else `kubeconfig` if set, else off."""
    kubeconfig: str = ""
    """Kubeconfig path for `mode: kubeconfig` (empty: $KUBECONFIG or ~/.kube/config)."""
    node_index: bool = True
    """List-watch Nodes so `nodeCacheCapable: true` requests (NodeNames only) can be served."""
    pull_secrets: bool = True
    """Read pods' and service accounts' imagePullSecrets for private registries."""


@dataclass(frozen=True)
class LoggingSettings:
    level: Literal["debug", "info", "warning", "error"] = "info"
    """Lowest level written."""
    format: Literal["auto", "json", "console"] = "auto"
    """`auto` is JSON unless stdout is a terminal."""


@dataclass(frozen=True)
class Settings:
    server: ServerSettings = field(default_factory=ServerSettings)
    """HTTP listener."""
    policy: PolicySettings = field(default_factory=PolicySettings)
    """Decisions: enforcement, failure policy, scoring."""
    kubernetes: KubernetesSettings = field(default_factory=KubernetesSettings)
    """API server access for the node index and pull secrets."""
    logging: LoggingSettings = field(default_factory=LoggingSettings)
    """Structured logs."""
    registry: RegistrySettings = field(default_factory=RegistrySettings)
    """Registry access: timeouts, per-host TLS, mirrors, private-address allow-list."""
    cache: CacheSettings = field(default_factory=CacheSettings)
    """Resolver cache: in memory or Redis, TTLs."""


def load(path: Path | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Load settings from `path` (default config/archfit.yaml if present) and env overrides."""
    data: dict[str, Any] = {}
    chosen = path if path is not None else (DEFAULT_CONFIG if DEFAULT_CONFIG.is_file() else None)
    if chosen is not None:
        try:
            loaded = yaml.safe_load(chosen.read_text(encoding="utf-8"))
        except OSError as error:
            raise ConfigError(f"cannot read config file {chosen}: {error.strerror}") from error
        except yaml.YAMLError as error:
            raise ConfigError(f"config file {chosen} is not valid YAML: {error}") from error
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"config file {chosen} must hold a mapping at the top")
        data = loaded or {}
    _apply_env(data, environ if environ is not None else {})
    return from_mapping(data)


def from_mapping(data: Mapping[str, Any]) -> Settings:
    """Build validated Settings from plain data (camelCase keys)."""
    settings: Settings = _build(Settings, _upgrade_legacy(data), "")
    return settings


def _upgrade_legacy(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """Read `policy.looseMatching: true|false` of older files as `policy.matching: loose|strict`.

    false meant containerd 2.x's strict matching, so it stays strict rather than turning auto.
    """
    policy = data.get("policy")
    if not isinstance(policy, Mapping) or "looseMatching" not in policy:
        return data
    loose = policy["looseMatching"]
    if "matching" in policy:
        raise ConfigError("policy.looseMatching: replaced by policy.matching; set only matching")
    if not isinstance(loose, bool):
        raise ConfigError(f"policy.looseMatching: must be true or false, not {loose!r}")
    upgraded = {key: value for key, value in policy.items() if key != "looseMatching"}
    upgraded["matching"] = "loose" if loose else "strict"
    return {**data, "policy": upgraded}


def camel(name: str) -> str:
    """snake_case field name → camelCase YAML key."""
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _apply_env(data: dict[str, Any], environ: Mapping[str, str]) -> None:
    for key, raw in sorted(environ.items()):
        if not key.startswith(ENV_PREFIX):
            continue
        path = [camel(part.lower()) for part in key[len(ENV_PREFIX) :].split("__")]
        try:
            # YAML scalars and flow syntax: "true", "3", "[a, b]", "{arm64: 10}".
            value = yaml.safe_load(raw) if raw else ""
        except yaml.YAMLError as error:
            raise ConfigError(f"{key}: not a valid YAML value: {error}") from error
        target = data
        for part in path[:-1]:
            nested = target.setdefault(part, {})
            if not isinstance(nested, dict):
                raise ConfigError(f"{key}: {'.'.join(path)} is not a section")
            target = nested
        target[path[-1]] = value


def _build(cls: type[Any], data: object, where: str) -> Any:
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where or 'config'}: must be a mapping")
    fields = {camel(f.name): f for f in dataclasses.fields(cls)}
    for key in data:
        if key not in fields:
            known = ", ".join(sorted(fields))
            raise ConfigError(f"{_join(where, str(key))}: unknown setting (known: {known})")
    hints = typing.get_type_hints(cls)
    kwargs = {
        fields[key].name: _convert(hints[fields[key].name], value, _join(where, key))
        for key, value in data.items()
    }
    try:
        return cls(**kwargs)
    except ValueError as error:
        raise ConfigError(f"{_join(where, str(error))}") from error


def _convert(tp: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if dataclasses.is_dataclass(tp):
        return _build(typing.cast(type[Any], tp), value, where)
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"{where}: {value!r} is not one of {', '.join(map(str, args))}")
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [arg for arg in args if arg is not type(None)]
        return _convert(inner, value, where)
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{where}: must be a list")
        return tuple(_convert(args[0], item, f"{where}[{i}]") for i, item in enumerate(value))
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: must be a mapping")
        return {str(k): _convert(args[1], v, _join(where, str(k))) for k, v in value.items()}
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: must be true or false, not {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: must be an integer, not {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where}: must be a number, not {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: must be a string, not {value!r}")
        return value
    raise TypeError(f"config type {tp!r} at {where} is not supported")  # a programming error


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def to_mapping(settings: Any) -> dict[str, Any]:
    """Settings back to plain camelCase data (for `archfit config`)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(settings):
        value = getattr(settings, f.name)
        if dataclasses.is_dataclass(value):
            value = to_mapping(value)
        elif isinstance(value, tuple):
            value = [to_mapping(v) if dataclasses.is_dataclass(v) else v for v in value]
        elif isinstance(value, dict):
            value = {
                k: to_mapping(v) if dataclasses.is_dataclass(v) else v for k, v in value.items()
            }
        out[camel(f.name)] = value
    return out
