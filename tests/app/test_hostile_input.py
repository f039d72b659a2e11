"""Every field of a real request replaced by every wrong type: 200 or 400, never a crash."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import orjson
from structlog.testing import capture_logs

from tests.objects import args_full, node, pod
from tests.support.fakes import StaticNodes

WRONG: list[Any] = [None, 0, -1, 1.5, True, "", "\x00\u202e" * 50, [], [None], {}, {"": None}]


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from paths(child, (*prefix, key))
    elif isinstance(value, list) and value:
        yield from paths(value[0], (*prefix, 0))


def replaced(body: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    body = copy.deepcopy(body)
    target = body
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = new
    return body


async def test_no_wrongly_typed_field_crashes_filter_or_prioritize(make_client):
    """Hundreds of mutated kube-scheduler bodies: each answer is 200 or 400, none an error log."""
    client = await make_client(nodes=StaticNodes(node("n1", "amd64")))
    valid = args_full(
        pod(
            "acme/multi:1",
            init_images=("acme/amd:1",),
            pull_secrets=("s",),
            annotations={"archfit.io/prefer-arch": "arm64"},
        ),
        node("n1", "amd64"),
    )
    statuses: dict[int, int] = {}
    with capture_logs() as logs:
        for path in paths(valid):
            for wrong in WRONG:
                body = orjson.dumps(replaced(valid, path, wrong))
                for verb in ("filter", "prioritize"):
                    response = await client.post(f"/scheduler/{verb}", data=body)
                    await response.read()
                    statuses[response.status] = statuses.get(response.status, 0) + 1
    assert {200, 400} == set(statuses), statuses
    assert [] == [e for e in logs if e["log_level"] in ("error", "critical")]
