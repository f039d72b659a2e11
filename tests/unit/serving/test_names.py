"""Which names a serving certificate covers, matched as kube-apiserver's Go client does."""

import pytest

from extender.serving.pure.certs import covers

SERVICE = "archfit-webhook.archfit-system.svc"


@pytest.mark.parametrize(
    ("have", "name", "expected"),
    [
        ({SERVICE}, SERVICE, True),
        ({SERVICE.upper()}, SERVICE, True),  # DNS names are case-insensitive
        ({"*.archfit-system.svc"}, SERVICE, True),  # a wildcard covers one whole label
        ({"*.svc"}, SERVICE, False),  # and only one
        ({"archfit-*.archfit-system.svc"}, SERVICE, False),  # never part of a label
        ({"127.0.0.1"}, "127.0.0.1", True),
        ({"*.0.0.1"}, "127.0.0.1", False),  # an IP address matches only itself
        ({"archfit.archfit-system.svc"}, SERVICE, False),
    ],
)
def test_a_certificate_covers_a_name_as_go_crypto_tls_matches_it(have, name, expected):
    """Exact, case-insensitive, a leftmost whole-label wildcard; IP addresses exactly."""
    assert expected == covers(frozenset(have), name)
