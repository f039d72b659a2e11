"""Documentation of the settings, read from the dataclasses themselves.

`archfit config --table` prints the README's table and `archfit config --defaults`
prints config/archfit.yaml, so neither drifts from the code.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import textwrap
import typing
from typing import Any

import yaml

from extender.config import ENV_PREFIX, Settings, camel, to_mapping

_FIELD_DOC = re.compile(r"^\s+(\w+):[^\n]*\n\s+\"\"\"(.*?)\"\"\"", re.M | re.S)

_HEADER = """\
# archfit settings: every key with its default. Edit what you need; delete the rest.
# Any key can be overridden by an environment variable: ARCHFIT_<SECTION>__<KEY> in upper
# snake case, e.g. ARCHFIT_POLICY__FAILURE_POLICY=fail-closed. `archfit config` prints
# the effective settings; this file is `archfit config --defaults`.
"""


def field_docs(cls: type[Any]) -> dict[str, str]:
    """The docstring under each field of a settings class, by field name."""
    return {name: " ".join(doc.split()) for name, doc in _FIELD_DOC.findall(inspect.getsource(cls))}


def table(cls: type[Any] = Settings, prefix: str = "") -> list[tuple[str, str, str, str]]:
    """(key, env var, default, meaning) for every leaf setting."""
    rows: list[tuple[str, str, str, str]] = []
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    defaults = cls()
    for f in dataclasses.fields(cls):
        key = prefix + camel(f.name)
        if dataclasses.is_dataclass(hints[f.name]):
            rows.extend(table(hints[f.name], key + "."))
            continue
        env = ENV_PREFIX + "__".join(_snake(part).upper() for part in key.split("."))
        rows.append((key, env, _flow(getattr(defaults, f.name)), docs.get(f.name, "")))
    return rows


def markdown_table() -> str:
    lines = ["| key | env | default | meaning |", "|---|---|---|---|"]
    for key, env, default, doc in table():
        meaning = doc.replace("|", r"\|")  # a pipe would split the Markdown cell
        lines.append(f"| `{key}` | `{env}` | `{default}` | {meaning} |")
    return "\n".join(lines) + "\n"


def commented_defaults() -> str:
    """config/archfit.yaml: every setting at its default, each under its meaning."""
    return _HEADER + "\n" + "\n".join(_section(Settings, Settings(), 0)).rstrip() + "\n"


def _section(cls: type[Any], obj: Any, indent: int) -> list[str]:
    out: list[str] = []
    docs = field_docs(cls)
    hints = typing.get_type_hints(cls)
    pad = " " * indent
    for f in dataclasses.fields(cls):
        out.extend(f"{pad}# {line}" for line in textwrap.wrap(docs.get(f.name, ""), 96 - indent))
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(hints[f.name]):
            out.append(f"{pad}{camel(f.name)}:")
            out.extend(_section(hints[f.name], value, indent + 2))
            out.append("")
        else:
            out.append(f"{pad}{camel(f.name)}: {_flow(value)}")
    return out


def _flow(value: Any) -> str:
    if dataclasses.is_dataclass(value):
        value = to_mapping(value)
    elif isinstance(value, tuple):
        value = list(value)
    text: str = yaml.safe_dump(value, default_flow_style=True, width=1000)
    return text.removesuffix("\n").removesuffix("\n...").strip()


def _snake(key: str) -> str:
    return "".join(f"_{ch.lower()}" if ch.isupper() else ch for ch in key)
