"""Registries, redirectors and token servers that attack archfit on purpose (issue 13)."""

from __future__ import annotations

import base64

import pytest
from aiohttp import web

from extender.registry.errors import AddressForbidden, DigestMismatch, UnexpectedStatus
from extender.resolution import describe_failure
from tests.integration.conftest import (
    POD,
    ResolverFactory,
    RunningFaults,
    Secrets,
    dockerconfigjson,
    local_settings,
    pod,
)
from tests.support.faults import OCI_MANIFEST, canonical, sha256

pytestmark = pytest.mark.integration


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
    secrets = Secrets({"regcred": dockerconfigjson("regcred", faults.host, "ci", "s3cret-pw")})
    resolver = await make_resolver(local_settings(faults.host), secrets=secrets)
    with pytest.raises(UnexpectedStatus) as caught:
        await resolver.platforms(f"{faults.host}/echo/app:1", pod("regcred"))
    reason = describe_failure(caught.value)
    encoded = base64.b64encode(b"ci:s3cret-pw").decode()
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
