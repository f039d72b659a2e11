"""JSON for request bodies: a cheap shape check before parsing, exact big integers, deep nesting.

Pure functions. orjson is fast but reads integers above 64 bits as floats and writes at
most 255 levels of nesting; kube-scheduler wants kept Node objects back unmodified, so
bodies it cannot round-trip fall back to the standard library, which can.
"""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec
import orjson

from extender.errors import InputError

MAX_JSON_CONTAINERS = 1_000_000
"""JSON objects and arrays one body may hold (counted as `{` and `[` bytes, so an upper bound).

A Node as kube-scheduler sends it holds about 27 (tests/objects.py), plus two per
entry of `status.images`: 5,000 nodes with 50 images each stay under 650,000. A body
of empty objects at 3 bytes each would otherwise cost orjson about 0.22 s and 100
bytes of memory per million bytes read, holding the event loop the whole time.
"""

MAX_VALUES = 2_000_000
"""JSON values one decoded body may hold, of any type (counted as `,` and `:` bytes plus
`[`, so an upper bound: a separator inside a string counts too).

A Node of tests/objects.py holds about 170, plus eight per entry of `status.images`:
5,000 nodes with 20 images each stay under 1,700,000. Each value costs the parser
up to 72 bytes (a short string): a 32 MiB array of one-letter strings would take
about 600 MiB, two million of them about 150 MiB.
"""

# Digits map to "0" and a minus sign stays, everything else to a space: then a run of
# 20 zeros is a number of 20 digits or more (above u64), and "-" plus 19 zeros one
# below i64. Strings with such runs only cost the slower parser, never a wrong answer.
_DIGITS = bytes(
    ord("0") if chr(b).isdigit() and b < 128 else b if b == ord("-") else ord(" ")
    for b in range(256)
)
_ABOVE_U64 = b"0" * 20
_BELOW_I64 = b"-" + b"0" * 19


class JsonError(InputError):
    """The body cannot be read or written as JSON within the bounds; the message says why."""


def check_bounds(body: bytes | memoryview | msgspec.Raw, *, values: bool = True) -> None:
    """Refuse a body that holds more objects and arrays (and, with `values`, more values)
    than any real request, before any parser builds them. Raises JsonError.

    A body of at most MAX_JSON_CONTAINERS bytes is not counted: each byte counts once at
    most, so it holds no more containers than that, nor more than MAX_VALUES values. Every
    AdmissionReview and NodeNames body is one, and the four counts would cost four passes
    over it (about 5 us of a 2 KB pod review)."""
    size = len(body) if isinstance(body, bytes) else memoryview(body).nbytes
    if size <= min(MAX_JSON_CONTAINERS, MAX_VALUES - 1):
        return
    data = body if isinstance(body, bytes) else memoryview(body).tobytes()
    arrays = data.count(b"[")
    containers = data.count(b"{") + arrays
    if containers > MAX_JSON_CONTAINERS:
        raise JsonError(
            f"body holds {containers} JSON objects and arrays, more than any real request "
            f"({MAX_JSON_CONTAINERS})"
        )
    if not values:
        return
    count = data.count(b",") + data.count(b":") + arrays + 1
    if count > MAX_VALUES:
        raise JsonError(
            f"body holds up to {count} JSON values, more than any real request ({MAX_VALUES})"
        )


def check_objects(body: bytes | memoryview | msgspec.Raw) -> None:
    """Refuse a value that holds more JSON objects than any real request (MAX_JSON_CONTAINERS)
    before a typed decoder builds one struct per object: one count of `{`, where
    check_bounds makes two. Only for a decoder that builds nothing from an array but the
    objects in it (a list of Structs): an array where a Struct belongs fails its decoding
    at once. Raises JsonError.

    A value of at most twice MAX_JSON_CONTAINERS bytes is not counted: each object the
    decoder completes takes two bytes of it (`{` and `}`), and one it leaves open when the
    bytes turn out invalid is one level of nesting (the recursion limit bounds those). So
    500 full Nodes, 1.2 MB, cost no pass (docs/benchmarks.md)."""
    if len(body) <= 2 * MAX_JSON_CONTAINERS:
        return
    objects = (body if isinstance(body, bytes) else memoryview(body).tobytes()).count(b"{")
    if objects > MAX_JSON_CONTAINERS:
        raise JsonError(
            f"body holds {objects} JSON objects, more than any real request ({MAX_JSON_CONTAINERS})"
        )


def check_utf8(body: bytes) -> None:
    """Refuse a body that is not UTF-8 (RFC 8259 §8.1), wherever the bad bytes sit: parsers
    skip the fields they do not read without looking, and kept fragments are decoded later
    or echoed back as they came. Raises JsonError naming the first bad byte."""
    if body.isascii():  # almost every body, and no copy made to know it
        return
    try:
        body.decode()
    except UnicodeDecodeError as error:
        raise JsonError(
            f"body is not UTF-8: byte 0x{body[error.start]:02x} at offset {error.start}"
        ) from error


def loads(body: bytes) -> Any:
    """Parse a request body: orjson, or the standard library when it holds integers
    orjson would turn into floats. Raises JsonError naming the problem."""
    check_bounds(body)
    check_utf8(body)
    if _has_big_integer(body):
        return _exact_loads(body)
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise JsonError(f"body is not valid JSON: {error}") from error


def dumps(value: Any) -> bytes:
    """Encode an answer: orjson, or the standard library for integers above 64 bits and
    nesting deeper than orjson writes. Raises JsonError when neither can."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        pass
    try:
        return json.dumps(
            value, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        ).encode()
    except (RecursionError, ValueError, TypeError) as error:
        raise JsonError(f"cannot encode the answer: {type(error).__name__}") from error


def _has_big_integer(body: bytes) -> bool:
    digits = body.translate(_DIGITS)
    return _ABOVE_U64 in digits or _BELOW_I64 in digits


def _reject_constant(name: str) -> Any:
    raise JsonError(f"body is not valid JSON: {name} is not a JSON number")


def _exact_loads(body: bytes) -> Any:
    try:
        value = json.loads(body, parse_constant=_reject_constant)
    except RecursionError as error:
        raise JsonError("body is not valid JSON: nested too deeply") from error
    except (ValueError, UnicodeDecodeError) as error:
        if isinstance(error, JsonError):
            raise
        raise JsonError(f"body is not valid JSON: {error}") from error
    if _SURROGATE_ESCAPE.search(body) and _has_lone_surrogate(value):
        raise JsonError(
            "body is not valid JSON: a lone surrogate escape (\\ud800-\\udfff) is not a "
            "Unicode character"
        )
    return value


# The standard library reads "\\ud800" alone as a string no encoder can write again;
# orjson and msgspec refuse it. A pair is one character: only a lone half is refused.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _has_lone_surrogate(value: Any) -> bool:
    """Whether a key or string anywhere in `value` holds half a UTF-16 pair (iteratively:
    the value may be nested as deep as the parser allows)."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            pending.extend(item)
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False
