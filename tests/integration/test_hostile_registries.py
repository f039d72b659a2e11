"""Registries, redirectors and token servers that attack archfit on purpose (issue 13)."""

from __future__ import annotations

import base64

import pytest
from aiohttp import web

from extender.registry.errors import AddressForbidden, UnexpectedStatus
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
