"""Request JSON: bounded before parsing, exact for big integers, deep nesting a clear error."""

from __future__ import annotations

import pytest

from extender.once import OncePerCause
from extender.wire import wire_json
from tests.support.clock import FakeClock


@pytest.mark.parametrize(
    "literal",
    [
        b"18446744073709551615",  # u64 max: orjson keeps it
        b"18446744073709551616",  # one above
        b"-9223372036854775809",  # one below i64
        b"123456789012345678901234567890",
        b"1.5",
        b"-0.00025",
    ],
)
def test_numbers_survive_a_round_trip_byte_for_byte(literal):
    """What is read is written back as the same literal."""
    assert b'{"n":' + literal + b"}" == wire_json.dumps(wire_json.loads(b'{"n":' + literal + b"}"))


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"[" * 1100 + b"]" * 1100, "not valid JSON"),
        (b'{"n":NaN,"big":18446744073709551616}', "NaN is not a JSON number"),
        (
            b"[" + b",".join([b"{}"] * (wire_json.MAX_JSON_CONTAINERS + 1)) + b"]",
            "JSON objects and arrays",
        ),
        (b'{"big":18446744073709551616,', "not valid JSON"),
        (b"[" + b",".join([b'"a"'] * wire_json.MAX_VALUES) + b"]", "JSON values"),
        (b"[" + b",".join([b"1.5"] * wire_json.MAX_VALUES) + b"]", "JSON values"),
    ],
)
def test_bodies_out_of_bounds_are_a_json_error_naming_the_problem(body, problem):
    """Each is refused with a message, never a RecursionError or a float."""
    with pytest.raises(wire_json.JsonError, match=problem):
        wire_json.loads(body)


def test_nesting_deeper_than_python_writes_is_a_json_error():
    """orjson reads 1,024 levels; writing them back fails cleanly, not with a RecursionError."""
    value = wire_json.loads(b"[" * 1020 + b"]" * 1020)
    with pytest.raises(wire_json.JsonError, match="RecursionError"):
        wire_json.dumps(value)


def test_a_cause_is_logged_once_per_interval_with_the_count_held_back():
    """Three of one cause in a minute: one line; the next minute's line says two were held."""
    clock = FakeClock()
    once = OncePerCause(interval=60, clock=clock)
    first = [once.log_now("bad_request:column 7"), once.log_now("bad_request:column 9")]
    other = once.log_now("no_node_index:")
    third = once.log_now("bad_request:column 12")
    clock.advance(61)
    assert ([0, None], 0, None, 2) == (first, other, third, once.log_now("bad_request:column 1"))


def test_the_table_of_causes_is_bounded():
    """A flood of distinct causes keeps only the newest `max_causes`."""
    once = OncePerCause(max_causes=2, clock=FakeClock())
    logged = [once.log_now(cause) for cause in ("a", "b", "c", "a")]
    assert [0, 0, 0, 0] == logged


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b'{"name":"web-\xff\xfe"}', "body is not UTF-8: byte 0xff at offset 13"),
        (b'{"big":18446744073709551616,"n":"\xc3"}', "body is not UTF-8: byte 0xc3 at offset"),
        (b'{"big":18446744073709551616,"n":"\\ud800"}', "lone surrogate escape"),
        (b'{"big":18446744073709551616,"\\uDC00":1}', "lone surrogate escape"),
    ],
)
def test_text_that_is_not_unicode_is_a_json_error_on_either_parser(body, problem):
    """Invalid bytes and half a UTF-16 pair are refused, also where the standard library parses."""
    with pytest.raises(wire_json.JsonError) as raised:
        wire_json.loads(body)
    assert problem in str(raised.value)


def test_a_surrogate_pair_escape_is_one_character_and_accepted():
    """An escaped pair is a real character (U+1F600): only a lone half is refused."""
    expected = {"big": 18446744073709551616, "n": "\U0001f600"}
    assert expected == wire_json.loads(b'{"big":18446744073709551616,"n":"\\ud83d\\ude00"}')
