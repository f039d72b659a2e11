"""The extender wire contract: parsing ExtenderArgs and rendering results exactly."""

import orjson
import pytest

from extender.core.node_parts import NodeDecodeError, decode_node
from extender.wire.scheduler_api import (
    WireError,
    parse_args,
    render_filter,
    render_priorities,
)
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
        (b"[]", "Expected `object`, got `array`"),
        (b'{"Nodes": null, "NodeNames": ["a"]}', "Pod is missing"),
        (
            b'{"Pod": [], "NodeNames": ["a"]}',
            "Pod is not a v1.Pod: Expected `object | null`, got `array`",
        ),
        (b'{"Pod": {}, "Nodes": null, "NodeNames": null}', "both Nodes and NodeNames are null"),
        (b'{"Pod": {}}', "both Nodes and NodeNames are null"),
        (b'{"Pod": {}, "NodeNames": "a"}', r"got `str` - at `\$\.NodeNames`"),
        (b'{"Pod": {}, "NodeNames": [1]}', r"got `int` - at `\$\.NodeNames\[0\]`"),
        (b'{"Pod": {}, "Nodes": []}', r"got `array` - at `\$\.Nodes`"),
        (b'{"Pod": {}, "Nodes": {"items": {}}}', r"got `object` - at `\$\.Nodes\.items`"),
        (b'{"Pod": {}, "Nodes": {"items": [1]}}', r"Nodes.items\[0\] is not a v1.Node"),
        (b'{"Pod": {}, "Nodes": {"items": [{}]}}', r"Nodes.items\[0\].metadata.name is missing"),
    ],
)
def test_malformed_args_raise_a_wire_error_naming_the_problem(body, message):
    """Every malformed body is a WireError with a message an operator can act on."""
    with pytest.raises(WireError, match=message):
        parse_args(body)


def test_kept_nodes_go_back_as_the_exact_bytes_that_came():
    """Whitespace, key order, escapes and integers above 64 bits survive untouched:
    kube-scheduler gets its Node objects back unmodified, never re-encoded."""
    odd = (
        b'{ "status": {"nodeInfo": {"architecture": "arm64"}, "n": 18446744073709551616},\n'
        b'  "metadata": {"labels": {"kubernetes.io/arch": "arm64"}, "name": "n\\u0032"} }'
    )
    plain = orjson.dumps(node("n1", "amd64"))
    body = b'{"Pod": {}, "Nodes": {"metadata": {"resourceVersion": "7"}, "items": [%s, %s]}}' % (
        plain,
        odd,
    )
    args = parse_args(body)
    out = render_filter(args, ["n2"], {}, {"n1": "r"})
    assert ["n1", "n2"] == args.names
    assert b'"Nodes":{"metadata":{"resourceVersion": "7"},"items":[' + odd + b"]}" in out


def test_full_nodes_share_one_facts_object_per_platform_and_runtime():
    """Placement compares facts by identity: 40 nodes of two platforms give two objects."""
    nodes = [node(f"n{i}", "arm64" if i % 2 else "amd64") for i in range(40)]
    args = parse_args(orjson.dumps(args_full(pod("a"), *nodes)))
    assert 2 == len({id(f) for f in args.facts})
    assert {"linux/amd64", "linux/arm64"} == {str(p) for p, _, _ in args.facts}


@pytest.mark.parametrize(
    "metadata",
    [
        {"name": "n1", "labels": {"kubernetes.io/arch": 7}},
        {"name": "n1", "labels": ["kubernetes.io/arch"]},
        {"name": "n1", "labels": None},
    ],
)
def test_a_node_with_wrongly_typed_labels_has_an_unknown_platform_not_a_400(metadata):
    """Only what archfit reads is typed; a wrong type there leaves the platform unknown."""
    bad = {"metadata": metadata, "status": {"nodeInfo": "x"}}
    args = parse_args(orjson.dumps({"Pod": {}, "Nodes": {"items": [bad]}}))
    assert (["n1"], None) == (args.names, args.facts[0][0])


def test_a_pod_of_a_million_empty_objects_is_refused_before_it_is_built():
    """The container bound applies to the pod, the one part decoded into objects."""
    pod_body = b"[" + b",".join([b"{}"] * 1_000_001) + b"]"
    with pytest.raises(WireError, match="JSON objects and arrays"):
        parse_args(b'{"Pod": {"x": %s}, "NodeNames": []}' % pod_body)


@pytest.mark.parametrize(
    "body",
    [
        b'{"Pod":{"metadata":{"name":"web-\xff"}},"NodeNames":["n"]}',
        b'{"Pod":{},"NodeNames":["n\xff"]}',
        b'{"Pod":{},"Nodes":{"items":[{"metadata":{"name":"n","labels":{"kubernetes.io/arch":"\xff"}}}]}}',
        b'{"Pod":{},"Nodes":{"items":[{"metadata":{"name":"n"},"spec":{"x":"\xfe"}}]}}',
    ],
    ids=["pod", "node names", "a node label", "a node field archfit skips"],
)
def test_bytes_that_are_not_utf8_are_a_wire_error_wherever_they_sit(body):
    """No kept fragment reaches a later decode, or the answer, with invalid bytes in it."""
    with pytest.raises(WireError) as raised:
        parse_args(body)
    assert str(raised.value).startswith("body is not UTF-8: byte 0x")


@pytest.mark.parametrize(
    "raw",
    [
        b'{"metadata":{"name":"n\xff"}}',
        b'{"metadata":{"name":1,"labels":{"kubernetes.io/arch":"\xff"}}}',
    ],
    ids=["typed", "loose"],
)
def test_a_node_that_is_not_utf8_is_a_node_decode_error(raw):
    """The node index's decode names invalid bytes as a NodeDecodeError, not UnicodeDecodeError."""
    with pytest.raises(NodeDecodeError):
        decode_node(raw)


def test_hosts_scored_alike_are_rendered_as_each_host_its_own_entry():
    """One score for every host takes the replace in C; the entries are as msgspec writes
    them, and a name ending in a quote and a comma (`","` with the next) is still one host."""
    names = ["n1", 'ends",', "n3"]
    answer = render_priorities(dict.fromkeys(names, 10))
    assert [{"Host": name, "Score": 10} for name in names] == orjson.loads(answer)


def test_a_list_of_one_host_scored_renders_one_entry():
    """The replace has nothing to replace: one entry, closed."""
    assert b'[{"Host":"n1","Score":3}]' == render_priorities({"n1": 3})


def test_every_node_passing_answers_the_names_as_their_bytes_came():
    """NodeNames with escapes and spaces go back as they came: the same names to a decoder."""
    body = b'{"Pod":%s,"NodeNames":[ "n\\u0031" , "n2"]}' % orjson.dumps(pod("a"))
    args = parse_args(body)
    answer = render_filter(args, args.names, {}, {})
    assert (["n1", "n2"], b'[ "n\\u0031" , "n2"]') == (
        orjson.loads(answer)["NodeNames"],
        answer[answer.index(b"[") : answer.index(b"]") + 1],
    )


def test_a_full_node_body_as_kube_scheduler_writes_it_is_answered_from_one_decoding():
    """Pod, Nodes, then a null NodeNames: the parts come from the pass over the body, and
    the answer still carries every kept Node as the bytes that came."""
    nodes = [node("n1", "amd64"), node("n2", "arm64")]
    body = b'{"Pod":%s,"Nodes":%s,"NodeNames":null}' % (
        orjson.dumps(pod("a")),
        orjson.dumps({"metadata": {}, "items": nodes}),
    )
    args = parse_args(body)
    kept = render_filter(args, ["n2"], {}, {})
    assert (True, ["n1", "n2"], True) == (
        args.full is not None and args.full.whole,
        args.names,
        b'"items":[' + orjson.dumps(nodes[1]) + b"]" in kept,
    )


def test_a_node_list_of_a_million_empty_objects_is_refused_before_any_is_built():
    """Each item becomes a Struct: the objects are counted first, on the one-pass path too."""
    items = b",".join([b"{}"] * 1_000_001)
    with pytest.raises(WireError, match=r"Nodes: body holds 1000002 JSON objects, more than"):
        parse_args(b'{"Pod":{},"Nodes":{"items":[%s]},"NodeNames":null}' % items)


def test_a_full_node_answer_keeping_every_node_is_the_node_list_sliced_from_the_body():
    """The NodeList is found once, where kube-scheduler writes it, and goes back as that slice."""
    node_list = orjson.dumps({"metadata": {}, "items": [node("n1"), node("n2", "arm64")]})
    head = b'{"Pod":%s,"Nodes":' % orjson.dumps(pod("a"))
    body = head + node_list + b',"NodeNames":null}'
    args = parse_args(body)
    answer = render_filter(args, ["n1", "n2"], {}, {})
    assert ((len(head), len(head) + len(node_list)), node_list, True) == (
        args.full and args.full.span,
        bytes(args.full.raw()) if args.full else None,
        answer.startswith(b'{"Nodes":' + node_list + b',"NodeNames":null,'),
    )


_POD = orjson.dumps(pod("a"))
_N1, _N2 = orjson.dumps(node("n1")), orjson.dumps(node("n2", "arm64"))


@pytest.mark.parametrize(
    ("body", "names", "items"),
    [
        (
            b'{"Pod":{"x":1,"Nodes":{"items":[]}},"Nodes":{"items":[%s,%s]},"NodeNames":null}'
            % (_N1, _N2),
            ["n1", "n2"],
            [_N2],
        ),
        (
            b'{"Pod":%s,"Nodes":{"items":[%s]},"Nodes":{"items":[%s,%s]}}' % (_POD, _N1, _N1, _N2),
            ["n1", "n2"],
            [_N2],
        ),
        (
            b'{"Pod":%s,"Nodes":{"items":[%s,%s]},"More":{}}' % (_POD, _N1, _N2),
            ["n1", "n2"],
            [_N2],
        ),
        (
            b'{"Pod":%s,"Nodes":{"items":[%s,%s]},"NodeNames":null }' % (_POD, _N1, _N2),
            ["n1", "n2"],
            [_N2],
        ),
    ],
    ids=["a Nodes key inside the pod", "Nodes twice", "a key after Nodes", "a space at the end"],
)
def test_a_full_node_body_laid_out_otherwise_is_read_the_careful_way(body, names, items):
    """Only a body whose pod and NodeList each decode as one value is sliced; any other is
    decoded whole, and answers with the Nodes msgspec reads (the last of two)."""
    args = parse_args(body)
    answer = orjson.loads(render_filter(args, ["n2"], {}, {}))
    assert (False, names, [orjson.loads(item) for item in items]) == (
        args.full is None or args.full.whole,
        args.names,
        answer["Nodes"]["items"],
    )
