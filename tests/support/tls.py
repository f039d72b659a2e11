"""Throwaway certificates for tests: every CA, serving, client and signing cert is made here.

`make_serving_cert` is archfit's own CA code (extender.serving.pure.certs) writing files for an
HTTPS test server; `issue` builds any other certificate a test part needs (the e2e control
plane's PKI, the registry token signer's chain).
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from extender.serving.pure import certs

PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey
# Clocks of the processes that check these certificates may disagree a little.
_BACKDATE = datetime.timedelta(minutes=5)
_CA_USAGE = x509.KeyUsage(
    digital_signature=True,
    content_commitment=False,
    key_encipherment=False,
    data_encipherment=False,
    key_agreement=False,
    key_cert_sign=True,
    crl_sign=True,
    encipher_only=False,
    decipher_only=False,
)


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
    ca = certs.new_ca(now)
    serving = certs.new_serving(ca, ("127.0.0.1", *dns_names), now, days=1)
    paths = ServingCert(workdir / "ca.pem", workdir / "server.pem", workdir / "server-key.pem")
    paths.ca_bundle.write_bytes(ca.cert)
    paths.cert.write_bytes(serving.cert)
    paths.key.write_bytes(serving.key)
    return paths


@dataclass(frozen=True)
class ClientCert:
    """A client certificate (clientAuth), its key, and the CA bundle that signed it."""

    ca_bundle: Path
    cert: Path
    key: Path


def make_client_cert(workdir: Path, common_name: str = "kube-scheduler") -> ClientCert:
    """Write a CA and a client certificate it signed for `common_name` under `workdir`."""
    workdir.mkdir(parents=True, exist_ok=True)
    ca_key, key = ec_key(), ec_key()
    ca = issue(f"{common_name}-client-ca", ca_key, ca_key)
    leaf = issue(common_name, key, ca_key, ca, usage=x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH)
    return ClientCert(
        write_cert(ca, workdir / "client-ca.pem"),
        write_cert(leaf, workdir / "client.pem"),
        write_key(key, workdir / "client-key.pem"),
    )


def ec_key() -> ec.EllipticCurvePrivateKey:
    """A P-256 private key."""
    return ec.generate_private_key(ec.SECP256R1())


def issue(
    common_name: str,
    key: PrivateKey,
    signer: PrivateKey,
    issuer: x509.Certificate | None = None,
    *,
    organization: str | None = None,
    usage: x509.ObjectIdentifier | None = None,
    hosts: Sequence[str] = (),
    days: int = 2,
) -> x509.Certificate:
    """A certificate for `key`, signed by `signer`: a self-signed CA when `issuer` is None.

    `usage` is the leaf's one extended key usage (server or client auth); `hosts` are its
    DNS names and IP addresses.
    """
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    subject = x509.Name(attributes)
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer.subject if issuer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if issuer is None:
        builder = builder.add_extension(_CA_USAGE, critical=True)
    if usage is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if hosts:
        names = [_general_name(host) for host in hosts]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(signer, hashes.SHA256())


def write_cert(cert: x509.Certificate, path: Path) -> Path:
    """Write `cert` as PEM."""
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def write_key(key: PrivateKey, path: Path) -> Path:
    """Write `key` as unencrypted PKCS#8 PEM, readable by its owner only."""
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)
    return path


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)
