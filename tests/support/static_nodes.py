"""A NodeSource with a fixed set of nodes: the app's node index without an API server."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from extender.core.node_facts import NodeFacts
from extender.core.node_parts import FactsOf, decode_node
from extender.core.platforms import Platform


class StaticNodes:
    """A node source that is synced from the start, built from v1.Node objects.

    Nodes of one platform and runtime share one facts object, as in the node index: the
    extender groups candidates by identity."""

    def __init__(self, *nodes: Mapping[str, Any]) -> None:
        facts_of = FactsOf()
        self._nodes = {n["metadata"]["name"]: facts_of(decode_node(orjson.dumps(n))) for n in nodes}

    @property
    def synced(self) -> bool:
        return True

    problem: str | None = None
    """Set by a test whose node source cannot stay current."""

    def snapshot(self) -> Mapping[str, NodeFacts]:
        return self._nodes

    def known_platforms(self) -> frozenset[Platform]:
        return frozenset(p for p, _, _ in self._nodes.values() if p is not None)

    async def wait_synced(self, seconds: float) -> bool:
        return True
