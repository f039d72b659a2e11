"""Memory the node index keeps per node: 10,000 nodes of four (platform, runtime) shapes.

Builds the index's name → facts table from realistic v1.Node objects, as a list would,
and prints the bytes it holds (the Node objects themselves are not counted).

    .venv/bin/python bench/node_index_memory.py [--nodes 10000]
"""

from __future__ import annotations

import argparse
import sys
import tracemalloc
from pathlib import Path

from kubernetes import client

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from extender.kube.nodes import NodeIndex  # noqa: E402
from tests.objects import node  # noqa: E402

RUNTIMES = ("containerd://2.0.5", "containerd://2.2.0")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=10_000)
    count = parser.parse_args().nodes
    raw = [
        node(f"n{i}", "arm64" if i % 4 == 0 else "amd64", runtime=RUNTIMES[i // 4 % 2])
        for i in range(count)
    ]
    index = NodeIndex(client.ApiClient())
    tracemalloc.start()
    table = {item["metadata"]["name"]: index._facts_of(item) for item in raw}
    held = tracemalloc.get_traced_memory()[0]
    shapes = len(set(map(id, table.values())))
    per_node = held / count
    print(f"{count} nodes, {shapes} distinct facts: {held / 1024:.0f} KiB ({per_node:.1f} B/node)")


if __name__ == "__main__":
    main()
