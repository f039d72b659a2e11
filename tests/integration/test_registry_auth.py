"""Private repositories behind htpasswd Basic auth and behind a Bearer token server."""

from __future__ import annotations

import pytest
import structlog
from aiohttp import web

from extender.metrics import Metrics
from extender.registry.client import RegistryClient
from extender.registry.errors import Unauthorized
from extender.registry.hosts import HostTable
from extender.registry.pure.credentials import DOCKERCFG, Credential
from extender.registry.pure.reference import parse
from extender.registry.transport import Transport
from tests.integration.conftest import (
    ResolverFactory,
    RunningFaults,
    Secrets,
    local_settings,
    pod,
)
from tests.support.clock import FakeClock
from tests.support.fixtures import PublishedRegistry
from tests.support.pull_secrets import auth_field, docker_config, pull_secret, pull_secret_of
from tests.support.tokens import TokenPolicy, TokenServer

pytestmark = pytest.mark.integration


async def test_basic_auth_registry_answers_with_the_pods_pull_secret(
    basic_registry: PublishedRegistry, make_resolver: ResolverFactory
) -> None:
    """htpasswd registry: the pod's dockerconfigjson credentials get the platforms."""
    user, password = basic_registry.credentials or ("", "")
    host = basic_registry.registry.host
    secrets = Secrets({"regcred": pull_secret("regcred", host, user, password)})
    resolver = await make_resolver(local_settings(host), secrets=secrets)
    image = basic_registry.catalog.multiarch_oci
    platforms = await resolver.platforms(image.reference, pod("regcred"))
    assert image.platforms == {str(p) for p in platforms}


async def test_basic_auth_registry_refuses_a_pod_without_credentials(
    basic_registry: PublishedRegistry, make_resolver: ResolverFactory
) -> None:
    """No matching secret: anonymous access is tried and refused."""
    resolver = await make_resolver(local_settings(basic_registry.registry.host))
    with pytest.raises(Unauthorized):
        await resolver.platforms(basic_registry.catalog.amd64_only.reference, pod())


async def test_a_wrong_credential_is_skipped_for_the_next_matching_one(
    basic_registry: PublishedRegistry, make_resolver: ResolverFactory
) -> None:
    """kubelet order: each matching credential in turn, a 401 moves to the next."""
    user, password = basic_registry.credentials or ("", "")
    host = basic_registry.registry.host
    secrets = Secrets(
        {
            "stale": pull_secret("stale", host, user, "rotated-away"),
            "fresh": pull_secret("fresh", f"http://{host}/v2/", user, password),
        }
    )
    resolver = await make_resolver(local_settings(host), secrets=secrets)
    image = basic_registry.catalog.single
    platforms = await resolver.platforms(image.reference, pod("stale", "fresh"))
    assert image.platforms == {str(p) for p in platforms}


async def test_a_dockercfg_secret_works_like_a_dockerconfigjson_one(
    basic_registry: PublishedRegistry, make_resolver: ResolverFactory
) -> None:
    """kubernetes.io/dockercfg has no `auths` wrapper; username/password fields work."""
    user, password = basic_registry.credentials or ("", "")
    host = basic_registry.registry.host
    secret = pull_secret_of(DOCKERCFG, {host: {"username": user, "password": password}}, "legacy")
    resolver = await make_resolver(local_settings(host), secrets=Secrets({"legacy": secret}))
    image = basic_registry.catalog.armv7_only
    platforms = await resolver.platforms(image.reference, pod("legacy"))
    assert image.platforms == {str(p) for p in platforms}


async def test_a_mounted_docker_config_is_used_for_every_pod(
    basic_registry: PublishedRegistry, make_resolver: ResolverFactory, tmp_path: object
) -> None:
    """dockerConfigPath: a config.json whose credentials apply when a pod has none."""
    from pathlib import Path

    user, password = basic_registry.credentials or ("", "")
    host = basic_registry.registry.host
    path = Path(str(tmp_path)) / "config.json"
    path.write_bytes(docker_config(host, user, password))
    resolver = await make_resolver(local_settings(host, docker_config_path=str(path)))
    image = basic_registry.catalog.amd64_only
    platforms = await resolver.platforms(image.reference, pod())
    assert image.platforms == {str(p) for p in platforms}


async def test_a_pod_without_credentials_is_not_served_another_pods_private_answer(
    basic_registry: PublishedRegistry, make_resolver: ResolverFactory
) -> None:
    """Cache keys carry the credential identity: a cached private answer is not shared."""
    user, password = basic_registry.credentials or ("", "")
    host = basic_registry.registry.host
    secrets = Secrets({"regcred": pull_secret("regcred", host, user, password)})
    resolver = await make_resolver(local_settings(host), secrets=secrets)
    image = basic_registry.catalog.manifest_list.reference
    await resolver.platforms(image, pod("regcred"))
    with pytest.raises(Unauthorized):
        await resolver.platforms(image, pod())


async def test_credentials_never_appear_in_errors_logs_or_reprs(
    basic_registry: PublishedRegistry, make_resolver: ResolverFactory
) -> None:
    """A refused password shows up nowhere: not the error, not a log line, not a repr."""
    user, _ = basic_registry.credentials or ("", "")
    host = basic_registry.registry.host
    secret = pull_secret("regcred", host, user, "hunter2-not-the-password")
    resolver = await make_resolver(local_settings(host), secrets=Secrets({"regcred": secret}))
    with structlog.testing.capture_logs() as logs, pytest.raises(Unauthorized) as caught:
        await resolver.platforms(basic_registry.catalog.single.reference, pod("regcred"))
    encoded = auth_field(user, "hunter2-not-the-password")
    text = " ".join([str(caught.value), repr(caught.value), repr(logs), repr(secret)])
    assert (False, False) == ("hunter2" in text, encoded in text)


async def test_token_registry_serves_a_private_repo_to_the_pull_secret(
    token_registry: PublishedRegistry, make_resolver: ResolverFactory, token_policy: TokenPolicy
) -> None:
    """Bearer flow with Basic credentials at the token endpoint."""
    user, password = token_registry.credentials or ("", "")
    host = token_registry.registry.host
    secrets = Secrets({"regcred": pull_secret("regcred", host, user, password)})
    resolver = await make_resolver(local_settings(host), secrets=secrets)
    image = token_registry.catalog.multiarch_oci
    platforms = await resolver.platforms(image.reference, pod("regcred"))
    assert image.platforms == {str(p) for p in platforms}


async def test_token_registry_refuses_anonymous_access_to_a_private_repo(
    token_registry: PublishedRegistry, make_resolver: ResolverFactory, token_policy: TokenPolicy
) -> None:
    """An anonymous token without pull access: insufficient_scope, no retry loop."""
    registry = token_registry.registry
    resolver = await make_resolver(local_settings(registry.host))
    mark = registry.mark()
    with pytest.raises(Unauthorized):
        await resolver.platforms(token_registry.catalog.amd64_only.reference, pod())
    assert {("GET", "manifests"): 2} == dict(registry.count_since(mark))


async def test_public_repo_on_a_token_registry_works_anonymously(
    token_registry: PublishedRegistry,
    make_resolver: ResolverFactory,
    token_server: TokenServer,
    token_policy: TokenPolicy,
) -> None:
    """Anonymous Bearer token for `public/...`; no Basic header sent to the token server."""
    host = token_registry.registry.host
    resolver = await make_resolver(local_settings(host))
    platforms = await resolver.platforms(f"{host}/public/multi:1.0", pod())
    users = {request.user for request in token_server.requests}
    expected = ({"linux/amd64", "linux/arm64", "linux/arm/v7"}, {None})
    assert expected == ({str(p) for p in platforms}, users)


async def test_one_token_serves_a_repository_and_its_hosts_challenge_spares_the_next_one_a_401(
    token_registry: PublishedRegistry,
    make_resolver: ResolverFactory,
    token_server: TokenServer,
    token_policy: TokenPolicy,
) -> None:
    """Token cached per scope; after the host's first 401 a new repository borrows its
    challenge: one token fetch each, and no 401 for the second."""
    registry = token_registry.registry
    host = registry.host
    resolver = await make_resolver(local_settings(host))
    mark = registry.mark()
    await resolver.platforms(f"{host}/public/single:1.0", pod())  # GET, blob: 1 token
    await resolver.platforms(f"{host}/public/amd64:1.0", pod())  # another repo: 1 more token
    statuses = [r.status for r in registry.requests_since(mark)]
    expected = (2, [401, 200, 200, 200, 200])
    assert expected == (len(token_server.requests), statuses)


async def test_an_invalid_token_is_dropped_and_the_request_retried_once(
    token_registry: PublishedRegistry,
    make_resolver: ResolverFactory,
    token_server: TokenServer,
    token_policy: TokenPolicy,
) -> None:
    """401 invalid_token: fetch a fresh token and retry, once."""
    token_policy.stale_tokens = 1
    host = token_registry.registry.host
    resolver = await make_resolver(local_settings(host))
    platforms = await resolver.platforms(f"{host}/public/listed:1.0", pod())
    expected = ({"linux/amd64", "linux/arm64"}, 2)
    assert expected == ({str(p) for p in platforms}, len(token_server.requests))


async def test_access_token_field_and_a_missing_expires_in_are_understood(
    token_registry: PublishedRegistry,
    make_resolver: ResolverFactory,
    token_server: TokenServer,
    token_policy: TokenPolicy,
) -> None:
    """OAuth2-style `access_token`, no `expires_in` (60 s assumed)."""
    token_policy.field_name = "access_token"
    token_policy.expires_in = None
    host = token_registry.registry.host
    resolver = await make_resolver(local_settings(host))
    platforms = await resolver.platforms(f"{host}/public/armv7:1.0", pod())
    assert {"linux/arm/v7"} == {str(p) for p in platforms}


async def test_wrong_credentials_at_the_token_server_fall_back_to_anonymous(
    token_registry: PublishedRegistry,
    make_resolver: ResolverFactory,
    token_server: TokenServer,
    token_policy: TokenPolicy,
) -> None:
    """A token endpoint 401 for a credential moves on, and anonymous gets the public repo."""
    host = token_registry.registry.host
    secrets = Secrets({"bad": pull_secret("bad", host, "nobody", "wrong")})
    metrics = Metrics()
    resolver = await make_resolver(local_settings(host), metrics=metrics, secrets=secrets)
    platforms = await resolver.platforms(f"{host}/public/amd64:1.0", pod("bad"))
    refused = metrics.registry.get_sample_value(
        "archfit_registry_requests_total",
        {"host": token_server.realm.split("/")[2], "method": "GET", "kind": "token",
         "status": "401"},
    )  # fmt: skip
    assert ({"linux/amd64"}, 1.0) == ({str(p) for p in platforms}, refused)


async def test_a_refused_credential_is_not_offered_again_for_thirty_seconds(
    basic_registry: PublishedRegistry,
) -> None:
    """A stale password costs one refusal, not one per request; after 30 s it is tried again."""
    user, password = basic_registry.credentials or ("", "")
    registry = basic_registry.registry
    settings = local_settings(registry.host)
    clock = FakeClock()
    transport = Transport(settings)
    client = RegistryClient(transport, HostTable(settings), clock)
    creds = (Credential(user, "rotated-away", "stale"), Credential(user, password, "fresh"))
    ref = parse(basic_registry.catalog.single.reference)
    statuses: list[list[int]] = []
    try:
        for advance in (0, 29, 2):
            clock.advance(advance)
            mark = registry.mark()
            await client.resolve_tag(ref, creds)
            statuses.append([request.status for request in registry.requests_since(mark)])
    finally:
        await client.aclose()
        await transport.aclose()
    assert [[401, 401, 200], [200], [401, 200]] == statuses


def _bearer_repository(
    registry: RunningFaults, repo: str, realm: RunningFaults, token: str
) -> None:
    """Serve `repo` only to `Bearer <token>`, which `realm`'s /token hands out; a 401 names it."""
    before = set(registry.registry.routes)
    registry.registry.image(repo, "1", "linux/arm64")
    protected = {
        key: registry.registry.routes[key] for key in set(registry.registry.routes) - before
    }

    async def bearer_only(request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != f"Bearer {token}":
            challenge = f'Bearer realm="{realm.url}/token",service="s"'
            return web.Response(status=401, headers={"WWW-Authenticate": challenge})
        return await protected[("GET", request.path)](request)

    async def hand_out(request: web.Request) -> web.StreamResponse:
        return web.json_response({"token": token})

    for method, path in protected:
        registry.registry.route(method, path, bearer_only)
    realm.registry.route("GET", "/token", hand_out)


async def test_a_repository_whose_own_realm_differs_from_the_borrowed_one_still_resolves(
    faults: RunningFaults,
    elsewhere: RunningFaults,
    third: RunningFaults,
    make_resolver: ResolverFactory,
) -> None:
    """The host's challenge is tried first; refused, the repository's own 401 decides."""
    _bearer_repository(faults, "a/app", elsewhere, "token-a")
    _bearer_repository(faults, "b/app", third, "token-b")
    settings = local_settings(faults.host, elsewhere.host, third.host)
    resolver = await make_resolver(settings)
    found = [
        {str(p) for p in await resolver.platforms(f"{faults.host}/{repo}:1", pod())}
        for repo in ("a/app", "b/app")
    ]
    sent = [
        seen.headers.get("Authorization")
        for seen in faults.registry.seen
        if seen.path == "/v2/b/app/manifests/1"
    ]
    expected = ([{"linux/arm64"}, {"linux/arm64"}], ["Bearer token-a", "Bearer token-b"])
    assert expected == (found, sent)


async def test_a_borrowed_challenge_whose_realm_refuses_is_dropped_for_the_repositorys_own(
    faults: RunningFaults,
    elsewhere: RunningFaults,
    third: RunningFaults,
    make_resolver: ResolverFactory,
) -> None:
    """The host's realm stops answering: the request goes without it, and its 401 decides."""
    _bearer_repository(faults, "a/app", elsewhere, "token-a")
    _bearer_repository(faults, "b/app", third, "token-b")
    settings = local_settings(faults.host, elsewhere.host, third.host)
    resolver = await make_resolver(settings)
    await resolver.platforms(f"{faults.host}/a/app:1", pod())
    elsewhere.registry.fail("/token", 500)
    asked = elsewhere.registry.count("GET", "/token")
    platforms = await resolver.platforms(f"{faults.host}/b/app:1", pod())
    sent = [
        seen.headers.get("Authorization")
        for seen in faults.registry.seen
        if seen.path == "/v2/b/app/manifests/1"
    ]
    tried = elsewhere.registry.count("GET", "/token") - asked
    expected = ({"linux/arm64"}, [None, "Bearer token-b"], 1)
    assert expected == ({str(p) for p in platforms}, sent, tried)
