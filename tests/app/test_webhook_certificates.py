"""Webhook serving certificates made with the `openssl` CLI, as an operator makes them: what
kube-apiserver's client accepts is served, what it refuses is refused, and /readyz and the
listening line say why and what to do."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from structlog.testing import capture_logs

from extender.server import create_app
from tests.app.conftest import settings, table_resolver
from tests.app.test_webhook import review
from tests.objects import pod
from tests.support.fakes import FunctionResolver
from tests.support.process import free_port

SERVICE = "archfit-webhook.archfit-system.svc"

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")


def openssl(workdir: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=workdir, check=True, capture_output=True, timeout=60)


def self_signed(workdir: Path, name: str, *extra: str, key: str = "tls.key") -> Path:
    """The README's way: `openssl req -x509` (OpenSSL 3 marks it CA:TRUE)."""
    openssl(
        workdir, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
        "-out", name, "-days", "30", "-subj", f"/CN={SERVICE}",
        "-addext", f"subjectAltName=DNS:{SERVICE},IP:127.0.0.1", *extra,
    )  # fmt: skip
    return workdir / name


def expired(workdir: Path) -> Path:
    """`openssl ca -selfsign` with an end date in the past."""
    openssl(workdir, "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", "tls.key",
            "-out", "tls.csr", "-subj", f"/CN={SERVICE}",
            "-addext", f"subjectAltName=DNS:{SERVICE},IP:127.0.0.1")  # fmt: skip
    (workdir / "index.txt").write_text("")
    (workdir / "serial").write_text("01\n")
    (workdir / "ca.cnf").write_text(
        "[ca]\ndefault_ca = d\n[d]\ndatabase = index.txt\nnew_certs_dir = .\nserial = serial\n"
        "default_md = sha256\npolicy = p\ncopy_extensions = copy\n[p]\ncommonName = supplied\n"
    )
    openssl(workdir, "ca", "-batch", "-config", "ca.cnf", "-selfsign", "-keyfile", "tls.key",
            "-in", "tls.csr", "-out", "tls.crt", "-startdate", "20200101000000Z",
            "-enddate", "20200201000000Z")  # fmt: skip
    return workdir / "tls.crt"


Start = Callable[[Path], Awaitable[tuple[Any, int, list[dict[str, Any]]]]]


@pytest.fixture
def start(aiohttp_client: Any) -> Start:
    async def make(cert: Path) -> tuple[Any, int, list[dict[str, Any]]]:
        port = free_port()
        hook = {
            "enabled": True,
            "host": "127.0.0.1",
            "port": port,
            "certFile": str(cert),
            "keyFile": str(cert.parent / "tls.key"),
        }
        with capture_logs() as logs:
            client = await aiohttp_client(
                create_app(settings(webhook=hook), resolver=FunctionResolver(table_resolver))
            )
        return client, port, logs

    return make


async def _mutate(port: int, ca_bundle: Path) -> bool:
    """A pod CREATE as kube-apiserver sends it: the caBundle its only trust, SNI the Service."""
    trust = ssl.create_default_context(cafile=str(ca_bundle))
    connector = aiohttp.TCPConnector(ssl=trust, resolver=_Pinned(port))
    body = orjson.dumps(review(pod("acme/amd:1")))
    async with (
        aiohttp.ClientSession(connector=connector) as session,
        session.post(f"https://{SERVICE}:{port}/mutate", data=body) as answer,
    ):
        return bool((await answer.json())["response"]["allowed"])


class _Pinned(aiohttp.abc.AbstractResolver):
    """Resolves the Service's name to 127.0.0.1, as cluster DNS resolves it to the pod."""

    def __init__(self, port: int) -> None:
        self.port = port

    async def resolve(self, host: str, port: int = 0, family: int = 0) -> list[dict[str, Any]]:
        return [{"hostname": host, "host": "127.0.0.1", "port": port, "family": 2,
                 "proto": 0, "flags": 0}]  # fmt: skip

    async def close(self) -> None:
        pass


def _listening(logs: list[dict[str, Any]]) -> dict[str, Any]:
    return next(line for line in logs if line["event"] == "webhook_listening")


async def test_a_self_signed_ca_true_certificate_that_is_also_the_ca_bundle_serves(
    start: Start, tmp_path: Path
) -> None:
    """`openssl req -x509 ... -addext subjectAltName=...`: ready, and a CREATE gets through."""
    cert = self_signed(tmp_path, "tls.crt")
    client, port, logs = await start(cert)
    ready = await client.get("/readyz")
    assert (200, "info", True) == (
        ready.status,
        _listening(logs)["log_level"],
        await _mutate(port, cert),
    )


async def _refused(start: Start, cert: Path) -> tuple[int, str, str, str]:
    client, _, logs = await start(cert)
    ready = await client.get("/readyz")
    line = _listening(logs)
    return (
        ready.status,
        (await ready.json()).get("webhookCertificateProblem", ""),
        line["log_level"],
        line["certificate"],
    )


async def test_a_key_that_is_not_the_certificates_is_refused_with_the_fix(
    start: Start, tmp_path: Path
) -> None:
    """Two openssl runs, the certificate of one and the key of the other."""
    cert = self_signed(tmp_path, "tls.crt", key="other.key")
    self_signed(tmp_path, "unused.crt")  # writes tls.key, another key
    status, problem, level, line = await _refused(start, cert)
    assert (503, "warning", True, True) == (
        status,
        level,
        "is not this certificate's key; give the key it was made with" in problem,
        problem == line,
    )


async def test_an_expired_certificate_is_refused_with_the_fix(start: Start, tmp_path: Path) -> None:
    """`openssl ca -enddate` in the past."""
    status, problem, level, line = await _refused(start, expired(tmp_path))
    assert (503, "warning", True, True) == (
        status,
        level,
        "expired at 2020-02-01T00:00:00+00:00; issue a new one" in problem,
        problem == line,
    )


async def test_a_client_certificate_is_refused_with_the_fix(start: Start, tmp_path: Path) -> None:
    """extendedKeyUsage=clientAuth: Go's client refuses it for a server."""
    cert = self_signed(tmp_path, "tls.crt", "-addext", "extendedKeyUsage=clientAuth")
    status, problem, level, _ = await _refused(start, cert)
    assert (503, "warning", True) == (
        status,
        level,
        problem.endswith(
            "does not include serverAuth; issue it again with -addext extendedKeyUsage=serverAuth"
            " (openssl)"
        ),
    )
