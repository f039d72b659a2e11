"""Integration fixtures: real registries, a token server and redis from tests.support."""

from tests.support.fixtures import (  # noqa: F401  (fixtures are found by name)
    basic_registry,
    public_registry,
    redis_process,
    redis_url,
    token_policy,
    token_registry,
    token_server,
)
