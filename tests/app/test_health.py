"""/healthz and /readyz: what probes and operators read."""

from __future__ import annotations

from tests.app.conftest import MakeClient
from tests.support.fakes import StaticNodes


async def test_healthz_and_readyz_answer_in_one_json_encoding(make_client: MakeClient) -> None:
    """Both compact, from one encoder: a script comparing bodies sees one format."""
    client = await make_client()
    health = await (await client.get("/healthz")).read()
    ready = await (await client.get("/readyz")).read()
    assert (b'{"status":"ok"}', b'{"ready":true,"checks":{"started":true}}') == (health, ready)


async def test_readyz_says_when_the_node_index_cannot_stay_current(make_client: MakeClient) -> None:
    """Still ready (its last list beats none), but /readyz names the watch's failure."""
    nodes = StaticNodes()
    nodes.problem = 'ApiError: 403 User "x" cannot watch resource "nodes"'
    client = await make_client(nodes=nodes)
    answer = await client.get("/readyz")
    body = await answer.json()
    assert (200, True, False, nodes.problem) == (
        answer.status,
        body["checks"]["nodeIndexSynced"],
        body["nodeIndexCurrent"],
        body["nodeIndexProblem"],
    )
