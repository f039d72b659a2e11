"""Certificates and keys for a throwaway control plane on 127.0.0.1.

One CA signs the apiserver's serving cert and the client certs; the service-account
key pair signs tokens. Everything is written to one directory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from tests.support.tls import ec_key, issue, write_cert, write_key


@dataclass(frozen=True)
class ClientCert:
    """Paths of one client identity's certificate and key."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class Pki:
    """Every file the control plane and its clients need."""

    ca_cert: Path
    serving_cert: Path
    serving_key: Path
    sa_public_key: Path
    sa_private_key: Path
    admin: ClientCert
    scheduler: ClientCert


def generate(directory: Path) -> Pki:
    """Write a CA, serving and client certs and a service-account key pair into directory."""
    directory.mkdir(parents=True, exist_ok=True)

    ca_key = ec_key()
    ca_cert = issue("archfit-e2e-ca", ca_key, ca_key)
    ca_path = write_cert(ca_cert, directory / "ca.crt")

    def leaf(
        stem: str,
        common_name: str,
        usage: x509.ObjectIdentifier,
        organization: str | None = None,
        hosts: tuple[str, ...] = (),
    ) -> ClientCert:
        key = ec_key()
        cert = issue(
            common_name, key, ca_key, ca_cert, organization=organization, usage=usage, hosts=hosts
        )
        return ClientCert(
            write_cert(cert, directory / f"{stem}.crt"), write_key(key, directory / f"{stem}.key")
        )

    serving = leaf(
        "apiserver",
        "kube-apiserver",
        ExtendedKeyUsageOID.SERVER_AUTH,
        hosts=("127.0.0.1", "localhost", "kubernetes.default.svc"),
    )
    # system:masters is the apiserver's built-in superuser group.
    admin = leaf("admin", "archfit-e2e-admin", ExtendedKeyUsageOID.CLIENT_AUTH, "system:masters")
    # The bootstrap RBAC policy binds the system:kube-scheduler role to this user.
    scheduler = leaf("scheduler", "system:kube-scheduler", ExtendedKeyUsageOID.CLIENT_AUTH)

    sa_key = ec_key()
    sa_private = write_key(sa_key, directory / "sa.key")
    sa_public = directory / "sa.pub"
    sa_public.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return Pki(ca_path, serving.cert, serving.key, sa_public, sa_private, admin, scheduler)
