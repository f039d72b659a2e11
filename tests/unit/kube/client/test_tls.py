"""The API client's TLS context (extender.kube.client.tls): built once per change, never
changed after, since connections in several threads handshake with it at once."""

from __future__ import annotations

import datetime as dt

import pytest

from extender.kube.client.errors import CredentialUnavailable
from extender.kube.client.tls import TLSSettings, TrustedContext
from extender.serving.pure.certs import new_ca

NOW = dt.datetime(2026, 11, 29, tzinfo=dt.UTC)


@pytest.fixture
def files(tmp_path):
    """A client pair as two files (client-go's ReloadTLSFiles), and the settings naming them."""
    pair = new_ca(NOW)
    cert, key = tmp_path / "client.crt", tmp_path / "client.key"
    cert.write_bytes(pair.cert)
    key.write_bytes(pair.key)
    return cert, key, TLSSettings(insecure=True, cert_file=str(cert), key_file=str(key))


def test_a_pair_of_files_is_read_again_and_a_renewed_pair_makes_a_new_context(files):
    cert, key, settings = files
    trusted = TrustedContext(settings)
    first = trusted.context()
    unchanged = trusted.context()
    renewed = new_ca(NOW)
    cert.write_bytes(renewed.cert)
    key.write_bytes(renewed.key)
    second = trusted.context()
    assert (True, False, 2) == (first is unchanged, second is first, trusted.generation)


def test_a_renewed_pair_is_never_loaded_into_a_context_in_use(files):
    """OpenSSL crashes the process when a context is loaded into while another thread
    handshakes with it: a change makes a new context instead."""
    cert, key, settings = files
    trusted = TrustedContext(settings)
    in_use = trusted.context()
    loaded: list[object] = []
    in_use.load_cert_chain = lambda *a, **k: loaded.append(a)  # type: ignore[method-assign]
    renewed = new_ca(NOW)
    cert.write_bytes(renewed.cert)
    key.write_bytes(renewed.key)
    trusted.context()
    assert [] == loaded


def test_files_that_do_not_make_a_pair_fail_the_request_and_keep_the_context(files):
    _, key, settings = files
    trusted = TrustedContext(settings)
    good = trusted.context()
    key_pem = key.read_bytes()
    key.write_bytes(new_ca(NOW).key)  # another key: not this certificate's
    with pytest.raises(CredentialUnavailable, match="client certificate"):
        trusted.context()
    key.unlink()
    with pytest.raises(CredentialUnavailable, match=r"client\.key"):
        trusted.context()
    key.write_bytes(key_pem)
    assert (True, 1) == (trusted.context() is good, trusted.generation)
