"""Settings loaded from YAML plus `ARCHFIT_` env overrides, typed by the schema's hints; a bad
setting is a ConfigError naming its key, and the env var it came from.

Env overrides name the path in upper snake case with `__` between levels:
`ARCHFIT_POLICY__FAILURE_POLICY=fail-closed` sets `policy.failurePolicy`.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from extender.config.settings import Settings, camel
from extender.core.text import cut
from extender.errors import SetupError

ENV_PREFIX = "ARCHFIT_"
DEFAULT_CONFIG = Path("config/archfit.yaml")


class ConfigError(SetupError, ValueError):
    """A setting is missing, misspelt or invalid; the message names its key."""


def source(path: Path | None = None) -> Path | None:
    """The file `load(path)` reads: `path`, else config/archfit.yaml if present, else none."""
    if path is not None:
        return path
    return DEFAULT_CONFIG if DEFAULT_CONFIG.is_file() else None


def load(path: Path | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Load settings from `path` (default config/archfit.yaml if present) and env overrides."""
    data: dict[str, Any] = {}
    chosen = source(path)
    if chosen is not None:
        import yaml  # here, not at the top: with no file and no env, start-up skips it

        try:
            loaded = yaml.safe_load(chosen.read_text(encoding="utf-8"))
        except OSError as error:
            raise ConfigError(f"cannot read config file {chosen}: {error.strerror}") from error
        except yaml.YAMLError as error:
            # PyYAML names a string it was given "<unicode string>": name the file.
            where = str(error).replace('"<unicode string>"', f'"{chosen}"')
            raise ConfigError(f"config file {chosen} is not valid YAML: {where}") from error
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"config file {chosen} must hold a mapping at the top")
        data = loaded or {}
    _apply_env(data, environ if environ is not None else {})
    return from_mapping(data)


def from_mapping(data: Mapping[str, Any]) -> Settings:
    """Build validated Settings from plain data (camelCase keys)."""
    settings: Settings = _build(Settings, _upgrade_legacy(data), "")
    return settings


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


def env_variable(key: str) -> str:
    """The env var that overrides setting `key`: `policy.failurePolicy` is
    ARCHFIT_POLICY__FAILURE_POLICY (the reverse of what `load` reads)."""
    return ENV_PREFIX + "__".join(
        re.sub("([A-Z])", r"_\1", part).upper() for part in key.split(".")
    )


_SECTIONS = frozenset(camel(f.name) for f in dataclasses.fields(Settings))


def ignored_env(environ: Mapping[str, str]) -> list[str]:
    """Warnings for ARCHFIT_ variables that look like a setting but set nothing: a section name
    followed by one `_` (ARCHFIT_POLICY_FAILURE_POLICY). Other ARCHFIT_ names without `__`
    belong to other tools (ARCHFIT_E2E_CACHE) and are left alone."""
    found = []
    for key in sorted(environ):
        rest = key[len(ENV_PREFIX) :]
        if not key.startswith(ENV_PREFIX) or "__" in rest:
            continue
        section = next((s for s in sorted(_SECTIONS) if rest.lower().startswith(s + "_")), "")
        if section:
            meant = f"{ENV_PREFIX}{rest[: len(section)]}__{rest[len(section) + 1 :]}"
            found.append(
                f"{key} sets nothing: a section and its key are joined by two underscores ({meant})"
            )
    return found


class _EnvText(str):
    """An env override's raw text, read later as the type of the setting it names.

    Reading it as YAML up front would turn `off`, `on`, `yes` and `no` into booleans
    (YAML 1.1), so `ARCHFIT_KUBERNETES__MODE=off` would fail for a string setting.
    """

    variable: str

    def __new__(cls, text: str, variable: str) -> _EnvText:
        made = super().__new__(cls, text)
        made.variable = variable
        return made


def _apply_env(data: dict[str, Any], environ: Mapping[str, str]) -> None:
    for key, raw in sorted(environ.items()):
        if not key.startswith(ENV_PREFIX):
            continue
        path = [camel(part.lower()) for part in key[len(ENV_PREFIX) :].split("__")]
        if len(path) == 1 and path[0] not in _SECTIONS:
            # Not the ARCHFIT_<SECTION>__<KEY> syntax and no section: another tool's
            # variable (ARCHFIT_E2E_CACHE), not a misspelt setting, which has `__`.
            continue
        value = _EnvText(raw, key)
        target = data
        for part in path[:-1]:
            nested = target.setdefault(part, {})
            if not isinstance(nested, dict):
                raise ConfigError(f"{key}: {'.'.join(path)} is not a section")
            target = nested
        target[path[-1]] = value


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
    if isinstance(loose, _EnvText):
        loose = _from_env(bool, loose, "policy.looseMatching")
    if not isinstance(loose, bool):
        raise ConfigError(f"policy.looseMatching: must be true or false, not {loose!r}")
    upgraded = {key: value for key, value in policy.items() if key != "looseMatching"}
    upgraded["matching"] = "loose" if loose else "strict"
    return {**data, "policy": upgraded}


# The typing below is by hand, not msgspec.convert: for a dataclass msgspec ignores unknown
# keys (a misspelt setting would pass), names a map's key only as `[...]`, and says neither
# the value nor the env var at fault; these messages are what an operator reads.


def _build(cls: type[Any], data: object, where: str) -> Any:
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where or 'config'}: must be a mapping")
    fields = {camel(f.name): f for f in dataclasses.fields(cls)}
    for key in data:
        if key not in fields:
            raise ConfigError(_unknown(where, str(key), sorted(fields), _variables(data[key])))
    hints = typing.get_type_hints(cls)
    kwargs = {
        fields[key].name: _convert(hints[fields[key].name], value, _join(where, key))
        for key, value in data.items()
    }
    try:
        return cls(**kwargs)
    except ValueError as error:
        raise ConfigError(f"{_join(where, str(error))}") from error


def _unknown(where: str, key: str, known: list[str], variables: list[str]) -> str:
    """An unknown setting, named with the valid ones in the spelling it was written in (an env
    variable's, when one set it), and the one it most likely meant: a variable spells the
    key's capitals as `_` (failurePolicy is FAILURE_POLICY), FAILUREPOLICY reads failurepolicy."""
    path = _join(where, key)
    if not variables:
        return f"{path}: unknown setting (known: {', '.join(known)})"
    meant = [k for k in known if k.lower() == key.replace("_", "").lower()]
    guess = (
        f"; {env_variable(_join(where, meant[0]))} sets {_join(where, meant[0])}" if meant else ""
    )
    spelled = ", ".join(env_variable(_join(where, k)) for k in known)
    return f"{path} (from {', '.join(variables)}): unknown setting{guess} (known: {spelled})"


def _variables(value: object) -> list[str]:
    """The env variables that wrote `value` or anything inside it."""
    if isinstance(value, _EnvText):
        return [value.variable]
    if isinstance(value, Mapping):
        return [v for item in value.values() for v in _variables(item)]
    return []


def _convert(tp: Any, value: Any, where: str) -> Any:
    if isinstance(value, _EnvText):
        try:
            return _convert(tp, _from_env(tp, value, where), where)
        except ConfigError as error:
            if value.variable in str(error):
                raise
            raise ConfigError(f"{error} (from {value.variable})") from error
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if dataclasses.is_dataclass(tp):
        return _build(typing.cast(type[Any], tp), value, where)
    if origin is Literal:
        # Choices are lowercase words that differ by more than case: `DEBUG` means `debug`.
        if isinstance(value, str) and value not in args and value.lower() in args:
            value = value.lower()
        if value not in args:
            raise ConfigError(f"{where}: {value!r} is not one of {', '.join(map(str, args))}")
        return value
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{where}: must be a list (YAML: [a, b]; an env var: a,b)")
        return tuple(_convert(args[0], item, f"{where}[{i}]") for i, item in enumerate(value))
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(
                f"{where}: must be a mapping, not {value!r}: {_mapping_example(value)}"
            )
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


def _mapping_example(value: object) -> str:
    """How to write a mapping, from what was written if it reads as `key=value` pairs."""
    pairs = [item.partition("=") for item in str(value).split(",")] if value else []
    if pairs and all(sep and k.strip() and v.strip() for k, sep, v in pairs):
        written = ", ".join(f"{k.strip()}: {v.strip()}" for k, _, v in pairs)
        return f"YAML's flow syntax, also in an env variable: '{{{written}}}'"
    return "YAML's flow syntax, also in an env variable: '{key: value, key: value}'"


_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def _from_env(tp: Any, text: _EnvText, where: str) -> Any:
    """An env override's text as the setting's own type (str stays str, whatever it says)."""
    origin = typing.get_origin(tp)
    if tp is str or origin is Literal:
        return str(text)
    raw = text.strip()
    try:
        if tp is bool:
            if raw.lower() in _TRUE | _FALSE:
                return raw.lower() in _TRUE
            raise ValueError("must be true or false")
        if tp is int:
            if not re.fullmatch(r"[+-]?\d+", raw):
                raise ValueError("must be an integer")
            return int(raw)
        if tp is float:
            try:
                return float(raw)
            except ValueError:
                raise ValueError("must be a number") from None
        if origin is tuple and not raw.startswith("["):
            # `a,b` as well as YAML's `[a, b]`: each item is read as the item type.
            items = [item.strip() for item in raw.split(",") if item.strip()]
            return [_EnvText(item, text.variable) for item in items]
        # Lists, maps and nested sections: YAML flow syntax, "[a, b]", "{arm64: 10}".
        import yaml  # only here, as in load()

        try:
            return yaml.safe_load(raw) if raw else None
        except yaml.YAMLError as error:
            raise ValueError(str(error)) from error
    except ValueError as error:
        raise ConfigError(f"{where} (from {text.variable}={cut(text, 60)!r}): {error}") from error


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key
