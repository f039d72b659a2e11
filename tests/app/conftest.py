"""App-level fixtures: the real aiohttp app with a table resolver and a fixed node source."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient

from extender.config.loading import from_mapping
from extender.config.settings import Settings
from extender.core.platforms import Platform, parse
from extender.core.pods import PullSecretsRef
from extender.server import create_app
from tests.support.fakes import FunctionResolver, StaticNodes

TABLE: dict[str, frozenset[Platform] | Exception] = {
    "acme/multi:1": frozenset({parse("linux/amd64"), parse("linux/arm64")}),
    "acme/amd:1": frozenset({parse("linux/amd64")}),
    "acme/arm:1": frozenset({parse("linux/arm64")}),
    "acme/v7:1": frozenset({parse("linux/arm/v7")}),
    "acme/amd-v7:1": frozenset({parse("linux/amd64"), parse("linux/arm/v7")}),
    "acme/down:1": ConnectionError("registry.acme.test: connection refused"),
}


async def table_resolver(image: str, pull: PullSecretsRef) -> frozenset[Platform]:
    """A plain function standing in for the registry (as noe's RegistryFunc does)."""
    answer = TABLE.get(image)
    if answer is None:
        raise LookupError(f"{image} not in the test table")
    if isinstance(answer, Exception):
        raise answer
    return answer


def settings(**overrides: Any) -> Settings:
    """Settings with kubernetes off and any camelCase overrides, e.g. policy={...}."""
    data: dict[str, Any] = {"kubernetes": {"mode": "off"}}
    data.update(overrides)
    return from_mapping(data)


# Not TestClient[Any, Any]: it is subscriptable only from aiohttp 3.11, and the minimum-versions
# venv (tests/run.sh) runs these tests on the declared floor, 3.10.
Client = TestClient
MakeClient = Callable[..., Awaitable[Client]]


@pytest.fixture
def make_client(aiohttp_client: Any) -> MakeClient:
    """Start the real app under aiohttp's test server."""

    async def make(
        config: Settings | None = None, nodes: StaticNodes | None = None, resolver: Any = None
    ) -> Client:
        app = create_app(
            config or settings(),
            resolver=resolver or FunctionResolver(table_resolver),
            nodes=nodes,
        )
        client: Client = await aiohttp_client(app)
        return client

    return make


async def post(client: Client, verb: str, body: Any, status: int = 200) -> Any:
    response = await client.post(f"/scheduler/{verb}", data=orjson.dumps(body))
    assert status == response.status, await response.text()
    return orjson.loads(await response.read())
