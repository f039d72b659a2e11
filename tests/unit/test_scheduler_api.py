"""The extender wire contract: parsing ExtenderArgs and rendering results exactly."""

import orjson
import pytest

from extender.scheduler_api import WireError, parse_args, render_filter, render_priorities
from tests.objects import args_full, args_names, node, pod


def test_node_names_requests_get_node_names_answers():
    """nodeCacheCapable: true → NodeNames in, NodeNames out, Nodes null."""
    args = parse_args(orjson.dumps(args_names(pod("a"), "n1", "n2")))
    body = orjson.loads(render_filter(args, ["n2"], {}, {"n1": "r"}))
    assert {
        "Nodes": None,
        "NodeNames": ["n2"],
        "FailedNodes": {},
        "FailedAndUnresolvableNodes": {"n1": "r"},
        "Error": "",
    } == body


def test_full_node_requests_get_the_kept_node_objects_back_unmodified():
    """nodeCacheCapable: false → the kept v1.Node objects, byte-for-byte equal as JSON."""
    n1, n2 = node("n1", "amd64"), node("n2", "arm64")
    args = parse_args(orjson.dumps(args_full(pod("a"), n1, n2)))
    body = orjson.loads(render_filter(args, ["n2"], {"n1": "x"}, {}))
    assert ({"metadata": {}, "items": [n2]}, None) == (body["Nodes"], body["NodeNames"])


def test_scores_are_integers_clamped_to_zero_through_ten():
    """A float score would break Go's decoding; out-of-range ones are clamped."""
    assert [
        {"Host": "a", "Score": 10},
        {"Host": "b", "Score": 0},
        {"Host": "c", "Score": 7},
    ] == orjson.loads(render_priorities({"a": 99, "b": -3, "c": 7}))
    assert b'"Score":7}' in render_priorities({"c": 7.9})  # type: ignore[dict-item]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "not valid JSON"),
        (b"[]", "must be a JSON object"),
        (b'{"Nodes": null, "NodeNames": ["a"]}', "Pod is missing"),
        (b'{"Pod": [], "NodeNames": ["a"]}', "Pod must be an object"),
        (b'{"Pod": {}, "Nodes": null, "NodeNames": null}', "both Nodes and NodeNames are null"),
        (b'{"Pod": {}}', "both Nodes and NodeNames are null"),
        (b'{"Pod": {}, "NodeNames": "a"}', "NodeNames must be a list of strings"),
        (b'{"Pod": {}, "NodeNames": [1]}', "NodeNames must be a list of strings"),
        (b'{"Pod": {}, "Nodes": []}', "Nodes must be an object"),
        (b'{"Pod": {}, "Nodes": {"items": {}}}', "Nodes.items must be a list"),
        (b'{"Pod": {}, "Nodes": {"items": [1]}}', r"Nodes.items\[0\] must be an object"),
        (b'{"Pod": {}, "Nodes": {"items": [{}]}}', r"Nodes.items\[0\].metadata.name is missing"),
    ],
)
def test_malformed_args_raise_a_wire_error_naming_the_problem(body, message):
    """Every malformed body is a WireError with a message an operator can act on."""
    with pytest.raises(WireError, match=message):
        parse_args(body)
