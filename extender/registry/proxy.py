"""Which egress proxy, if any, a registry URL goes through: the process's one rule set
(extender.http_proxy, Go's httpproxy rules, as containerd and client-go follow them), fed from
`registry.proxy`, with the environment filling what it leaves unset when asked to."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import yarl

from extender.config.registry_settings import ProxySettings
from extender.http_proxy import ProxyConfig, ProxyRules
from extender.urls import URLError, parse


@dataclass(frozen=True, slots=True)
class ProxyRoutes:
    """The proxies in force and the hosts that bypass them."""

    rules: ProxyRules = field(default_factory=ProxyRules)

    @property
    def https(self) -> yarl.URL | None:
        return yarl.URL(str(self.rules.https)) if self.rules.https is not None else None

    @property
    def http(self) -> yarl.URL | None:
        return yarl.URL(str(self.rules.http)) if self.rules.http is not None else None

    def __bool__(self) -> bool:
        return self.rules.https is not None or self.rules.http is not None

    def bypasses(self, host: str, port: int) -> bool:
        """Whether a request to host:port goes direct."""
        return self.rules.no_proxy.bypasses(host, str(port))

    def for_url(self, url: yarl.URL) -> yarl.URL | None:
        """The proxy for `url`, or None to connect directly."""
        try:
            found = self.rules.proxy_for(parse(str(url)))
        except (URLError, ValueError):
            return None
        return yarl.URL(str(found)) if found is not None else None


def routes(settings: ProxySettings, environ: Mapping[str, str]) -> ProxyRoutes:
    """The proxies of the settings; with `fromEnvironment`, the environment fills the gaps
    (upper-case names first, as Go reads them)."""
    from_env = ProxyConfig.from_environment(environ) if settings.from_environment else ProxyConfig()
    config = ProxyConfig(
        https_proxy=settings.https_proxy or from_env.https_proxy,
        http_proxy=settings.http_proxy or from_env.http_proxy,
        no_proxy=settings.no_proxy or from_env.no_proxy,
    )
    return ProxyRoutes(config.rules())
