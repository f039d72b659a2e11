"""Which endpoints serve a registry: its mirrors in order, then the registry itself.

Follows containerd's hosts.toml: only `resolve`-capable hosts answer tags, `pull`-capable
ones serve content by digest; TLS and plain HTTP are per host.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

import yarl

from extender.config.registry_settings import HostSettings, MirrorSettings, RegistrySettings
from extender.registry.pure.reference import Reference

TLSOption = ssl.SSLContext | bool
"""What aiohttp's `ssl=` takes: True verifies with system CAs, False skips verification."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One place to send registry API requests for a repository."""

    base: yarl.URL
    """The API root, ending in /v2."""
    tls: TLSOption
    is_mirror: bool
    namespace: str
    """The registry the image names; mirrors get it as `?ns=` like containerd sends."""

    @property
    def host(self) -> str:
        """host[:port], for metrics and for remembering auth challenges."""
        return self.base.raw_authority

    def url(self, repository: str, kind: str, obj: str) -> yarl.URL:
        """`<base>/<repository>/<kind>/<obj>`, kind being `manifests` or `blobs`."""
        url = yarl.URL(f"{self.base}/{repository}/{kind}/{obj}", encoded=True)
        return url.with_query(ns=self.namespace) if self.is_mirror else url


MAX_BUILT_REGISTRIES = 1024
"""Registries whose endpoints are kept built. Image names are user input, so a flood of
names empties the table rather than grows it; a name is rebuilt in microseconds."""


class HostTable:
    """Endpoints per registry, built once from settings (TLS contexts included)."""

    def __init__(self, settings: RegistrySettings) -> None:
        self._settings = settings
        self._contexts: dict[str, ssl.SSLContext] = {}
        self._built: dict[tuple[str, bool], tuple[Endpoint, ...]] = {}
        """(registry, resolve) -> its endpoints: each lookup asks for them up to three times
        (`RegistryClient.content_from_tag_hosts`, then its request), and they depend on the
        registry's name and the settings only."""
        for name, host in settings.hosts.items():
            self._tls(host.ca_bundle, host.insecure_skip_verify, f"hosts.{name}.caBundle")
            for index, mirror in enumerate(host.mirrors):
                where = f"hosts.{name}.mirrors[{index}].caBundle"
                self._tls(mirror.ca_bundle, mirror.insecure_skip_verify, where)

    def endpoints(self, ref: Reference, *, resolve: bool) -> tuple[Endpoint, ...]:
        """Endpoints to try in order; `resolve` selects hosts that may answer tags."""
        key = (ref.domain, resolve)
        found = self._built.get(key)
        if found is None:
            if len(self._built) >= MAX_BUILT_REGISTRIES:
                self._built.clear()
            found = self._built[key] = tuple(self._build(ref, resolve=resolve))
        return found

    def _build(self, ref: Reference, *, resolve: bool) -> list[Endpoint]:
        host = self._settings.host(ref.domain)
        wanted = "resolve" if resolve else "pull"
        found = [
            self._mirror(mirror, ref.domain)
            for mirror in host.mirrors
            if wanted in mirror.capabilities
        ]
        found.append(self._origin(ref, host))
        return found

    def _origin(self, ref: Reference, host: HostSettings) -> Endpoint:
        scheme = "http" if host.plain_http else "https"
        base = yarl.URL(f"{scheme}://{ref.api_host}/v2", encoded=True)
        tls = self._tls(host.ca_bundle, host.insecure_skip_verify, "caBundle")
        return Endpoint(base, tls, is_mirror=False, namespace=ref.domain)

    def _mirror(self, mirror: MirrorSettings, namespace: str) -> Endpoint:
        url = yarl.URL(mirror.url.rstrip("/"))
        path = url.path.rstrip("/")
        # containerd appends /v2 to a mirror URL unless it already ends there.
        if not path.endswith("/v2"):
            path += "/v2"
        base = url.with_path(path)
        tls = self._tls(mirror.ca_bundle, mirror.insecure_skip_verify, "caBundle")
        return Endpoint(base, tls, is_mirror=True, namespace=namespace)

    def _tls(self, ca_bundle: str, insecure: bool, where: str) -> TLSOption:
        if insecure:
            return False
        if not ca_bundle:
            return True
        context = self._contexts.get(ca_bundle)
        if context is None:
            context = ssl.create_default_context()
            try:
                context.load_verify_locations(cafile=ca_bundle)
            except (OSError, ssl.SSLError) as error:
                raise ValueError(f"{where}: cannot load {ca_bundle!r}: {error}") from error
            self._contexts[ca_bundle] = context
        return context
