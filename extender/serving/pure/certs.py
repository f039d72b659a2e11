"""A small CA and its serving certificates, for a webhook that needs no cert-manager.

No I/O: PEM bytes in, PEM bytes out. `extender/kube/webhook_certs.py` stores them
in a Secret and keeps the webhook configuration's caBundle in step.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_YEARS = 10
# Clocks of the API server and archfit may disagree a little.
_BACKDATE = dt.timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class KeyPair:
    """A PEM certificate and its PEM private key."""

    cert: bytes
    key: bytes


@dataclass(frozen=True, slots=True)
class Bundle:
    """What the Secret holds: the CA, and the serving pair it signed."""

    ca: KeyPair
    serving: KeyPair


def new_ca(now: dt.datetime) -> KeyPair:
    """A self-signed CA that can sign serving certificates, valid for CA_YEARS."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "archfit-webhook-ca")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + dt.timedelta(days=365 * CA_YEARS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(_pem_cert(cert), _pem_key(key))


def new_serving(ca: KeyPair, hosts: Sequence[str], now: dt.datetime, days: int) -> KeyPair:
    """A serving certificate for `hosts` (DNS names or IP addresses), signed by `ca`."""
    ca_cert = x509.load_pem_x509_certificate(ca.cert)
    ca_key = serialization.load_pem_private_key(ca.key, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key is not an EC key")
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return KeyPair(_pem_cert(cert), _pem_key(key))


def needs_renewal(bundle: Bundle, hosts: Sequence[str], now: dt.datetime) -> str | None:
    """Why the serving pair must be made again (or None): expiring, other hosts, other CA."""
    try:
        ca = x509.load_pem_x509_certificate(bundle.ca.cert)
        cert = x509.load_pem_x509_certificate(bundle.serving.cert)
        serialization.load_pem_private_key(bundle.serving.key, password=None)
    except ValueError as error:
        return f"unreadable: {error}"
    if cert.issuer != ca.subject:
        return "not signed by the stored CA"
    if now > ca.not_valid_after_utc - dt.timedelta(days=30):
        return "the CA expires within 30 days"
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    if now > cert.not_valid_after_utc - lifetime / 3:
        return "less than a third of its lifetime left"
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return "no subject alternative names"
    have = {str(v) for v in names.get_values_for_type(x509.DNSName)} | {
        str(v) for v in names.get_values_for_type(x509.IPAddress)
    }
    if have != {str(_san(h).value) for h in hosts}:
        return "its names differ from the configured hosts"
    return None


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a certificate cannot serve, and what the operator does about it."""

    reason: str
    fix: str

    def __str__(self) -> str:
        return f"{self.reason}; {self.fix}"


_REISSUE = "issue it again with -addext subjectAltName=DNS:<the Service's name> (openssl)"


def serving_problem(cert_pem: bytes, names: Sequence[str], now: dt.datetime) -> Refusal | None:
    """Why a PEM chain's first certificate cannot serve TLS now (or None), by the rules of
    kube-apiserver's client (Go crypto/tls): not yet valid, expired, an extended key usage
    without serverAuth, no subject alternative names, or not covering one of `names`.

    A self-signed certificate with CA:TRUE (what `openssl req -x509` makes) is accepted:
    Go trusts it as its own root when it is also the caBundle."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
    except ValueError as error:
        return Refusal(f"unreadable: {error}", "give a PEM certificate as the file's first block")
    if now < cert.not_valid_before_utc:
        return Refusal(
            f"not valid before {cert.not_valid_before_utc.isoformat()}",
            "check this node's clock and that of the machine that made it",
        )
    if now >= cert.not_valid_after_utc:
        return Refusal(
            f"expired at {cert.not_valid_after_utc.isoformat()}",
            "issue a new one (openssl req -x509 ... -days N; cert-manager renews on its own)",
        )
    try:
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        pass  # no extended key usage: any use, for Go as for OpenSSL
    else:
        if not {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE} & set(
            usages
        ):
            return Refusal(
                "its extended key usage does not include serverAuth",
                "issue it again with -addext extendedKeyUsage=serverAuth (openssl)",
            )
    have = san_names(cert_pem)
    if not have:
        return Refusal("no subject alternative names (clients ignore the common name)", _REISSUE)
    missing = [name for name in names if not covers(have, name)]
    if missing:
        return Refusal(f"does not name {', '.join(missing)}", _REISSUE)
    return None


def covers(have: frozenset[str], name: str) -> bool:
    """Whether a certificate for the names `have` serves `name`, as Go matches them: an IP
    address exactly, a DNS name case-insensitively, `*` only as a whole leftmost label."""
    general = _san(name)
    if isinstance(general, x509.IPAddress):
        return str(general.value) in have
    wanted = str(general.value).lower().rstrip(".")
    if wanted in {h.lower().rstrip(".") for h in have}:
        return True
    first, _, rest = wanted.partition(".")
    return bool(first and rest) and any(
        h.lower().rstrip(".") == f"*.{rest}" for h in have if h.startswith("*.")
    )


def san_names(cert_pem: bytes) -> frozenset[str]:
    """The DNS names and IP addresses a PEM chain's first certificate is for."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return frozenset()
    return frozenset(
        [str(v) for v in names.get_values_for_type(x509.DNSName)]
        + [str(v) for v in names.get_values_for_type(x509.IPAddress)]
    )


def ca_usable(ca: KeyPair, now: dt.datetime) -> bool:
    """Whether a stored CA can sign a new serving pair (readable, >30 days left)."""
    try:
        cert = x509.load_pem_x509_certificate(ca.cert)
        serialization.load_pem_private_key(ca.key, password=None)
    except ValueError:
        return False
    return now < cert.not_valid_after_utc - dt.timedelta(days=30)


def not_after(cert_pem: bytes) -> dt.datetime:
    """When a PEM certificate expires."""
    return x509.load_pem_x509_certificate(cert_pem).not_valid_after_utc


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _pem_cert(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
