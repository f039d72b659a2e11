"""A registry that misbehaves on purpose: every fault is a clear error, bounded in time and size."""

from __future__ import annotations

import time

import pytest
from aiohttp import web

from extender.config.registry_settings import HostSettings, MirrorSettings
from extender.metrics import Metrics
from extender.registry.errors import (
    AddressForbidden,
    DigestMismatch,
    ManifestInvalid,
    Schema1Unsupported,
    Timeout,
    TooLarge,
    UnexpectedStatus,
    Unreachable,
)
from tests.integration.conftest import (
    POD,
    ResolverFactory,
    RunningFaults,
    Secrets,
    local_settings,
    pod,
)
from tests.support.faults import OCI_INDEX, OCI_MANIFEST, canonical, sha256
from tests.support.fixtures import PublishedRegistry
from tests.support.process import free_port
from tests.support.pull_secrets import pull_secret

pytestmark = pytest.mark.integration


async def test_a_slow_registry_times_out_within_the_request_limit(
    faults: RunningFaults, make_resolver: ResolverFactory
) -> None:
    """No answer within requestTimeoutSeconds raises Timeout, well before the answer comes."""
    slow = 30
    faults.registry.slow("/v2/slow/app/manifests/1", seconds=slow)
    settings = local_settings(faults.host, request_timeout_seconds=0.5, connect_timeout_seconds=0.5)
    resolver = await make_resolver(settings)
    started = time.monotonic()
    with pytest.raises(Timeout):
        await resolver.platforms(f"{faults.host}/slow/app:1", POD)
    # Waiting for the answer takes the registry's 30 s: any answer sooner is the limit's.
    assert time.monotonic() - started < slow / 2


async def test_a_500_is_an_unexpected_status_with_its_body_cut_short(
    faults: RunningFaults, make_resolver: ResolverFactory
) -> None:
    """A 5xx with a huge body becomes a short message carrying the status."""
    faults.registry.fail("/v2/broken/app/manifests/1", 500, b"x" * 200_000)
    resolver = await make_resolver(local_settings(faults.host))
    with pytest.raises(UnexpectedStatus) as caught:
        await resolver.platforms(f"{faults.host}/broken/app:1", POD)
    assert (500, True) == (caught.value.status, len(str(caught.value)) < 300)


async def test_a_body_that_does_not_hash_to_its_digest_is_rejected(
    faults: RunningFaults, make_resolver: ResolverFactory
) -> None:
    """The registry claims one digest and serves other bytes: DigestMismatch."""
    body = canonical({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": []})
    claimed = sha256(b"something else entirely")
    faults.registry.serve("/v2/liar/app/manifests/1", body, OCI_INDEX, digest=claimed)
    faults.registry.serve(f"/v2/liar/app/manifests/{claimed}", body, OCI_INDEX, digest=claimed)
    resolver = await make_resolver(local_settings(faults.host))
    with pytest.raises(DigestMismatch):
        await resolver.platforms(f"{faults.host}/liar/app:1", POD)


@pytest.mark.parametrize("by", ["tag", "digest"])
async def test_a_manifest_larger_than_the_cap_is_cut_off(
    faults: RunningFaults, make_resolver: ResolverFactory, by: str
) -> None:
    """A streamed manifest beyond 4,393,216 bytes raises TooLarge without reading it all."""
    digest = sha256(b"whatever")
    faults.registry.huge(f"/v2/big/app/manifests/{'1' if by == 'tag' else digest}", 50_000_000)
    resolver = await make_resolver(local_settings(faults.host))
    with pytest.raises(TooLarge):
        await resolver.platforms(
            f"{faults.host}/big/app{':1' if by == 'tag' else '@' + digest}", POD
        )


async def test_a_blob_redirect_to_the_metadata_service_is_refused(
    faults: RunningFaults, make_resolver: ResolverFactory
) -> None:
    """307 to 169.254.169.254 is checked like any other hop, and refused."""
    faults.registry.image("meta/app", "1", "linux/amd64")
    config_path = next(p for (_m, p) in faults.registry.routes if "/blobs/" in p)
    faults.registry.redirect(config_path, "http://169.254.169.254/latest/meta-data/")
    resolver = await make_resolver(local_settings(faults.host))
    with pytest.raises(AddressForbidden):
        await resolver.platforms(f"{faults.host}/meta/app:1", POD)


async def test_a_token_realm_on_a_link_local_address_is_refused(
    faults: RunningFaults, make_resolver: ResolverFactory
) -> None:
    """The realm of a Bearer challenge passes the same SSRF guard."""

    async def challenge(request: web.Request) -> web.StreamResponse:
        realm = 'Bearer realm="http://169.254.169.254/token",service="x"'
        return web.Response(status=401, headers={"WWW-Authenticate": realm})

    faults.registry.route("GET", "/v2/sneaky/app/manifests/1", challenge)
    resolver = await make_resolver(local_settings(faults.host))
    with pytest.raises(AddressForbidden):
        await resolver.platforms(f"{faults.host}/sneaky/app:1", POD)


async def test_a_blob_redirect_to_another_host_does_not_carry_the_authorization_header(
    faults: RunningFaults, elsewhere: RunningFaults, make_resolver: ResolverFactory
) -> None:
    """Object storage gets the redirect's own URL, never the registry credentials."""
    faults.registry.image("s3/app", "1", "linux/arm64")
    config_path = next(p for (_m, p) in faults.registry.routes if "/blobs/" in p)
    handler = faults.registry.routes[("GET", config_path)]
    elsewhere.registry.route("GET", "/bucket/config", handler)
    faults.registry.redirect(config_path, f"{elsewhere.url}/bucket/config")
    protected = dict(faults.registry.routes)

    async def basic_only(request: web.Request) -> web.StreamResponse:
        if not request.headers.get("Authorization", "").startswith("Basic "):
            return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="t"'})
        return await protected[(request.method if request.method != "HEAD" else "GET",
                                request.path)](request)  # fmt: skip

    for method, path in list(protected):
        faults.registry.route(method, path, basic_only)
    secrets = Secrets({"regcred": pull_secret("regcred", faults.host, "u", "p")})
    resolver = await make_resolver(local_settings(faults.host, elsewhere.host), secrets=secrets)
    platforms = await resolver.platforms(f"{faults.host}/s3/app:1", pod("regcred"))
    storage_auth = [s.headers.get("Authorization") for s in elsewhere.registry.seen]
    blob_auth = [s.headers.get("Authorization", "")[:6] for s in faults.registry.seen
                 if "/blobs/" in s.path]  # fmt: skip
    assert ({"linux/arm64"}, [None], ["Basic "]) == (
        {str(p) for p in platforms},
        storage_auth,
        blob_auth,
    )


async def test_malformed_json_is_an_invalid_manifest(
    faults: RunningFaults, make_resolver: ResolverFactory
) -> None:
    """Garbage where a manifest should be raises ManifestInvalid."""
    body = b'{"schemaVersion": 2, "manifests": [ oops'
    digest = sha256(body)
    faults.registry.serve("/v2/garbage/app/manifests/1", body, OCI_INDEX, digest=digest)
    faults.registry.serve(f"/v2/garbage/app/manifests/{digest}", body, OCI_INDEX)
    resolver = await make_resolver(local_settings(faults.host))
    with pytest.raises(ManifestInvalid):
        await resolver.platforms(f"{faults.host}/garbage/app:1", POD)


async def test_a_schema1_manifest_is_reported_as_unsupported(
    faults: RunningFaults, make_resolver: ResolverFactory
) -> None:
    """Docker schema 1 is detected and refused, as containerd 2.x refuses it."""
    document = {"schemaVersion": 1, "name": "old/app", "tag": "1", "architecture": "amd64"}
    faults.registry.manifest(
        "old/app", "1", document, "application/vnd.docker.distribution.manifest.v1+prettyjws"
    )
    resolver = await make_resolver(local_settings(faults.host))
    with pytest.raises(Schema1Unsupported):
        await resolver.platforms(f"{faults.host}/old/app:1", POD)


async def test_an_index_with_only_unknown_and_attestation_entries_has_no_platforms(
    faults: RunningFaults, make_resolver: ResolverFactory
) -> None:
    """No usable entries is a known fact (empty set), not an error."""
    entry = {"mediaType": OCI_MANIFEST, "digest": sha256(b"a"), "size": 1}
    document = {
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [
            {**entry, "platform": {"os": "unknown", "architecture": "unknown"}},
            {**entry, "platform": {"os": "linux", "architecture": "amd64"},
             "annotations": {"vnd.docker.reference.type": "attestation-manifest"}},
        ],
    }  # fmt: skip
    faults.registry.manifest("empty/app", "1", document, OCI_INDEX)
    resolver = await make_resolver(local_settings(faults.host))
    assert frozenset() == await resolver.platforms(f"{faults.host}/empty/app:1", POD)


async def test_a_registry_without_head_support_is_read_with_get(
    faults: RunningFaults, make_resolver: ResolverFactory
) -> None:
    """HEAD answered 405: the tag is resolved by GET and its body's digest."""
    digest = faults.registry.image("nohead/app", "1", "linux/amd64")
    faults.registry.fail("/v2/nohead/app/manifests/1", 405, method="HEAD")
    resolver = await make_resolver(local_settings(faults.host))
    resolved = await resolver.resolve(f"{faults.host}/nohead/app:1", POD)
    assert (digest, {"linux/amd64"}) == (resolved.digest, {str(p) for p in resolved.platforms})


async def test_ratelimit_remaining_is_recorded(
    faults: RunningFaults, make_resolver: ResolverFactory
) -> None:
    """Docker Hub's `ratelimit-remaining: 76;w=21600` shows up as a gauge."""
    body = canonical({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": []})
    digest = sha256(body)
    faults.registry.serve(
        "/v2/limited/app/manifests/1",
        body,
        OCI_INDEX,
        digest=digest,
        headers={"ratelimit-remaining": "76;w=21600"},
    )
    metrics = Metrics()
    resolver = await make_resolver(local_settings(faults.host), metrics=metrics)
    await resolver.platforms(f"{faults.host}/limited/app:1", POD)
    value = metrics.registry.get_sample_value(
        "archfit_registry_ratelimit_remaining", {"host": faults.host}
    )
    assert 76.0 == value


async def test_a_closed_port_is_unreachable(make_resolver: ResolverFactory) -> None:
    """Connection refused raises Unreachable."""
    host = f"127.0.0.1:{free_port()}"
    resolver = await make_resolver(local_settings(host))
    with pytest.raises(Unreachable):
        await resolver.platforms(f"{host}/gone/app:1", POD)


async def test_a_mirror_answers_before_the_registry_itself(
    faults: RunningFaults, public_registry: PublishedRegistry, make_resolver: ResolverFactory
) -> None:
    """hosts.toml semantics: a resolve+pull mirror serves everything; the origin sees nothing."""
    mirror = MirrorSettings(url=public_registry.registry.url)
    settings = local_settings(
        faults.host,
        hosts={faults.host: HostSettings(plain_http=True, mirrors=(mirror,))},
    )
    resolver = await make_resolver(settings)
    platforms = await resolver.platforms(f"{faults.host}/archfit/multi:1.0", POD)
    expected = (public_registry.catalog.multiarch_oci.platforms, [])
    assert expected == ({str(p) for p in platforms}, faults.registry.seen)


async def test_a_pull_only_mirror_serves_digests_while_the_registry_answers_tags(
    faults: RunningFaults, public_registry: PublishedRegistry, make_resolver: ResolverFactory
) -> None:
    """Tags go to the origin (HEAD), content by digest to the pull-only mirror, even for a
    never-seen tag: a GET of the tag would spend the pull at the origin, not the mirror."""
    image = public_registry.catalog.manifest_list
    faults.registry.serve("/v2/archfit/listed/manifests/1.0", b"", image.media_type,
                          digest=image.digest)  # fmt: skip
    mirror = MirrorSettings(url=public_registry.registry.url, capabilities=("pull",))
    settings = local_settings(
        faults.host,
        hosts={faults.host: HostSettings(plain_http=True, mirrors=(mirror,))},
    )
    resolver = await make_resolver(settings)
    platforms = await resolver.platforms(f"{faults.host}/archfit/listed:1.0", POD)
    seen = [(s.method, s.path) for s in faults.registry.seen]
    assert (image.platforms, [("HEAD", "/v2/archfit/listed/manifests/1.0")]) == (
        {str(p) for p in platforms},
        seen,
    )


async def test_a_failing_mirror_falls_back_to_the_registry(
    faults: RunningFaults, public_registry: PublishedRegistry, make_resolver: ResolverFactory
) -> None:
    """The mirror 500s; the origin (last in line) answers."""
    registry = public_registry.registry
    broken = MirrorSettings(url=faults.url)
    faults.registry.fail("/v2/archfit/amd64/manifests/1.0", 500, method="HEAD")
    settings = local_settings(
        registry.host, hosts={registry.host: HostSettings(plain_http=True, mirrors=(broken,))}
    )
    resolver = await make_resolver(settings)
    platforms = await resolver.platforms(public_registry.catalog.amd64_only.reference, POD)
    assert {"linux/amd64"} == {str(p) for p in platforms}
