"""Pytest fixtures for real registries, a token server and redis (session-scoped).

Import them into a conftest (`from tests.support.fixtures import *`) or list this module
in a root conftest's `pytest_plugins`. Every process is stopped when the session ends.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from extender import logs
from tests.support.images import Catalog, Pusher, publish_catalog
from tests.support.redis import RedisProcess
from tests.support.registry import RegistryProcess
from tests.support.tokens import TokenIssuer, TokenPolicy, TokenServer

BASIC_USER = ("archfit-basic", "basic-pass-0451")
TOKEN_USER = ("archfit-token", "token-pass-2112")


@dataclass(frozen=True)
class PublishedRegistry:
    """A running registry and the images pushed into it."""

    registry: RegistryProcess
    catalog: Catalog
    credentials: tuple[str, str] | None
    """user, password a pod's pull secret must carry; None when anonymous works."""


@pytest.fixture(scope="session")
def public_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PublishedRegistry]:
    """An anonymous registry holding the catalog under `archfit/...`."""
    registry = RegistryProcess.start(tmp_path_factory.mktemp("registry-public"))
    try:
        catalog = publish_catalog(Pusher(registry.url))
        yield PublishedRegistry(registry, catalog, None)
    finally:
        registry.stop()


@pytest.fixture(scope="session")
def basic_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PublishedRegistry]:
    """A registry behind htpasswd Basic auth, holding the catalog under `private/...`."""
    registry = RegistryProcess.start(tmp_path_factory.mktemp("registry-basic"), htpasswd=BASIC_USER)
    try:
        catalog = publish_catalog(Pusher(registry.url, basic=BASIC_USER), prefix="private")
        yield PublishedRegistry(registry, catalog, BASIC_USER)
    finally:
        registry.stop()


@pytest.fixture(scope="session")
def token_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TokenServer]:
    """A Bearer token server; anonymous callers may pull `public/...` only."""
    issuer = TokenIssuer(tmp_path_factory.mktemp("token-issuer"))
    policy = TokenPolicy(users=dict([TOKEN_USER]), public_prefixes=("public/",))
    with TokenServer(issuer, policy) as server:
        yield server


@pytest.fixture
def token_policy(token_server: TokenServer) -> Iterator[TokenPolicy]:
    """The token server's policy, reset after the test that changes it."""
    saved = TokenPolicy(**vars(token_server.policy))
    token_server.requests.clear()
    yield token_server.policy
    token_server.policy = saved


@pytest.fixture(scope="session")
def token_registry(
    tmp_path_factory: pytest.TempPathFactory, token_server: TokenServer
) -> Iterator[PublishedRegistry]:
    """A Bearer-token registry: the catalog under `private/...`, a copy under `public/...`."""
    registry = RegistryProcess.start(
        tmp_path_factory.mktemp("registry-token"), token=token_server.registry_config()
    )
    try:
        pusher = Pusher(registry.url, token=token_server.push_token)
        catalog = publish_catalog(pusher, prefix="private")
        publish_catalog(pusher, prefix="public")
        yield PublishedRegistry(registry, catalog, TOKEN_USER)
    finally:
        registry.stop()


@pytest.fixture(scope="session")
def redis_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisProcess]:
    """One redis-server for the session."""
    redis = RedisProcess.start(tmp_path_factory.mktemp("redis"))
    try:
        yield redis
    finally:
        redis.stop()


@pytest.fixture
def redis_url(redis_process: RedisProcess) -> str:
    """The URL of an empty redis database."""
    redis_process.flush()
    return redis_process.url


@pytest.fixture
def fresh_logging() -> Iterator[None]:
    """Undo `archfit` CLI runs' logging setup: it binds the test's captured stdout or stderr,
    which pytest closes afterwards, and a later test's log line would fail on it."""
    yield
    logs.reset()
