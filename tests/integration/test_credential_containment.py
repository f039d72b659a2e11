"""Credentials go only where they belong, and never come back in an error's text."""

from __future__ import annotations

import pytest
from aiohttp import web

from extender.config.registry_settings import HostSettings, MirrorSettings
from extender.registry.errors import RegistryError
from extender.registry.pure.reference import parse
from tests.integration.conftest import ResolverFactory, RunningFaults, local_settings, pod
from tests.support.fakes import Secrets
from tests.support.faults import Handler
from tests.support.fixtures import PublishedRegistry
from tests.support.pull_secrets import auth_field, pull_secret

pytestmark = pytest.mark.integration

USER, PASSWORD = "alice", "s3cr3t-pa55"


def _challenge_or(status: int, text: str = "") -> Handler:
    """A handler: 401 with a Basic challenge until a credential is sent, then `status`."""

    async def handler(request: web.Request) -> web.StreamResponse:
        if "Authorization" not in request.headers:
            return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="r"'})
        return web.Response(status=status, text=text)

    return handler


async def test_a_registrys_pull_secret_is_not_sent_to_its_mirror(
    basic_registry: PublishedRegistry, faults: RunningFaults, make_resolver: ResolverFactory
) -> None:
    """The mirror asks for credentials and gets none (the secret names the registry, as
    containerd's ServerAddress would); the registry itself then answers."""
    user, password = basic_registry.credentials or ("", "")
    image = basic_registry.catalog.single
    ref = parse(image.reference)
    path = f"/v2/{ref.path}/manifests/{ref.tag}"
    for method in ("HEAD", "GET"):
        faults.registry.route(method, path, _challenge_or(500))
    host = basic_registry.registry.host
    mirror = MirrorSettings(url=faults.url, capabilities=("pull", "resolve"))
    settings = local_settings(host, hosts={host: HostSettings(plain_http=True, mirrors=(mirror,))})
    secrets = Secrets({"regcred": pull_secret("regcred", host, user, password)})
    resolver = await make_resolver(settings, secrets=secrets)
    platforms = await resolver.platforms(image.reference, pod("regcred"))
    sent = [seen.headers.get("Authorization") for seen in faults.registry.seen]
    assert image.platforms == {str(p) for p in platforms}
    assert [] == [header for header in sent if header is not None]
    assert sent  # the mirror was asked first


async def test_a_credential_a_registry_echoes_back_is_in_no_error_text(
    faults: RunningFaults, make_resolver: ResolverFactory
) -> None:
    """The password, user:password and its base64, echoed in a 500 body, are all redacted,
    and so is a secret-looking field of the body."""
    encoded = auth_field(USER, PASSWORD)
    echo = (
        f"raw-b64 {encoded} bare {encoded.rstrip('=')} decoded {USER}:{PASSWORD} pass {PASSWORD}"
        ' {"SecretAccessKey":"wJalrXUtnFEMI/K7MDENG"}'
    )
    # HEAD says nothing (200, no digest), so the GET that follows gets the echo.
    faults.registry.route("HEAD", "/v2/team/app/manifests/1", _challenge_or(200))
    faults.registry.route("GET", "/v2/team/app/manifests/1", _challenge_or(500, echo))
    secrets = Secrets({"regcred": pull_secret("regcred", faults.host, USER, PASSWORD)})
    resolver = await make_resolver(local_settings(faults.host), secrets=secrets)
    with pytest.raises(RegistryError) as caught:
        await resolver.platforms(f"{faults.host}/team/app:1", pod("regcred"))
    text = str(caught.value)
    leaked = [s for s in (PASSWORD, encoded, encoded.rstrip("="), "wJalrXUtnFEMI") if s in text]
    assert ([], True) == (leaked, "answered 500" in text)
