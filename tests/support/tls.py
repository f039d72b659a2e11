"""A throwaway CA and a serving certificate for 127.0.0.1, for HTTPS test registries."""

from __future__ import annotations

import datetime
import ssl
from dataclasses import dataclass
from pathlib import Path

from extender import certs


@dataclass(frozen=True)
class ServingCert:
    """Files for an HTTPS server on 127.0.0.1 and the CA bundle that trusts it."""

    ca_bundle: Path
    cert: Path
    key: Path

    def server_context(self) -> ssl.SSLContext:
        """An SSLContext for aiohttp's TestServer(ssl=...)."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert, self.key)
        return context


def make_serving_cert(workdir: Path, dns_names: tuple[str, ...] = ()) -> ServingCert:
    """Write a CA and a certificate it signed for 127.0.0.1 (and `dns_names`) under `workdir`."""
    workdir.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca = certs.new_ca(now, "archfit test CA")
    serving = certs.new_serving(ca, ("127.0.0.1", *dns_names), now, days=1)
    paths = ServingCert(workdir / "ca.pem", workdir / "server.pem", workdir / "server-key.pem")
    paths.ca_bundle.write_bytes(ca.cert)
    paths.cert.write_bytes(serving.cert)
    paths.key.write_bytes(serving.key)
    return paths
