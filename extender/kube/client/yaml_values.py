"""YAML read as client-go reads a kubeconfig: the first document, by go-yaml v2's rules
(sigs.k8s.io/yaml's YAMLToJSON), to the values its JSON would carry.

PyYAML's libyaml parser gives the events; what they mean is go-yaml's, not PyYAML's: `y`, `n`,
`on` and `off` are booleans, `017` is octal, a date stays a string, `<<` merges maps, and
aliases are expanded only within go-yaml's budget (a document whose decoding is mostly alias
expansion is refused as "excessive aliasing", so an alias bomb costs nothing). Map keys
become strings, as in JSON.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml

from extender.errors import ArchfitError

_STR = "tag:yaml.org,2002:str"
_BINARY = "tag:yaml.org,2002:binary"
_MERGE = "tag:yaml.org,2002:merge"
_RESOLVABLE = frozenset({
    "", _STR, "tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:null", "tag:yaml.org,2002:timestamp",
})  # fmt: skip
_TRUE = ("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON")
_FALSE = ("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF")
_WORDS: dict[str, Any] = {
    **dict.fromkeys(_TRUE, True),
    **dict.fromkeys(_FALSE, False),
    **dict.fromkeys(("", "~", "null", "Null", "NULL"), None),
    **dict.fromkeys((".nan", ".NaN", ".NAN"), math.nan),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), -math.inf),
}  # fmt: skip
"""go-yaml v2's resolve table: the plain scalars that are not strings by their spelling."""
_HINTED = frozenset("+-0123456789yYnNtTfFoO~.")
"""First characters go-yaml looks further at; a plain scalar starting otherwise is a string."""
_GO_INT = re.compile(r"[+-]?(0[bB][01]+|0[oO][0-7]+|0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")
_YAML_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_DOT_FLOAT = re.compile(r"\.[0-9]+([eE][-+]?[0-9]+)?")
_INT64 = 1 << 63
_UINT64 = 1 << 64

ALIAS_FLOOR = 100
DECODE_FLOOR = 1000
"""go-yaml checks the share of alias expansion once a document has this many aliased and
decoded nodes (decode.go's `allowedAliasRatio`)."""
_RATIO_LOW, _RATIO_HIGH = 400_000, 4_000_000


class YAMLError(ArchfitError, ValueError):
    """The text is no YAML client-go reads."""


@dataclass(slots=True)
class _Frame:
    """A sequence or mapping being read: its value so far, and for a mapping the key read
    last (or that the next value merges)."""

    value: Any
    anchor: str | None
    size: int = 1
    """Nodes decoded for it so far, aliases expanded: what an alias of it costs."""
    key: Any = None
    has_key: bool = False
    merging: bool = False


_NO_KEY = object()


def first_document(data: bytes) -> Any:
    """The first document of `data` as JSON values (dict with str keys, list, str, int,
    float, bool, None); None for a stream without a document. Raises YAMLError."""
    try:
        return _Reader().first_document(yaml.parse(data, Loader=yaml.CSafeLoader))
    except yaml.YAMLError as error:
        raise YAMLError(f"yaml: {error}") from error
    except UnicodeDecodeError as error:
        raise YAMLError(f"yaml: invalid UTF-8: {error}") from error


class _Reader:
    """go-yaml v2's parser and decoder into interface{} in one pass over the events.

    go-yaml counts every node it decodes, an alias's target once more per alias, and refuses
    the document once more than ALIAS_FLOOR of DECODE_FLOOR decodes came from aliases and their
    share passes `_allowed_alias_ratio`. The share only grows while an alias is expanded, so
    checking after each expansion, with the target's size, refuses what go-yaml refuses. The
    value of an alias is its target's, shared (nothing here changes a value once read).
    """

    def __init__(self) -> None:
        self.decoded = 0
        self.aliased = 0
        self.anchors: dict[str, tuple[Any, int, bool]] = {}
        """name -> (value, size, whether it is a mapping); a frame open under its name is
        not there yet, so an alias of it inside itself is found in `open_anchors`."""
        self.open_anchors: set[str] = set()

    def first_document(self, events: Iterator[Any]) -> Any:
        """The events are libyaml's (untyped): dispatched on their exact type, for speed."""
        stack: list[_Frame] = []
        root: Any = _NO_KEY
        for event in events:
            kind = type(event)
            if kind is yaml.ScalarEvent:
                self.decoded += 1
                frame = stack[-1] if stack else None
                if frame is not None and _is_merge_key(frame, event):
                    self.decoded -= 1  # go-yaml does not decode a merge key
                    frame.merging = True
                    continue
                value = _scalar(event)
                if event.anchor:
                    self.anchors[event.anchor] = (value, 1, False)
                root = self.add(stack, value, 1, False, root)
            elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
                self.decoded += 1
                anchor = event.anchor
                if anchor:
                    self.open_anchors.add(anchor)
                stack.append(_Frame({} if kind is yaml.MappingStartEvent else [], anchor))
            elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
                frame = stack.pop()
                if frame.anchor:
                    self.open_anchors.discard(frame.anchor)
                    self.anchors[frame.anchor] = (
                        frame.value,
                        frame.size,
                        isinstance(frame.value, dict),
                    )
                root = self.add(stack, frame.value, frame.size, isinstance(frame.value, dict), root)
            elif kind is yaml.AliasEvent:
                root = self.alias(stack, event.anchor or "", root)
            elif kind is yaml.DocumentEndEvent:
                break
        return None if root is _NO_KEY else root

    def alias(self, stack: list[_Frame], name: str, root: Any) -> Any:
        if name in self.open_anchors:
            raise YAMLError(f"yaml: anchor '{name}' value contains itself")
        found = self.anchors.get(name)
        if found is None:
            raise YAMLError(f"yaml: unknown anchor '{name}' referenced")
        value, size, is_map = found
        self.decoded += 1 + size
        self.aliased += size
        if (
            self.aliased > ALIAS_FLOOR
            and self.decoded > DECODE_FLOOR
            and self.aliased / self.decoded > _allowed_alias_ratio(self.decoded)
        ):
            raise YAMLError("yaml: document contains excessive aliasing")
        return self.add(stack, value, 1 + size, is_map, root)

    def add(self, stack: list[_Frame], value: Any, size: int, is_map: bool, root: Any) -> Any:
        """Put a value read whole into the frame that holds it; returns the document's root."""
        if not stack:
            return value
        frame = stack[-1]
        frame.size += size
        if isinstance(frame.value, list):
            frame.value.append(value)
        elif frame.merging:
            frame.merging = False
            _merge(frame.value, value, is_map)
        elif not frame.has_key:
            if isinstance(value, dict | list):
                raise YAMLError(f"yaml: invalid map key: {value!r}")
            frame.key, frame.has_key = _key(value), True
        else:
            frame.value[frame.key] = value
            frame.has_key = False
        return root


def _is_merge_key(frame: _Frame, event: yaml.ScalarEvent) -> bool:
    return (
        isinstance(frame.value, dict)
        and not frame.has_key
        and event.value == "<<"
        and ((event.implicit[0] and not event.tag) or event.tag == _MERGE)
    )


def _merge(into: dict[str, Any], value: Any, is_map: bool) -> None:
    """`<<: value`: a map's keys, or those of a sequence of maps (earlier maps win), set in
    `into`, over what it holds (go-yaml merges into the same map, in document order)."""
    if isinstance(value, dict):
        into.update(value)
        return
    if isinstance(value, list) and all(isinstance(item, dict) for item in value):
        for item in reversed(value):
            into.update(item)
        return
    raise YAMLError("yaml: map merge requires map or sequence of maps as the value")


def _allowed_alias_ratio(decoded: int) -> float:
    if decoded <= _RATIO_LOW:
        return 0.99
    if decoded >= _RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * ((decoded - _RATIO_LOW) / (_RATIO_HIGH - _RATIO_LOW))


def _scalar(event: yaml.ScalarEvent) -> Any:
    text, tag = event.value, event.tag or ""
    if not event.implicit[0] and not tag:
        return text  # quoted
    if tag not in _RESOLVABLE:
        if tag == _BINARY:
            try:
                return base64.b64decode(text, validate=False).decode("utf-8", "surrogateescape")
            except (binascii.Error, ValueError) as error:
                raise YAMLError("yaml: !!binary value contains invalid base64 data") from error
        return text  # a tag of its own: the text, as go-yaml gives it to interface{}
    resolved = _resolve(text) if tag != _STR else text
    if tag in ("", _STR, "tag:yaml.org,2002:timestamp") or _tag_of(resolved) == tag:
        return resolved
    if (
        tag == "tag:yaml.org,2002:float"
        and isinstance(resolved, int)
        and not isinstance(resolved, bool)
    ):
        return float(resolved)
    raise YAMLError(f"yaml: cannot decode `{text}` as a {tag.rsplit(':', 1)[-1]}")


def _tag_of(value: Any) -> str:
    if value is None:
        return "tag:yaml.org,2002:null"
    if isinstance(value, bool):
        return "tag:yaml.org,2002:bool"
    if isinstance(value, int):
        return "tag:yaml.org,2002:int"
    if isinstance(value, float):
        return "tag:yaml.org,2002:float"
    return _STR


def _resolve(text: str) -> Any:
    """A plain scalar's value by go-yaml v2's `resolve`."""
    if text in _WORDS:
        return _WORDS[text]
    if not text or text[0] not in _HINTED:
        return text
    first = text[0]
    if first == ".":
        return float(text) if _DOT_FLOAT.fullmatch(text) else text
    if first not in "+-0123456789":
        return text  # y, n, t, f, o, ~ words are in the table; anything else is a string
    plain = text.replace("_", "")
    if _GO_INT.fullmatch(plain):
        number = _go_int(plain)
        if -_INT64 <= number < _UINT64:
            return number
    if _YAML_FLOAT.fullmatch(plain):
        return float(plain)
    return text


def _go_int(text: str) -> int:
    sign = -1 if text.startswith("-") else 1
    digits = text.lstrip("+-")
    lowered = digits[:2].lower()
    if lowered in ("0b", "0o", "0x"):
        return sign * int(digits[2:], {"0b": 2, "0o": 8, "0x": 16}[lowered])
    if len(digits) > 1 and digits.startswith("0"):
        return sign * int(digits, 8)
    return sign * int(digits)


def _key(name: Any) -> str:
    """A map key as sigs.k8s.io/yaml writes it into JSON."""
    if isinstance(name, str):
        return name
    if isinstance(name, bool):
        return "true" if name else "false"
    if isinstance(name, int):
        return str(name)
    if isinstance(name, float):
        return _float32_text(name)
    raise YAMLError(f"unsupported map key of type: {type(name).__name__}, key: {name!r}")


def _float32_text(number: float) -> str:
    if math.isnan(number):
        return ".nan"
    if math.isinf(number):
        return ".inf" if number > 0 else "-.inf"
    return f"{number:.7g}"
