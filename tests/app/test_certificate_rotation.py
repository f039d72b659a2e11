"""A rotated webhook certificate that cannot serve is refused: the old one stays in use."""

from __future__ import annotations

import datetime
import shutil
from pathlib import Path

import pytest

from extender.serving.pure import certs
from tests.support.archfit_process import Archfit, read_responses, running
from tests.support.waiting import wait_for

NOW = datetime.datetime.now(datetime.UTC)


def _expired() -> certs.KeyPair:
    return certs.new_serving(certs.new_ca(NOW), ("127.0.0.1",), NOW - datetime.timedelta(days=3), 1)


def _not_yet_valid() -> certs.KeyPair:
    return certs.new_serving(certs.new_ca(NOW), ("127.0.0.1",), NOW + datetime.timedelta(days=3), 1)


def _a_ca() -> certs.KeyPair:
    return certs.new_ca(NOW)


def _other_names() -> certs.KeyPair:
    return certs.new_serving(certs.new_ca(NOW), ("other.example.com",), NOW, 1)


def _get(archfit: Archfit, path: str) -> tuple[int, str]:
    with archfit.connect() as conn:
        conn.sendall(f"GET {path} HTTP/1.1\r\nHost: a\r\n\r\n".encode())
        status, body = read_responses(conn, 1, seconds=5)[0]
    return status, body.decode()


def _handshake_with_the_first_ca(archfit: Archfit) -> bool:
    try:
        with archfit.connect_webhook(timeout=5):
            return True
    except OSError:  # ssl.SSLError and timeouts included
        return False


@pytest.mark.parametrize("pair", [_expired, _not_yet_valid, _a_ca, _other_names])
def test_a_rotated_pair_that_cannot_serve_is_refused_and_the_old_one_kept(tmp_path: Path, pair):
    """Expired, not yet valid, a CA, or without the served names: logged, counted, the old
    certificate still served, /readyz still 200, the expiry gauge still the old one's."""
    with running(tmp_path, webhook=True, webhook_settings={"certReloadSeconds": 0.2}) as archfit:
        expiry_before = _gauge(_get(archfit, "/metrics")[1])
        served = tmp_path / "webhook-tls"
        shutil.copy(served / "server.pem", tmp_path / "old.pem")
        bad = pair()
        (served / "server-key.pem").write_bytes(bad.key)
        (served / "server.pem").write_bytes(bad.cert)
        wait_for(
            lambda: any("tls_certificate_refused" in line for line in archfit.log_lines()),
            "the refusal logged",
            10,
        )
        handshake = _handshake_with_the_first_ca(archfit)
        ready = _get(archfit, "/readyz")[0]
        metrics = _get(archfit, "/metrics")[1]
    counted = 'archfit_client_problems_total{cause="certificate_refused"} 1.0' in metrics
    assert (True, 200, True, expiry_before) == (handshake, ready, counted, _gauge(metrics))


def _gauge(metrics: str) -> float:
    line = next(
        line
        for line in metrics.splitlines()
        if line.startswith("archfit_webhook_certificate_expiry_timestamp_seconds ")
    )
    return float(line.split()[1])


def test_the_expiry_gauge_reports_the_served_certificate(tmp_path: Path):
    """With no self-managed certificate, the gauge still says when the served one expires."""
    with running(tmp_path, webhook=True) as archfit:
        gauge = _gauge(_get(archfit, "/metrics")[1])
    served = certs.not_after((tmp_path / "webhook-tls" / "server.pem").read_bytes())
    assert served.timestamp() == gauge
