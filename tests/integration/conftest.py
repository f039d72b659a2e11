"""Integration fixtures: resolvers, plain secret sources and scripted faulty registries.

The real registries, token server and redis come from tests.support.fixtures, which the
root conftest registers as a plugin.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from extender.config.registry_settings import CacheSettings, HostSettings, RegistrySettings
from extender.core.pods import PullSecretsRef
from extender.metrics import Metrics
from extender.registry.resolver import RegistryResolver, build_resolver
from tests.support.fakes import Secrets
from tests.support.faults import FaultRegistry

POD = PullSecretsRef(namespace="team-a", names=("regcred",), service_account="default")


def local_settings(*hosts: str, **overrides: Any) -> RegistrySettings:
    """Settings that talk plain HTTP to `hosts` and allow loopback, as tests need."""
    options: dict[str, Any] = {
        "hosts": {host: HostSettings(plain_http=True) for host in hosts},
        "allowed_networks": ("127.0.0.1/32",),
        "request_timeout_seconds": 5.0,
        "connect_timeout_seconds": 2.0,
    }
    options.update(overrides)
    return RegistrySettings(**options)


def pod(*names: str) -> PullSecretsRef:
    """A pod in team-a with these imagePullSecrets."""
    return PullSecretsRef("team-a", names)


ResolverFactory = Callable[..., Awaitable[RegistryResolver]]


@pytest.fixture(autouse=True)
def _fresh_logging(fresh_logging: None) -> None:
    """Every integration test runs with tests.support.fixtures.fresh_logging."""


@pytest.fixture
async def make_resolver() -> AsyncIterator[ResolverFactory]:
    """Build resolvers with `await make_resolver(settings, cache=..., metrics=..., secrets=...)`;
    `clock=` times the cache's entries.

    Every resolver built is closed after the test.
    """
    built: list[RegistryResolver] = []

    async def factory(
        settings: RegistrySettings,
        cache: CacheSettings | None = None,
        metrics: Metrics | None = None,
        secrets: Secrets | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> RegistryResolver:
        resolver = await build_resolver(
            settings, cache or CacheSettings(), metrics, secrets, clock=clock
        )
        built.append(resolver)
        return resolver

    yield factory
    for resolver in built:
        await resolver.aclose()


@dataclass
class RunningFaults:
    """A FaultRegistry being served, and its host[:port]."""

    registry: FaultRegistry
    host: str

    @property
    def url(self) -> str:
        """http://host:port"""
        return f"http://{self.host}"


@contextlib.asynccontextmanager
async def serve_faults() -> AsyncIterator[RunningFaults]:
    """Serve a new scripted FaultRegistry on its own port for the duration of the block."""
    registry = FaultRegistry()
    server = TestServer(registry.app(), host="127.0.0.1")
    await server.start_server()
    try:
        yield RunningFaults(registry, f"127.0.0.1:{server.port}")
    finally:
        await server.close()


@pytest.fixture
async def faults() -> AsyncIterator[RunningFaults]:
    """A misbehaving registry on 127.0.0.1, scripted by the test."""
    async with serve_faults() as running:
        yield running


@pytest.fixture
async def elsewhere() -> AsyncIterator[RunningFaults]:
    """A second scripted server on another port (another origin), e.g. object storage."""
    async with serve_faults() as running:
        yield running


@pytest.fixture
async def third() -> AsyncIterator[RunningFaults]:
    """A third scripted server on its own port, e.g. a token realm a redirect target names."""
    async with serve_faults() as running:
        yield running
