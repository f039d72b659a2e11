"""Registries, redirectors and token servers that attack archfit on purpose (issue 13)."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest
from aiohttp import web

from extender.core import platforms as core_platforms
from extender.core.placement import Candidates, Policy, decide_filter
from extender.core.platforms import (
    Platform,
    Rule,
    Unknown,
    describe_failure,
    normalize,
    summarise_platforms,
)
from extender.registry.client import RegistryClient
from extender.registry.errors import (
    AddressForbidden,
    DigestMismatch,
    ManifestInvalid,
    RegistryError,
    Unauthorized,
    UnexpectedStatus,
)
from extender.registry.hosts import HostTable
from extender.registry.pure.reference import parse
from extender.registry.transport import Transport
from extender.resolution.within_deadline import Resolution
from tests.integration.conftest import (
    POD,
    ResolverFactory,
    RunningFaults,
    local_settings,
    pod,
    serve_faults,
)
from tests.support.clock import FakeClock
from tests.support.fakes import Secrets
from tests.support.faults import OCI_INDEX, OCI_MANIFEST, canonical, sha256
from tests.support.pull_secrets import auth_field, pull_secret

pytestmark = pytest.mark.integration
_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"


async def test_an_error_body_that_echoes_the_authorization_header_never_reaches_the_reason(
    faults: RunningFaults, make_resolver: ResolverFactory
) -> None:
    """A 500 whose body repeats the request's Authorization header is shown redacted."""

    async def echo(request: web.Request) -> web.StreamResponse:
        sent = request.headers.get("Authorization")
        if sent is None:
            return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="r"'})
        if request.method == "HEAD":
            return web.Response(status=405)  # makes archfit GET, so the body is read
        message = f"cannot parse header Authorization: {sent}"
        return web.json_response({"errors": [{"code": "UNKNOWN", "message": message}]}, status=500)

    for method in ("HEAD", "GET"):
        faults.registry.route(method, "/v2/echo/app/manifests/1", echo)
    secrets = Secrets({"regcred": pull_secret("regcred", faults.host, "ci", "s3cret-pw")})
    resolver = await make_resolver(local_settings(faults.host), secrets=secrets)
    with pytest.raises(UnexpectedStatus) as caught:
        await resolver.platforms(f"{faults.host}/echo/app:1", pod("regcred"))
    reason = describe_failure(caught.value)
    encoded = auth_field("ci", "s3cret-pw")
    assert (False, True) == (encoded in reason, "Authorization: [redacted]" in reason)


async def test_an_allowed_network_entry_with_a_port_opens_that_port_only(
    faults: RunningFaults, elsewhere: RunningFaults, make_resolver: ResolverFactory
) -> None:
    """allowedNetworks `127.0.0.1:<port>` reaches that registry; another port on it is refused."""
    for running in (faults, elsewhere):
        running.registry.image("app", "1", "linux/arm64")
    settings = local_settings(faults.host, elsewhere.host, allowed_networks=(faults.host,))
    resolver = await make_resolver(settings)
    platforms = await resolver.platforms(f"{faults.host}/app:1", POD)
    with pytest.raises(AddressForbidden):
        await resolver.platforms(f"{elsewhere.host}/app:1", POD)
    assert (["linux/arm64"], 0) == (
        [str(p) for p in platforms],
        len(elsewhere.registry.seen),
    )


async def test_a_digest_whose_body_does_not_hash_to_it_does_not_pin_the_tag(
    faults: RunningFaults, make_resolver: ResolverFactory
) -> None:
    """HEAD names X and X's body hashes elsewhere; once the registry is fixed the tag resolves."""
    body = canonical({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "layers": []})
    lie = sha256(b"not this body")
    for name in ("1", lie):
        faults.registry.serve(f"/v2/liar/app/manifests/{name}", body, OCI_MANIFEST, digest=lie)
    resolver = await make_resolver(local_settings(faults.host))
    with pytest.raises(DigestMismatch):
        await resolver.platforms(f"{faults.host}/liar/app:1", POD)
    faults.registry.image("liar/app", "1", "linux/arm64")  # the registry is fixed
    platforms = await resolver.platforms(f"{faults.host}/liar/app:1", POD)
    assert ["linux/arm64"] == [str(p) for p in platforms]


async def test_a_malformed_digest_named_with_a_tags_manifest_is_an_unreadable_manifest(
    faults: RunningFaults, make_resolver: ResolverFactory
) -> None:
    """A never-seen tag's GET names a digest that is no digest: the manifest is unreadable (a
    ManifestInvalid naming the host), not a bad image name; the digest's form is checked once,
    by the body's verification."""
    body = canonical({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "layers": []})
    faults.registry.serve("/v2/odd/app/manifests/1", body, OCI_MANIFEST, digest="sha256:abc")
    resolver = await make_resolver(local_settings(faults.host))
    with pytest.raises(ManifestInvalid) as caught:
        await resolver.platforms(f"{faults.host}/odd/app:1", POD)
    assert f"{faults.host}: invalid digest 'sha256:abc'" == str(caught.value)


def challenge_with_realm(faults: RunningFaults, path: str, realm: str) -> None:
    """Answer `path` (HEAD and GET) with 401 naming `realm`."""

    async def refuse(request: web.Request) -> web.StreamResponse:
        header = f'Bearer realm="{realm}",service="registry"'
        return web.Response(status=401, headers={"WWW-Authenticate": header})

    for method in ("HEAD", "GET"):
        faults.registry.route(method, path, refuse)


async def test_one_repositorys_bad_challenge_does_not_break_the_other_repositories_on_its_host(
    faults: RunningFaults, make_resolver: ResolverFactory
) -> None:
    """Repo b names a realm on a forbidden address; repos c and d, anonymous, still resolve."""
    challenge_with_realm(faults, "/v2/b/app/manifests/1", "http://169.254.169.254/token")
    for repo in ("c/app", "d/app"):
        faults.registry.image(repo, "1", "linux/arm64")
    resolver = await make_resolver(local_settings(faults.host))
    with pytest.raises(RegistryError):
        await resolver.platforms(f"{faults.host}/b/app:1", POD)
    found = [
        {str(p) for p in await resolver.platforms(f"{faults.host}/{repo}:1", POD)}
        for repo in ("c/app", "d/app")
    ]
    assert [{"linux/arm64"}, {"linux/arm64"}] == found


async def test_a_remembered_challenge_expires_so_a_fixed_repository_resolves_again(
    faults: RunningFaults,
) -> None:
    """A bad challenge is used for five minutes at most, not until restart."""
    challenge_with_realm(faults, "/v2/b/app/manifests/1", "http://169.254.169.254/token")
    settings = local_settings(faults.host)
    clock = FakeClock()
    transport = Transport(settings)
    client = RegistryClient(transport, HostTable(settings), clock)
    ref = parse(f"{faults.host}/b/app:1")
    try:
        with pytest.raises(RegistryError):
            await client.resolve_tag(ref, ())
        faults.registry.routes.pop(("HEAD", "/v2/b/app/manifests/1"))  # fixed: anonymous now
        digest = faults.registry.image("b/app", "1", "linux/arm64")
        with pytest.raises(RegistryError):
            await client.resolve_tag(ref, ())  # still the remembered challenge
        clock.advance(301)
        resolved = await client.resolve_tag(ref, ())
    finally:
        await client.aclose()
        await transport.aclose()
    assert digest == resolved


async def test_credentials_never_go_to_a_realm_named_by_a_host_the_registry_redirected_to(
    faults: RunningFaults,
    elsewhere: RunningFaults,
    third: RunningFaults,
    make_resolver: ResolverFactory,
) -> None:
    """A redirects to B, B's 401 names realm C: C never receives A's Basic credentials."""
    faults.registry.redirect("/v2/app/manifests/1", f"{elsewhere.url}/v2/app/manifests/1")
    challenge_with_realm(elsewhere, "/v2/app/manifests/1", f"{third.url}/collect")
    secrets = Secrets({"regcred": pull_secret("regcred", faults.host, "ci", "s3cret-pw")})
    settings = local_settings(faults.host, elsewhere.host, third.host)
    resolver = await make_resolver(settings, secrets=secrets)
    with pytest.raises(Unauthorized):
        await resolver.platforms(f"{faults.host}/app:1", pod("regcred"))
    assert [] == [seen.headers.get("Authorization") for seen in third.registry.seen]


async def test_a_warm_index_of_95001_platforms_is_judged_and_logged_cheaply(
    faults: RunningFaults, make_resolver: ResolverFactory
) -> None:
    """Warm lookups hand out the very set the first lookup kept, and a 100-node filter and
    its log summaries reuse what the first filter built from it: the set is indexed and
    summarised once, not per call (counted, not timed); each log summary stays short."""
    # 46 bytes an entry, so 95,001 distinct ones fit under the manifest cap.
    names = [a + b + c for a in _ALPHABET for b in _ALPHABET for c in _ALPHABET]
    entries = [
        {"platform": {"os": _ALPHABET[i % 36], "architecture": names[i // 36]}}
        for i in range(95_000)
    ]
    entries.append({"platform": {"os": "linux", "architecture": "arm64"}})
    index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}
    faults.registry.manifest("huge/app", "1", index, OCI_INDEX)
    resolver = await make_resolver(local_settings(faults.host))
    image = f"{faults.host}/huge/app:1"
    kept = await resolver.platforms(image, POD)  # cold: parsed once
    amd, arm = (
        (normalize("linux", "amd64"), Rule.STRICT, False),
        (normalize("linux", "arm64"), Rule.STRICT, False),
    )
    names = [f"node-{i}" for i in range(100)]
    facts = [arm if i % 2 else amd for i in range(100)]
    nodes = Candidates.of(names, facts)

    def judged(platforms: frozenset[Platform]) -> tuple[int, int]:
        """Filter and summarise as the extender does; the longest summary line."""
        decision = decide_filter([image], {image: platforms}, nodes, Policy())
        summaries = [summarise_platforms(v.image_platforms) for v, _ in decision.groups]
        return len(decision.passed), max(len(str(summary)) for summary in summaries)

    judged(kept)  # the first filter indexes the set and summarises it
    built = _built_from_sets()
    handed, answers = [], []
    for _ in range(21):
        platforms = await resolver.platforms(image, POD)
        handed.append(platforms is kept)  # an equal copy would be hashed and compared whole
        answers.append(judged(platforms))
    passed, longest = answers[-1]
    assert (95_001, [True] * 21, built, 50, True) == (
        len(kept),
        handed,
        _built_from_sets(),
        passed,
        longest < 300,
    )


def _built_from_sets() -> tuple[int, int]:
    """How many platform sets have been indexed and summarised (extender.core.platforms
    keeps each once): a warm call that builds either again pays for the whole set."""
    return (
        core_platforms._by_key.cache_info().misses,
        core_platforms._summary.cache_info().misses,
    )


async def test_eighty_images_on_eight_slow_registries_do_not_starve_a_healthy_one(
    faults: RunningFaults, make_resolver: ResolverFactory
) -> None:
    """A pod's 80 images hang on 8 hosts; a new image on a healthy host is still known in time.

    And the hung lookups give up at the deadline plus lookupGraceSeconds, not the request timeout.
    """
    async with contextlib.AsyncExitStack() as stack:
        slow = [await stack.enter_async_context(serve_faults()) for _ in range(8)]
        images = []
        for host in slow:
            for i in range(10):
                host.registry.slow(f"/v2/app{i}/manifests/1", seconds=30)
                images.append(f"{host.host}/app{i}:1")
        faults.registry.image("healthy/app", "1", "linux/arm64")
        hosts = [faults.host, *(host.host for host in slow)]
        settings = local_settings(*hosts, request_timeout_seconds=10.0, lookup_grace_seconds=1.0)
        resolution = Resolution(await make_resolver(settings))
        started = time.monotonic()
        hung = await resolution.resolve(images, POD, budget_seconds=1.0)
        healthy = await resolution.resolve(
            [f"{faults.host}/healthy/app:1"], POD, budget_seconds=1.0
        )
        await asyncio.wait(set(resolution._background), timeout=15)  # the hung lookups
        gave_up = time.monotonic() - started
        await resolution.aclose()
    assert (80, {"linux/arm64"}, True) == (
        sum(isinstance(r, Unknown) for r in hung.values()),
        {str(p) for p in healthy[f"{faults.host}/healthy/app:1"]}
        if isinstance(healthy[f"{faults.host}/healthy/app:1"], frozenset)
        else healthy,
        # The request timeout (10 s) would be waited out in full; the deadline is 1 s + 1 s.
        gave_up < settings.request_timeout_seconds,
    )
