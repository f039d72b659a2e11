"""The kube-scheduler extender wire types (k8s.io/kube-scheduler/extender/v1): parse and render.

The Go types carry no json tags, so keys are the capitalised Go field names and
nil arrives as `null`. Pure functions; see docs/architecture.md, "The extender wire contract".

Requests are decoded with msgspec into the typed shapes below, which is also the check:
a body of the wrong shape fails with msgspec's message and the JSON path of the problem.
Full Node objects (nodeCacheCapable: false) are kept as their original bytes and only
the fields archfit reads are decoded from them (extender.core.node_parts); the kept ones are
returned byte for byte, never re-encoded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import msgspec
import orjson

from extender.core.node_facts import NodeFacts
from extender.core.node_parts import FactsOf, NodeDecodeError, NodeParts, decode_node
from extender.core.platforms import MAX_SCORE
from extender.errors import WireError as WireError
from extender.wire import wire_json

MAX_NODES = 10_000
"""Candidates one call may carry: twice the 5,000 nodes Kubernetes is tested to scale to."""

_MAX_NAME_LIST_BYTES = MAX_NODES * (253 + len('"",')) + len("[]")
"""The longest NodeNames of MAX_NODES names (a node name is a DNS subdomain, at most 253
characters): checked before the list is decoded, so a longer one builds no strings."""


# The request, as kube-scheduler encodes it (extender/v1 types.go ExtenderArgs).


class _ExtenderArgs(msgspec.Struct):
    Pod: msgspec.Raw = msgspec.Raw(b"null")
    """Kept raw until its size is checked (wire_json.check_bounds)."""
    Nodes: msgspec.Raw = msgspec.Raw(b"null")
    """Kept raw: when every node passes, these very bytes are the answer's Nodes."""
    NodeNames: msgspec.Raw = msgspec.Raw(b"null")
    """Kept raw: its length is checked before any name is built, and when every node
    passes these bytes are the answer's NodeNames."""


class _NodeList(msgspec.Struct):
    """v1.NodeList, each item decoded to the parts archfit reads (extender.core.node_parts)."""

    items: list[NodeParts] | None = None


class _RawNodeList(msgspec.Struct):
    """v1.NodeList with each item kept as its bytes: for an answer that keeps only some."""

    items: list[msgspec.Raw] | None = None
    metadata: msgspec.Raw = msgspec.Raw(b"{}")


class _FullArgs(msgspec.Struct):
    """ExtenderArgs of a full-Node body as kube-scheduler lays it out (_full_args): the pod
    kept raw, the Nodes decoded to their parts, and where the NodeList sits in the body."""

    Pod: msgspec.Raw
    Nodes: _NodeList
    span: tuple[int, int]
    NodeNames: msgspec.Raw = msgspec.Raw(b"null")


_POD_KEY = b'{"Pod":'
_NODES_KEY = b',"Nodes":{'
"""How kube-scheduler's full-Node body begins (Go writes ExtenderArgs' fields in order, with
no spaces): `{"Pod":` the pod `,"Nodes":{`, then the NodeList, then one of _NODES_ENDS."""
_NODES_ENDS = (b'},"NodeNames":null}', b"}}")
"""How that body ends: the NodeList's closing brace, then a null NodeNames (Go) or nothing."""

_args_decoder = msgspec.json.Decoder(_ExtenderArgs)
_value_decoder = msgspec.json.Decoder(msgspec.Raw)
_pod_decoder = msgspec.json.Decoder(dict[str, Any] | None)
_names_decoder = msgspec.json.Decoder(list[str] | None)
_nodes_decoder = msgspec.json.Decoder(_NodeList | None)
_raw_nodes_decoder = msgspec.json.Decoder(_RawNodeList)


# The answers (types.go ExtenderFilterResult and HostPriorityList).


class ExtenderFilterResult(TypedDict):
    Nodes: Any
    """null, or {"metadata": …, "items": [kept Nodes as raw bytes]}."""
    NodeNames: list[str] | None
    FailedNodes: Mapping[str, str]
    FailedAndUnresolvableNodes: Mapping[str, str]
    Error: str


class HostPriority(msgspec.Struct):
    """One entry of a HostPriorityList. A Struct, not a dict: hundreds are built per call."""

    Host: str
    Score: int


@dataclass(frozen=True, slots=True)
class FullNodes:
    """The Nodes of a nodeCacheCapable: false request, as they came."""

    source: bytes | msgspec.Raw
    """The NodeList's original bytes, or with `span` the whole request body holding them."""
    span: tuple[int, int] | None = None
    """Where the NodeList sits in the body `source` (_full_args): sliced, never read again."""

    @property
    def whole(self) -> bool:
        """Whether the NodeList was found in the whole body in the one pass (_full_args)."""
        return self.span is not None

    def raw(self) -> msgspec.Raw | bytes:
        """The NodeList's original bytes: returned as they are when every node is kept."""
        if self.span is None:
            return self.source
        start, end = self.span
        return msgspec.Raw(memoryview(self.source)[start:end])  # a view: nothing copied

    def kept(self, names: Sequence[str], passed: Sequence[str]) -> dict[str, Any]:
        """The NodeList holding only the `passed` nodes, each as its original bytes."""
        listed = _raw_nodes_decoder.decode(self.raw())
        keep = set(passed)
        items = [raw for name, raw in zip(names, listed.items or (), strict=True) if name in keep]
        return {"metadata": listed.metadata, "items": items}


@dataclass(frozen=True, slots=True)
class ExtenderArgs:
    """A decoded ExtenderArgs: the pod and the candidate names, in the scheduler's order."""

    pod: Mapping[str, Any]
    names: list[str]
    facts: list[NodeFacts] | None
    """Each candidate's facts, when the request carried full Nodes; None for NodeNames
    (the node index knows them)."""
    full: FullNodes | None = None
    """The Nodes to echo back (nodeCacheCapable: false); None for NodeNames."""
    names_json: msgspec.Raw | None = None
    """The NodeNames array as it came (NodeNames requests): when every candidate passes,
    these bytes are the answer's NodeNames, so the names are not encoded again."""


def parse_args(
    body: bytes,
    facts_of: FactsOf | None = None,
    pods: Callable[[msgspec.Raw], Mapping[str, Any]] | None = None,
) -> ExtenderArgs:
    """Decode and check an ExtenderArgs body. Raises WireError naming the problem.

    `facts_of` shares NodeFacts between requests (app-wide); a fresh one otherwise.
    `pods` decodes the Pod as `decode_args_pod` does, and may hand out one it decoded before.
    """
    # Nothing but the pod is built into Python objects (Nodes stay raw bytes and only seven
    # strings of each are decoded), so only the pod's bytes need the bound on containers.
    try:
        # Before any decoding: msgspec skips what it does not read without checking it,
        # and would hand invalid bytes in a kept fragment to a later decode, or back.
        wire_json.check_utf8(body)
        full = _full_args(body)
        args: _ExtenderArgs | _FullArgs = _args_decoder.decode(body) if full is None else full
    except wire_json.JsonError as error:
        raise WireError(str(error)) from error
    except RecursionError as error:
        raise WireError("body is not valid JSON: nested too deeply") from error
    except msgspec.ValidationError as error:  # a DecodeError too: test it first
        raise WireError(f"body is not an ExtenderArgs: {error}") from error
    except msgspec.DecodeError as error:
        raise WireError(f"body is not valid JSON: {error}") from error
    pod = (decode_args_pod if pods is None else pods)(args.Pod)
    if len(args.NodeNames) > _MAX_NAME_LIST_BYTES:
        raise WireError(f"NodeNames is longer than {MAX_NODES} node names can be")
    try:
        names: list[str] | None = _names_decoder.decode(args.NodeNames)
    except msgspec.DecodeError as error:  # only the wrong type: the body parsed already
        raise WireError(f"body is not an ExtenderArgs: {_within('NodeNames', error)}") from error
    if names is not None:
        _check_count("NodeNames", len(names))
        return ExtenderArgs(pod, names, None, names_json=args.NodeNames)
    if isinstance(args, _FullArgs):  # decoded to the parts already (_full_args: not null)
        listed = args.Nodes or _NodeList()
        return _full_nodes(pod, listed, FullNodes(body, args.span), facts_of)
    try:
        # Only six strings of each node are built, but each item is a Struct: bound them.
        wire_json.check_objects(args.Nodes)
    except wire_json.JsonError as error:
        raise WireError(f"Nodes: {error}") from error
    try:
        listed = _nodes_decoder.decode(args.Nodes)
    except RecursionError as error:
        raise WireError("Nodes is nested too deeply") from error
    except msgspec.ValidationError:
        # A field archfit reads has the wrong type somewhere: node by node, leniently.
        return _parse_nodes_one_by_one(pod, args.Nodes, facts_of or FactsOf())
    if listed is None:
        raise WireError("both Nodes and NodeNames are null; one of them must list the candidates")
    return _full_nodes(pod, listed, FullNodes(args.Nodes), facts_of)


def decode_args_pod(raw: msgspec.Raw | bytes) -> dict[str, Any]:
    """The Pod of an ExtenderArgs, its size checked first. Raises WireError."""
    try:
        wire_json.check_bounds(raw)
        pod: dict[str, Any] | None = _pod_decoder.decode(raw)
    except wire_json.JsonError as error:
        raise WireError(f"Pod: {error}") from error
    except RecursionError as error:
        raise WireError("Pod is nested too deeply") from error
    except msgspec.DecodeError as error:  # only the wrong type: the body parsed already
        raise WireError(f"Pod is not a v1.Pod: {error}") from error
    if pod is None:
        raise WireError("Pod is missing")
    return pod


def _full_args(body: bytes) -> _FullArgs | None:
    """The body split in one pass, Nodes decoded to their parts from their own bytes, when it
    is laid out as kube-scheduler writes it (_POD_KEY, _NODES_KEY, _NODES_ENDS); None sends it
    the careful way (parse_args), which also says what is wrong with it.

    The proof of the layout is that the pod and the NodeList each decode as one JSON value:
    a value's end is fixed by its bytes, so the pod ends where the first `,"Nodes":{` begins
    (one of the pod's own leaves it cut short, which fails), the NodeList runs to the
    ending, and the body holds Pod and Nodes once each and nothing else. The NodeList's bytes
    are then scanned once, and are the answer as they are (FullNodes.raw)."""
    if not body.startswith(_POD_KEY):
        return None
    pod_end = body.find(_NODES_KEY, len(_POD_KEY))
    if pod_end < 0:
        return None
    start = pod_end + len(_NODES_KEY) - 1  # the NodeList's `{`
    if body.endswith(_NODES_ENDS[0]):
        end = len(body) - len(_NODES_ENDS[0]) + 1
    elif body.endswith(_NODES_ENDS[1]):
        end = len(body) - 1
    else:
        return None
    view = memoryview(body)
    try:
        pod = _value_decoder.decode(view[len(_POD_KEY) : pod_end])  # checked, nothing built
        # Before the typed decoder builds a Struct per object: a body of a million `{}`.
        wire_json.check_objects(view[start:end])
        listed = _nodes_decoder.decode(view[start:end])
    except (wire_json.JsonError, RecursionError, msgspec.DecodeError):
        return None
    return None if listed is None else _FullArgs(pod, listed, (start, end))


def _full_nodes(
    pod: Mapping[str, Any], listed: _NodeList, full: FullNodes, facts_of: FactsOf | None
) -> ExtenderArgs:
    nodes = listed.items or []
    _check_count("Nodes.items", len(nodes))
    names = [node.metadata.name for node in nodes]
    if not all(names):
        index = names.index("")
        raise WireError(f"Nodes.items[{index}].metadata.name is missing")
    facts = (facts_of or FactsOf()).many(nodes)
    return ExtenderArgs(pod, names, facts, full)


def _parse_nodes_one_by_one(
    pod: Mapping[str, Any], raw: msgspec.Raw, facts_of: FactsOf
) -> ExtenderArgs:
    """The slow path, for Nodes whose typed decoding failed: each item on its own, so that
    a wrongly typed label leaves its node's platform unknown, and a node that is not an
    object at all is named in the error."""
    try:
        # Arrays too: this decoder builds a Raw for any item, an array as well as an object.
        wire_json.check_bounds(raw, values=False)
    except wire_json.JsonError as error:
        raise WireError(f"Nodes: {error}") from error
    try:
        items = _raw_nodes_decoder.decode(raw).items or []
    except msgspec.DecodeError as error:
        raise WireError(f"body is not an ExtenderArgs: {_within('Nodes', error)}") from error
    _check_count("Nodes.items", len(items))
    names: list[str] = []
    facts: list[NodeFacts] = []
    for index, item in enumerate(items):
        try:
            node = decode_node(item)
        except NodeDecodeError as error:
            raise WireError(f"Nodes.items[{index}] is not a v1.Node: {error}") from error
        except RecursionError as error:
            raise WireError(f"Nodes.items[{index}] is nested too deeply") from error
        if not node.name:
            raise WireError(f"Nodes.items[{index}].metadata.name is missing")
        names.append(node.name)
        facts.append(facts_of(node))
    return ExtenderArgs(pod, names, facts, FullNodes(raw))


def _within(field: str, error: msgspec.DecodeError) -> str:
    """msgspec's message for a decode of one field's value, with its path from the body."""
    text = str(error)
    if " - at `$" in text:
        return text.replace(" - at `$", f" - at `$.{field}", 1)
    return f"{text} - at `$.{field}`"


def _check_count(where: str, count: int) -> None:
    if count > MAX_NODES:
        raise WireError(f"{where} lists {count} nodes, more than any cluster has ({MAX_NODES})")


def render_filter(
    args: ExtenderArgs,
    passed: Sequence[str],
    failed: Mapping[str, str],
    unresolvable: Mapping[str, str],
    error: str = "",
) -> bytes:
    """Encode an ExtenderFilterResult in the same mode as the request."""
    result: ExtenderFilterResult = {
        "Nodes": None,
        "NodeNames": None,
        "FailedNodes": failed,
        "FailedAndUnresolvableNodes": unresolvable,
        "Error": error,
    }
    if args.full is None:
        if passed is args.names and args.names_json is not None and not (failed or unresolvable):
            # Every candidate passed: the list goes back as the bytes that came.
            return b"".join((_PASSED_HEAD, args.names_json, _PASSED_TAIL))
        # A decision's own list goes out as it is: orjson only reads it.
        result["NodeNames"] = passed if isinstance(passed, list) else list(passed)
        return orjson.dumps(result)
    if len(passed) == len(args.names):
        result["Nodes"] = args.full.raw()  # every node kept: the NodeList as it came
    else:
        result["Nodes"] = args.full.kept(args.names, passed)
    # msgspec writes Raw values verbatim: the kept Nodes go back as the bytes that came.
    return _encoder.encode(result)


_PASSED_HEAD = b'{"Nodes":null,"NodeNames":'
_PASSED_TAIL = b',"FailedNodes":{},"FailedAndUnresolvableNodes":{},"Error":""}'
"""An ExtenderFilterResult around a NodeNames array, as orjson writes the same dict."""


def render_error(message: str) -> bytes:
    """An ExtenderFilterResult carrying only `Error` (the scheduler counts it as a failure)."""
    result: ExtenderFilterResult = {
        "Nodes": None,
        "NodeNames": None,
        "FailedNodes": {},
        "FailedAndUnresolvableNodes": {},
        "Error": message,
    }
    return orjson.dumps(result)


def render_priorities(scores: Mapping[str, int]) -> bytes:
    """Encode a HostPriorityList: a bare array of integer scores, clamped to 0..10.

    A float such as 7.0 would break Go's decoding and the scores would be
    dropped silently, hence the int().
    """
    # A call has a handful of distinct scores: check those, not every host.
    distinct = set(scores.values())
    if not all(type(s) is int and 0 <= s <= MAX_SCORE for s in distinct):
        scores = {host: max(0, min(MAX_SCORE, int(s))) for host, s in scores.items()}
        distinct = set(scores.values())
    if len(distinct) == 1:
        # Most calls score the hosts of one architecture alike: their names, encoded by
        # orjson, become the entries by one replace in C, with no object per host. A
        # backslash would mean a quote inside a name, where `","` could also stand.
        hosts = orjson.dumps(list(scores))
        if b"\\" not in hosts:
            entry_end = b',"Score":%d}' % distinct.pop()
            between = b'"' + entry_end + b',{"Host":"'
            return b"".join((b'[{"Host":', hosts[1:-1].replace(b'","', between), entry_end, b"]"))
    return _encoder.encode(list(map(HostPriority, scores, scores.values())))


_encoder = msgspec.json.Encoder()
