"""Which URLs go through the proxy: Go's httpproxy rules (containerd), as a table."""

from __future__ import annotations

import pytest
import yarl

from extender.config.registry_settings import ProxySettings
from extender.registry.proxy import ProxyRoutes, routes

HTTPS = "http://proxy.corp:3128"


@pytest.mark.parametrize(
    ("no_proxy", "url", "proxied"),
    [
        ("", "https://registry.example.com/v2/", True),
        ("", "http://registry.example.com/v2/", False),  # no HTTP proxy set
        ("", "https://localhost:5000/v2/", False),  # Go never proxies localhost
        ("", "https://127.0.0.1:5000/v2/", False),  # nor loopback addresses
        ("", "https://[::1]:5000/v2/", False),
        ("*", "https://registry.example.com/v2/", False),
        ("example.com", "https://example.com/v2/", False),
        ("example.com", "https://registry.example.com/v2/", False),  # subdomains too
        ("example.com", "https://notexample.com/v2/", True),
        (".example.com", "https://example.com/v2/", True),  # a leading dot: subdomains only
        (".example.com", "https://registry.example.com/v2/", False),
        ("*.example.com", "https://example.com/v2/", True),
        ("*.example.com", "https://a.b.example.com/v2/", False),
        ("Example.COM", "https://REGISTRY.example.com/v2/", False),
        ("example.com:5000", "https://example.com:5000/v2/", False),
        ("example.com:5000", "https://example.com/v2/", True),  # 443 is not 5000
        ("example.com:443", "https://example.com/v2/", False),  # the scheme's port counts
        ("10.0.0.0/8", "https://10.1.2.3/v2/", False),
        ("10.0.0.0/8", "https://registry.internal/v2/", True),  # CIDRs match literal IPs only
        ("10.1.2.3", "https://10.1.2.3:5000/v2/", False),
        ("10.1.2.3:5000", "https://10.1.2.3:5001/v2/", True),
        (" a.test , ,b.test ", "https://b.test/v2/", False),
    ],
)
def test_no_proxy_follows_gos_rules(no_proxy: str, url: str, proxied: bool) -> None:
    """Each NO_PROXY form decides direct or proxied as Go's httpproxy does."""
    table = routes(ProxySettings(https_proxy=HTTPS, no_proxy=no_proxy), {})
    assert proxied == (table.for_url(yarl.URL(url)) is not None)


def test_settings_win_over_the_environment_which_fills_the_gaps() -> None:
    """fromEnvironment: explicit values first, then upper case, then lower case names."""
    environ = {"HTTPS_PROXY": "http://env:1", "http_proxy": "env-lower:2", "NO_PROXY": "x"}
    table = routes(ProxySettings(from_environment=True, https_proxy="http://set:3"), environ)
    expected = ("http://set:3", "http://env-lower:2", True)
    bypass = table.bypasses("x", 443)
    assert expected == (str(table.https), str(table.http), bypass)


def test_the_environment_is_ignored_unless_asked_for() -> None:
    """Off by default: HTTPS_PROXY in archfit's environment changes nothing."""
    assert ProxyRoutes() == routes(ProxySettings(), {"HTTPS_PROXY": "http://env:1"})


@pytest.mark.parametrize("value", ["socks5://proxy:1080", "http://proxy:3128/path", "http://"])
def test_a_proxy_that_is_not_an_http_url_is_a_settings_error(value: str) -> None:
    """Only http(s) proxies, given as scheme://host[:port]."""
    with pytest.raises(ValueError, match="httpsProxy"):
        ProxySettings(https_proxy=value)
