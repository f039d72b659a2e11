"""/healthz and /readyz: what probes and operators read."""

from __future__ import annotations

from tests.app.conftest import MakeClient


async def test_healthz_and_readyz_answer_in_one_json_encoding(make_client: MakeClient) -> None:
    """Both compact, from one encoder: a script comparing bodies sees one format."""
    client = await make_client()
    health = await (await client.get("/healthz")).read()
    ready = await (await client.get("/readyz")).read()
    assert (b'{"status":"ok"}', b'{"ready":true,"checks":{"started":true}}') == (health, ready)
