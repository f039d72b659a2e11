"""The parts of a v1.Node archfit reads, decoded without the rest, and the facts they give.

Pure. A Node as the API server or kube-scheduler writes it is 2 to 3 KB of JSON, of which
archfit needs seven strings: four labels, and the OS, architecture and runtime version
from status.nodeInfo (node_facts.node_facts). msgspec skips everything else without
building it, which is what makes full-Node requests and the node index cheap
(docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import Any

import msgspec

from extender.core.interning import Interner
from extender.core.node_facts import AARCH32_LABEL, NodeFacts, node_facts
from extender.core.platforms import ARCH_LABEL, OS_LABEL, WINDOWS_BUILD_LABEL
from extender.errors import WireError

# Labels and nodeInfo are frozen, so hashable: together they are the key of a node's facts.
# gc=False: a full-Node call builds five per node, which holding only strings cannot form a
# cycle, so the collector need not track them (its passes cost 0.1 ms a call at 500 nodes).


class _Labels(msgspec.Struct, frozen=True, gc=False):
    arch: str = msgspec.field(name=ARCH_LABEL, default="")
    os: str = msgspec.field(name=OS_LABEL, default="")
    windows_build: str = msgspec.field(name=WINDOWS_BUILD_LABEL, default="")
    aarch32: str = msgspec.field(name=AARCH32_LABEL, default="")


class _Metadata(msgspec.Struct, frozen=True, gc=False):
    name: str = ""
    labels: _Labels | None = None
    resourceVersion: str = ""


class _NodeInfo(msgspec.Struct, frozen=True, gc=False):
    operatingSystem: str = ""
    architecture: str = ""
    containerRuntimeVersion: str = ""


class _Status(msgspec.Struct, frozen=True, gc=False):
    nodeInfo: _NodeInfo | None = None


_Key = tuple[_Labels | None, _NodeInfo | None]
_key_of = attrgetter("metadata.labels", "status.nodeInfo")
"""NodeParts.key() in C."""


class NodeParts(msgspec.Struct, frozen=True, gc=False):
    """metadata.name, resourceVersion, the four labels and nodeInfo's three strings.

    `metadata` and `status` are never None (a JSON null there fails the typed decode and
    takes decode_node's loose path), so the hot path reads them without checks."""

    metadata: _Metadata = _Metadata()
    status: _Status = _Status()

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def resource_version(self) -> str:
        return self.metadata.resourceVersion

    def key(self) -> _Key:
        """What the facts depend on, hashable: equal keys give equal facts."""
        return (self.metadata.labels, self.status.nodeInfo)


class _LooseNode(msgspec.Struct):
    """A Node whose fields have the wrong types: read as anything, then checked by hand."""

    metadata: Any = None
    status: Any = None


_decoder = msgspec.json.Decoder(NodeParts)
_loose_decoder = msgspec.json.Decoder(_LooseNode)


class NodeDecodeError(WireError):
    """The bytes are not a JSON object (or not UTF-8); the message says what they are."""


def decode_node(raw: bytes | memoryview | msgspec.Raw) -> NodeParts:
    """The NodeParts of one v1.Node's JSON. Wrong-typed labels or nodeInfo count as absent
    (the node's platform is then unknown, so the failure policy decides), as before they
    were typed; only a value that is not an object at all raises NodeDecodeError."""
    try:
        return _decoder.decode(raw)
    except msgspec.ValidationError:
        pass
    except (msgspec.DecodeError, UnicodeDecodeError) as error:
        # msgspec raises UnicodeDecodeError for invalid bytes in a string it reads.
        raise NodeDecodeError(str(error)) from error
    try:
        loose = _loose_decoder.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError) as error:
        raise NodeDecodeError(str(error)) from error
    return _from_loose(loose)


def _from_loose(loose: _LooseNode) -> NodeParts:
    meta = _object(loose.metadata)
    labels = _object(meta.get("labels"))
    info = _object(_object(loose.status).get("nodeInfo"))

    def text(mapping: dict[str, Any], key: str) -> str:
        value = mapping.get(key)
        return value if isinstance(value, str) else ""

    return NodeParts(
        _Metadata(
            text(meta, "name"),
            _Labels(
                text(labels, ARCH_LABEL),
                text(labels, OS_LABEL),
                text(labels, WINDOWS_BUILD_LABEL),
                text(labels, AARCH32_LABEL),
            ),
            text(meta, "resourceVersion"),
        ),
        _Status(
            _NodeInfo(
                text(info, "operatingSystem"),
                text(info, "architecture"),
                text(info, "containerRuntimeVersion"),
            )
        ),
    )


def _object(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


class FactsOf:
    """NodeParts → NodeFacts, one shared tuple per distinct key.

    Thousands of nodes share a handful of platforms: computing each once, and handing out
    the same object, keeps memory per node to a reference and lets placement compare facts
    by identity. Bounded by the number of distinct keys, which real clusters keep small;
    `limit` guards against a stream of invented ones.
    """

    def __init__(self, limit: int = 4096) -> None:
        self._known: dict[_Key, NodeFacts] = {}
        self._shared: Interner[NodeFacts] = Interner(limit)
        self._limit = limit

    def __call__(self, node: NodeParts) -> NodeFacts:
        key = (node.metadata.labels, node.status.nodeInfo)  # node.key(), inlined: per node
        facts = self._known.get(key)
        if facts is None:
            labels, info = key
            by_label = {}
            if labels is not None:
                by_label = {
                    ARCH_LABEL: labels.arch,
                    OS_LABEL: labels.os,
                    WINDOWS_BUILD_LABEL: labels.windows_build,
                    AARCH32_LABEL: labels.aarch32,
                }
            by_info = {}
            if info is not None:
                by_info = {
                    "architecture": info.architecture,
                    "operatingSystem": info.operatingSystem,
                    "containerRuntimeVersion": info.containerRuntimeVersion,
                }
            # Different keys can give equal facts (a label or nodeInfo naming the arch):
            # those share one object too.
            facts = node_facts(by_label, by_info)
            facts = self._shared(facts)
            if len(self._known) >= self._limit:
                self._known.clear()
                self._shared.clear()
            self._known[key] = facts
        return facts

    def many(self, nodes: Sequence[NodeParts]) -> list[NodeFacts]:
        """The facts of each node, in order: looked up in C (attrgetter, then a map over the
        known keys), with a Python step only for the nodes whose key is new."""
        facts: list[NodeFacts | None] = list(map(self._known.get, map(_key_of, nodes)))
        if None in facts:
            facts = list(map(self, nodes))
        return facts  # type: ignore[return-value]  # no None left
