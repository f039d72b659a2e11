"""One proxy rule set for the process (extender.http_proxy), checked against Go itself: for
each environment and URL, `http.ProxyFromEnvironment`'s answer (clientgo-observe -proxy-for)
is the shared rules' answer, and the registry client's (extender.registry.proxy), which
reads the same variables through `registry.proxy.fromEnvironment`."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest
import yarl

from extender.config.registry_settings import ProxySettings
from extender.http_proxy import ProxyConfig
from extender.registry.proxy import routes
from extender.urls import parse
from tests import clientgo
from tests.support.prerequisites import built

P = {"HTTPS_PROXY": "http://proxy.corp:3128", "HTTP_PROXY": "http://plain.corp:3128"}
CASES = [
    ({}, "https://registry.example.com/v2/"),
    (P, "https://registry.example.com/v2/"),
    (P, "http://registry.example.com/v2/"),
    (P, "https://localhost:5000/v2/"),
    (P, "https://LOCALHOST:5000/v2/"),
    (P, "https://127.0.0.1:5000/v2/"),
    (P, "https://127.9.9.9/v2/"),
    (P, "https://[::1]:5000/v2/"),
    (P, "https://[::ffff:127.0.0.1]:5000/v2/"),
    ({**P, "NO_PROXY": "*"}, "https://registry.example.com/v2/"),
    ({**P, "NO_PROXY": "example.com"}, "https://example.com/v2/"),
    ({**P, "NO_PROXY": "example.com"}, "https://registry.example.com/v2/"),
    ({**P, "NO_PROXY": "example.com"}, "https://notexample.com/v2/"),
    ({**P, "NO_PROXY": ".example.com"}, "https://example.com/v2/"),
    ({**P, "NO_PROXY": ".example.com"}, "https://registry.example.com/v2/"),
    ({**P, "NO_PROXY": "*.example.com"}, "https://example.com/v2/"),
    ({**P, "NO_PROXY": "*.example.com"}, "https://a.b.example.com/v2/"),
    ({**P, "NO_PROXY": "Example.COM"}, "https://REGISTRY.example.com/v2/"),
    ({**P, "NO_PROXY": "example.com:5000"}, "https://example.com:5000/v2/"),
    ({**P, "NO_PROXY": "example.com:5000"}, "https://example.com/v2/"),
    ({**P, "NO_PROXY": "example.com:443"}, "https://example.com/v2/"),
    ({**P, "NO_PROXY": "example.com:80"}, "http://example.com/v2/"),
    ({**P, "NO_PROXY": "10.0.0.0/8"}, "https://10.1.2.3/v2/"),
    ({**P, "NO_PROXY": "10.0.0.0/8"}, "https://registry.internal/v2/"),
    ({**P, "NO_PROXY": "10.1.2.3"}, "https://10.1.2.3:5000/v2/"),
    ({**P, "NO_PROXY": "10.1.2.3:5000"}, "https://10.1.2.3:5001/v2/"),
    ({**P, "NO_PROXY": "[fd00::1]"}, "https://[fd00::1]/v2/"),
    ({**P, "NO_PROXY": "fd00::1"}, "https://[fd00::1]/v2/"),
    ({**P, "NO_PROXY": "[fd00::1]:443"}, "https://[fd00::1]/v2/"),
    ({**P, "NO_PROXY": "fd00::/8"}, "https://[fd00::1]/v2/"),
    ({**P, "NO_PROXY": ".2.3"}, "https://10.1.2.3/v2/"),
    ({**P, "NO_PROXY": " a.test , ,b.test "}, "https://b.test/v2/"),
    ({**P, "NO_PROXY": "bücher.example"}, "https://xn--bcher-kva.example/v2/"),
    ({**P, "no_proxy": "example.com"}, "https://example.com/v2/"),
    ({**P, "NO_PROXY": "other", "no_proxy": "example.com"}, "https://example.com/v2/"),
    ({"https_proxy": "http://lower:1"}, "https://example.com/v2/"),
    ({"HTTPS_PROXY": "http://upper:1", "https_proxy": "http://lower:1"}, "https://e.com/"),
    ({"HTTPS_PROXY": "", "https_proxy": "http://lower:1"}, "https://example.com/v2/"),
    ({"ALL_PROXY": "http://all:1"}, "https://example.com/v2/"),
    ({"HTTPS_PROXY": "proxy.corp:3128"}, "https://example.com/v2/"),
    ({"HTTPS_PROXY": "https://secure.corp"}, "https://example.com/v2/"),
    ({"HTTPS_PROXY": "http://user:pa%20ss@proxy.corp:3128"}, "https://example.com/v2/"),
    ({"HTTPS_PROXY": "socks5://proxy.corp:1080"}, "https://example.com/v2/"),
]


def _go(binary: Path, environ: dict[str, str], url: str) -> dict[str, str]:
    done = subprocess.run(
        [str(binary), "-proxy-for", url],
        env=environ,
        capture_output=True,
        check=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    answer: dict[str, str] = orjson.loads(done.stdout)
    return answer


@pytest.fixture(scope="module")
def observe_binary() -> Path:
    return built("client-go differential", clientgo.build)


@pytest.mark.parametrize(("environ", "url"), CASES)
def test_the_proxy_rules_answer_as_go_does(observe_binary, environ, url):
    """The shared rules and the registry client pick the proxy Go's net/http picks (for the
    URL the registry client sends: yarl lowercases its host)."""
    expected = _go(observe_binary, environ, url).get("proxy", "")
    sent = yarl.URL(url)
    for_registry = _go(observe_binary, environ, str(sent)).get("proxy", "")
    shared = ProxyConfig.from_environment(environ).rules().proxy_for(parse(url))
    registry = routes(ProxySettings(from_environment=True), environ).for_url(sent)
    assert (expected, for_registry) == (
        str(shared) if shared is not None else "",
        str(registry) if registry is not None else "",
    )
