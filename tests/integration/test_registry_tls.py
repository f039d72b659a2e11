"""HTTPS registries: system CAs by default, a per-host CA bundle, or skipping verification."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from extender.config.registry_settings import HostSettings
from extender.registry.errors import RegistryError, Unreachable
from tests.integration.conftest import (
    ResolverFactory,
    RunningFaults,
    Secrets,
    local_settings,
    pod,
)
from tests.support.faults import FaultRegistry
from tests.support.pull_secrets import pull_secret
from tests.support.tls import ServingCert, make_serving_cert

pytestmark = pytest.mark.integration


@pytest.fixture
def serving_cert(tmp_path: Path) -> ServingCert:
    """A CA and a certificate for 127.0.0.1."""
    return make_serving_cert(tmp_path / "tls")


@pytest.fixture
async def tls_faults(serving_cert: ServingCert) -> AsyncIterator[RunningFaults]:
    """A scripted registry served over HTTPS on 127.0.0.1."""
    registry = FaultRegistry()
    server = TestServer(registry.app(), host="127.0.0.1")
    await server.start_server(ssl=serving_cert.server_context())
    try:
        yield RunningFaults(registry, f"127.0.0.1:{server.port}")
    finally:
        await server.close()


def https(host: str, **options: object) -> HostSettings:
    """HostSettings for an HTTPS registry."""
    return HostSettings(plain_http=False, **options)  # type: ignore[arg-type]


async def test_a_registry_signed_by_an_unknown_ca_is_unreachable(
    tls_faults: RunningFaults, make_resolver: ResolverFactory
) -> None:
    """Without caBundle the system CAs do not know our test CA: the TLS handshake fails."""
    tls_faults.registry.image("tls/app", "1", "linux/amd64")
    settings = local_settings(hosts={tls_faults.host: https(tls_faults.host)})
    resolver = await make_resolver(settings)
    with pytest.raises(Unreachable):
        await resolver.platforms(f"{tls_faults.host}/tls/app:1", pod())


async def test_the_hosts_ca_bundle_makes_it_trusted(
    tls_faults: RunningFaults, serving_cert: ServingCert, make_resolver: ResolverFactory
) -> None:
    """hosts.<registry>.caBundle adds the CA for that registry."""
    tls_faults.registry.image("tls/app", "1", "linux/arm64")
    host = https(tls_faults.host, ca_bundle=str(serving_cert.ca_bundle))
    resolver = await make_resolver(local_settings(hosts={tls_faults.host: host}))
    platforms = await resolver.platforms(f"{tls_faults.host}/tls/app:1", pod())
    assert {"linux/arm64"} == {str(p) for p in platforms}


async def test_insecure_skip_verify_accepts_any_certificate(
    tls_faults: RunningFaults, make_resolver: ResolverFactory
) -> None:
    """hosts.<registry>.insecureSkipVerify turns verification off for that registry only."""
    tls_faults.registry.image("tls/app", "1", "linux/arm/v7")
    host = https(tls_faults.host, insecure_skip_verify=True)
    resolver = await make_resolver(local_settings(hosts={tls_faults.host: host}))
    platforms = await resolver.platforms(f"{tls_faults.host}/tls/app:1", pod())
    assert {"linux/arm/v7"} == {str(p) for p in platforms}


async def test_credentials_are_not_sent_to_a_plain_http_realm_of_an_https_registry(
    tls_faults: RunningFaults,
    faults: RunningFaults,
    serving_cert: ServingCert,
    make_resolver: ResolverFactory,
) -> None:
    """An HTTPS registry pointing its token realm at http:// gets no Basic credentials."""

    async def challenge(request: web.Request) -> web.StreamResponse:
        realm = f'Bearer realm="{faults.url}/token",service="s"'
        return web.Response(status=401, headers={"WWW-Authenticate": realm})

    tls_faults.registry.route("GET", "/v2/tls/app/manifests/1", challenge)
    secrets = Secrets({"regcred": pull_secret("regcred", tls_faults.host, "u", "p")})
    host = https(tls_faults.host, ca_bundle=str(serving_cert.ca_bundle))
    resolver = await make_resolver(local_settings(hosts={tls_faults.host: host}), secrets=secrets)
    with pytest.raises(RegistryError):
        await resolver.platforms(f"{tls_faults.host}/tls/app:1", pod("regcred"))
    sent = [s.headers.get("Authorization") for s in faults.registry.seen]
    assert [None] == sent  # only the anonymous attempt reached the realm


async def test_a_token_realm_on_the_registry_itself_is_trusted_through_its_ca_bundle(
    tls_faults: RunningFaults, serving_cert: ServingCert, make_resolver: ResolverFactory
) -> None:
    """The token fetch uses the registry's TLS options, as containerd's per-host client does."""
    tls_faults.registry.image("tls/app", "1", "linux/arm64")
    protected = dict(tls_faults.registry.routes)

    async def bearer_only(request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != "Bearer t0ken":
            realm = f'Bearer realm="https://{tls_faults.host}/token",service="s"'
            return web.Response(status=401, headers={"WWW-Authenticate": realm})
        return await protected[("GET", request.path)](request)

    async def token(request: web.Request) -> web.StreamResponse:
        return web.json_response({"token": "t0ken"})

    for method, path in protected:
        tls_faults.registry.route(method, path, bearer_only)
    tls_faults.registry.route("GET", "/token", token)
    host = https(tls_faults.host, ca_bundle=str(serving_cert.ca_bundle))
    resolver = await make_resolver(local_settings(hosts={tls_faults.host: host}))
    platforms = await resolver.platforms(f"{tls_faults.host}/tls/app:1", pod())
    assert {"linux/arm64"} == {str(p) for p in platforms}


async def test_a_plain_http_registry_reached_over_tls_names_the_setting_to_use(
    faults: RunningFaults, make_resolver: ResolverFactory
) -> None:
    """OpenSSL's WRONG_VERSION_NUMBER becomes the fix: registry.hosts."h:p".plainHttp: true."""
    faults.registry.image("plain/app", "1", "linux/amd64")
    resolver = await make_resolver(local_settings(hosts={faults.host: https(faults.host)}))
    with pytest.raises(Unreachable) as refused:
        await resolver.platforms(f"{faults.host}/plain/app:1", pod())
    expected = (
        f"{faults.host}: answered plain HTTP, not TLS; if it serves no TLS, set "
        f'registry.hosts."{faults.host}".plainHttp: true'
    )
    assert expected == str(refused.value)


# `serve`'s import of aiohttp (cli._serve), then a first lookup with no server to read the
# CA store after it is ready: the request itself must read it. Prints what it saw.
FIRST_LOOKUP_AFTER_A_DEFERRED_IMPORT = """
import asyncio, json, sys
from extender.registry import system_cas
system_cas.import_aiohttp()
from extender.core.pods import PullSecretsRef
from extender.registry.resolver import build_resolver
from extender.config.registry_settings import CacheSettings, HostSettings, RegistrySettings

async def first_lookup(host):
    settings = RegistrySettings(
        hosts={host: HostSettings(plain_http=False)},
        allowed_networks=("127.0.0.1/32",),
        request_timeout_seconds=5.0,
    )
    resolver = await build_resolver(settings, CacheSettings(), None, None)
    deferred = system_cas.pending()
    try:
        platforms = await resolver.platforms(f"{host}/tls/app:1", PullSecretsRef("team-a", ()))
    finally:
        await resolver.aclose()
    print(json.dumps({"deferred": deferred, "platforms": sorted(map(str, platforms))}))

asyncio.run(first_lookup(sys.argv[1]))
"""


async def test_the_first_lookup_after_serves_deferred_import_trusts_the_system_cas(
    tls_faults: RunningFaults, serving_cert: ServingCert
) -> None:
    """serve imports aiohttp without its CA store; the first HTTPS request reads it first."""
    tls_faults.registry.image("tls/app", "1", "linux/arm64")
    # OpenSSL's system store is SSL_CERT_FILE when set: here, the test CA alone.
    env = {**os.environ, "SSL_CERT_FILE": str(serving_cert.ca_bundle)}
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        FIRST_LOOKUP_AFTER_A_DEFERRED_IMPORT,
        tls_faults.host,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(child.communicate(), 60)
    assert 0 == child.returncode, err.decode()[-2000:]
    # Two contexts (aiohttp's verified and unverified defaults) were left to read.
    assert {"deferred": 2, "platforms": ["linux/arm64"]} == orjson.loads(out.splitlines()[-1])
