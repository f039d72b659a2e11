"""kube-scheduler calls archfit over HTTPS, trusting a CA the test makes (issue 11), and
with mutual TLS presents a client certificate archfit checks (server.clientCaFile)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.catalog import Images
from tests.e2e.stack import Stack
from tests.e2e.topology import REPLICAS, replicas, schedule
from tests.support.tls import ClientCert, make_client_cert, make_serving_cert

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def serving(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(CA bundle, certificate, key) for 127.0.0.1."""
    cert = make_serving_cert(tmp_path_factory.mktemp("extender-tls"))
    return cert.ca_bundle, cert.cert, cert.key


def test_the_scheduler_filters_through_archfit_over_https(
    stack: Stack,
    core: client.CoreV1Api,
    namespace: str,
    images: Images,
    serving: tuple[Path, Path, Path],
) -> None:
    """enableHTTPS with tlsConfig.caFile: an amd64-only image still lands on amd64 only."""
    ca, cert, key = serving
    stack.ensure({"server": {"certFile": str(cert), "keyFile": str(key)}}, ca_file=ca)
    assert stack.archfit is not None
    assert stack.archfit.url_prefix.startswith("https://")
    placed = schedule(core, namespace, replicas("tls", [images.amd64_only.reference]))
    assert ["amd64"] * REPLICAS == placed


def test_a_scheduler_that_does_not_trust_archfits_ca_gets_no_filtering(
    stack: Stack,
    core: client.CoreV1Api,
    namespace: str,
    images: Images,
    serving: tuple[Path, Path, Path],
    tmp_path: Path,
) -> None:
    """The control: trusting another CA, every call fails TLS, and ignorable passes all."""
    _, cert, key = serving
    other = make_serving_cert(tmp_path / "other").ca_bundle
    stack.ensure({"server": {"certFile": str(cert), "keyFile": str(key)}}, ca_file=other)
    placed = schedule(core, namespace, replicas("untrusted", [images.s390x_only.reference]))
    # s390x runs nowhere: with archfit heard, these pods would stay Pending.
    assert REPLICAS == len(placed)


def _mutual(cert: Path, key: Path, clients: ClientCert) -> dict[str, Any]:
    """archfit's settings for HTTPS that requires a client certificate `clients` signed."""
    paths = {"certFile": cert, "keyFile": key, "clientCaFile": clients.ca_bundle}
    return {"server": {name: str(path) for name, path in paths.items()}}


def test_archfit_requiring_a_client_certificate_filters_for_a_scheduler_that_has_one(
    stack: Stack,
    core: client.CoreV1Api,
    namespace: str,
    images: Images,
    serving: tuple[Path, Path, Path],
    tmp_path: Path,
) -> None:
    """server.clientCaFile plus the scheduler's tlsConfig.certFile/keyFile: calls go through."""
    ca, cert, key = serving
    scheduler = make_client_cert(tmp_path / "scheduler")
    stack.ensure(
        {
            "server": {
                "certFile": str(cert),
                "keyFile": str(key),
                "clientCaFile": str(scheduler.ca_bundle),
            }
        },
        ca_file=ca,
        client=(scheduler.cert, scheduler.key),
    )
    placed = schedule(core, namespace, replicas("mtls", [images.amd64_only.reference]))
    assert ["amd64"] * REPLICAS == placed


def test_a_scheduler_with_the_wrong_client_certificate_is_refused(
    stack: Stack,
    core: client.CoreV1Api,
    namespace: str,
    images: Images,
    serving: tuple[Path, Path, Path],
    tmp_path: Path,
) -> None:
    """A certificate from another CA fails archfit's handshake: no call is answered, and
    ignorable passes every node (the s390x-only pods bind, where archfit would hold them)."""
    ca, cert, key = serving
    trusted = make_client_cert(tmp_path / "trusted")
    stranger = make_client_cert(tmp_path / "stranger")
    stack.ensure(
        {
            "server": {
                "certFile": str(cert),
                "keyFile": str(key),
                "clientCaFile": str(trusted.ca_bundle),
            }
        },
        ca_file=ca,
        client=(stranger.cert, stranger.key),
        probe_client=(trusted.cert, trusted.key),
    )
    placed = schedule(core, namespace, replicas("wrong-cert", [images.s390x_only.reference]))
    assert REPLICAS == len(placed)
