"""Settings for reaching registries and caching their answers (frozen, validated at start).

YAML keys are the camelCase of these field names; the generic loader builds them.
"""

from __future__ import annotations

import ipaddress
import urllib.parse
from dataclasses import dataclass, field
from typing import Literal

Capability = Literal["pull", "resolve"]


def _positive(value: float, name: str) -> None:
    if value <= 0:
        raise ValueError(f"{name} must be greater than 0, got {value}")


@dataclass(frozen=True)
class MirrorSettings:
    """One mirror of a registry, tried before the registry itself (containerd hosts.toml)."""

    url: str = ""
    """Base URL, e.g. `https://mirror.example.com` or `http://10.0.0.5:5000/v2/hub`."""
    capabilities: tuple[Capability, ...] = ("pull", "resolve")
    """`resolve` lets the mirror answer tags; `pull` lets it serve manifests by digest."""
    insecure_skip_verify: bool = False
    """Accept any TLS certificate from this mirror."""
    ca_bundle: str = ""
    """PEM file of extra CAs to trust for this mirror."""

    def __post_init__(self) -> None:
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"url must be an http(s) URL, got {self.url!r}")
        if parts.username or parts.password or parts.query or parts.fragment:
            raise ValueError("url must not carry credentials, a query or a fragment")
        if not self.capabilities:
            raise ValueError("capabilities must name pull, resolve or both")


@dataclass(frozen=True)
class HostSettings:
    """How to reach one registry, keyed by its name as written in images (`ghcr.io`)."""

    plain_http: bool = False
    """Talk HTTP instead of HTTPS to the registry itself."""
    insecure_skip_verify: bool = False
    """Accept any TLS certificate from the registry itself."""
    ca_bundle: str = ""
    """PEM file of extra CAs to trust for the registry itself."""
    mirrors: tuple[MirrorSettings, ...] = ()
    """Mirrors tried in order before the registry; the registry itself is tried last."""


@dataclass(frozen=True)
class CredentialProviderSettings:
    """kubelet image credential provider plugins (ECR, Artifact Registry, ACR), run like kubelet."""

    config_path: str = ""
    """kubelet CredentialProviderConfig file (`--image-credential-provider-config`); empty: off."""
    bin_dir: str = "/var/lib/archfit/credential-providers"
    """Directory of the plugin binaries (kubelet's `--image-credential-provider-bin-dir`)."""
    timeout_seconds: float = 15.0
    """Limit on one plugin run; after it the plugin's whole process group is killed."""
    max_output_bytes: int = 1_048_576
    """Largest answer read from a plugin's stdout; a longer one counts as a failed run."""

    def __post_init__(self) -> None:
        _positive(self.timeout_seconds, "timeoutSeconds")
        _positive(self.max_output_bytes, "maxOutputBytes")
        if self.config_path and not self.bin_dir:
            raise ValueError("binDir must be set when configPath is")


@dataclass(frozen=True)
class ProxySettings:
    """An egress proxy for registry requests, chosen per URL as containerd (Go httpproxy) does."""

    from_environment: bool = False
    """Also read HTTPS_PROXY, HTTP_PROXY and NO_PROXY (or lowercase) for values not set here."""
    https_proxy: str = field(default="", repr=False)  # may carry a proxy password
    """Proxy URL for https registries (`http://proxy.corp:3128`); empty: direct."""
    http_proxy: str = field(default="", repr=False)  # may carry a proxy password
    """Proxy URL for plain-http registries; empty: direct."""
    no_proxy: str = ""
    """Comma-separated hosts, `.domains`, `host:port`, IPs and CIDRs reached directly; `*`: all."""

    def __post_init__(self) -> None:
        for name in ("https_proxy", "http_proxy"):
            value = getattr(self, name)
            if value and not _valid_proxy(value):
                raise ValueError(f"{_camel(name)} must be an http(s)://host[:port] URL")


@dataclass(frozen=True)
class RegistrySettings:
    """Timeouts, limits and per-host options for every registry request."""

    connect_timeout_seconds: float = 3.0
    """Limit on DNS plus TCP (and TLS) connect for one request."""
    request_timeout_seconds: float = 10.0
    """Limit on one HTTP request from start to the last byte of its body."""
    lookup_grace_seconds: float = 5.0
    """How long a scheduler or webhook call's lookups may run past its deadline, only to have
    the answer cached for the next attempt; their registry requests stop then."""
    max_connections: int = 64
    """Open connections across all registries; while several hosts are busy each gets at most
    an equal share, and one share stays free for a host that is not busy yet."""
    max_connections_per_host: int = 8
    """Open connections to one registry host, at most (fewer while many hosts are busy)."""
    max_manifest_bytes: int = 4_393_216
    """Largest manifest or index accepted (containerd's limit)."""
    max_config_bytes: int = 8_388_608
    """Largest image config blob accepted."""
    max_token_bytes: int = 1_048_576
    """Largest token endpoint answer accepted."""
    max_error_bytes: int = 65_536
    """Bytes of an error body read (only the start is ever shown)."""
    max_redirects: int = 5
    """Redirect hops followed for one request, each checked by the address guard."""
    hosts: dict[str, HostSettings] = field(default_factory=dict)
    """Per-registry options, keyed by the registry as written in images, e.g.
    {registry.local:5000: {plainHttp: true}, ghcr.io: {caBundle: /ca.pem,
    insecureSkipVerify: false, mirrors: [{url: https://mirror.local, capabilities: [pull,
    resolve]}]}}."""
    allowed_networks: tuple[str, ...] = ()
    """CIDRs, addresses or host names that may be private (in-cluster registries); an address
    or name may carry a port (`registry.local:5000`, `[fd00::5]:5000`) to allow only that port."""
    docker_config_path: str = ""
    """A mounted docker `config.json` whose credentials apply to every pod, tried last."""
    pull_secret_ttl_seconds: float = 30.0
    """How long Secrets and ServiceAccounts read from the API server are reused."""
    credential_providers: CredentialProviderSettings = field(
        default_factory=CredentialProviderSettings
    )
    """kubelet credential provider plugins, tried with the mounted docker config."""
    proxy: ProxySettings = field(default_factory=ProxySettings)
    """Egress proxy; its host must be listed in allowedNetworks."""

    def __post_init__(self) -> None:
        _positive(self.connect_timeout_seconds, "connectTimeoutSeconds")
        _positive(self.request_timeout_seconds, "requestTimeoutSeconds")
        if self.lookup_grace_seconds < 0:
            raise ValueError(
                f"lookupGraceSeconds must be 0 or more, got {self.lookup_grace_seconds}"
            )
        if self.connect_timeout_seconds > self.request_timeout_seconds:
            raise ValueError("connectTimeoutSeconds must not exceed requestTimeoutSeconds")
        for name in (
            "max_connections",
            "max_connections_per_host",
            "max_manifest_bytes",
            "max_config_bytes",
            "max_token_bytes",
            "max_error_bytes",
        ):
            _positive(getattr(self, name), _camel(name))
        if self.max_redirects < 0:
            raise ValueError(f"maxRedirects must be 0 or more, got {self.max_redirects}")
        _positive(self.pull_secret_ttl_seconds, "pullSecretTtlSeconds")
        for entry in self.allowed_networks:
            if not _valid_allowed(entry):
                raise ValueError(
                    f"allowedNetworks entry {entry!r} is not a CIDR, IP or host name"
                    " (with an optional :port)"
                )
        for host in self.hosts:
            if not host or "/" in host or host != host.strip():
                raise ValueError(f"hosts key {host!r} must be a registry host[:port]")
        # Images name Docker Hub as docker.io; an operator may write either alias.
        aliases = [h for h in self.hosts if h.lower() in _DOCKER_HUB_ALIASES]
        if len(aliases) > 1:
            raise ValueError(f"hosts: Docker Hub is named twice ({', '.join(aliases)})")
        if aliases and aliases[0] != "docker.io":
            hosts = {k: v for k, v in self.hosts.items() if k != aliases[0]}
            hosts["docker.io"] = self.hosts[aliases[0]]
            object.__setattr__(self, "hosts", hosts)

    def host(self, name: str) -> HostSettings:
        """The settings for registry `name`, or the defaults."""
        return self.hosts.get(name) or HostSettings()


@dataclass(frozen=True)
class CacheSettings:
    """Where resolver answers are kept and for how long."""

    url: str = field(default="memory://", repr=False)  # may carry a Redis password
    """`memory://` (or empty) for this process only; `redis://host:6379/0` to share."""
    max_entries: int = 10_000
    """Most images kept in this process's memory, which is asked before Redis: each with its
    tag's digest, its tag's last good digest, its platforms and a recent failure, about
    0.85 KB an image. The least recently used go first."""
    tag_ttl_seconds: int = 300
    """How long a tag's digest is trusted before asking the registry again."""
    stale_if_error_seconds: int = 86_400
    """How long after `tagTtlSeconds` a tag's last good digest still answers when the registry
    fails (timeout, no connection, 5xx, 429; never after 401, 403 or 404); 0: never."""
    digest_ttl_seconds: int = 604_800
    """How long a digest's platforms are kept (digest bodies never change)."""
    failure_ttl_seconds: int = 10
    """How long a failed lookup is remembered, so a broken registry is not hammered."""
    redis_timeout_seconds: float = 0.25
    """Limit on one Redis operation (connect included); a slower one counts as a miss."""
    redis_max_connections: int = 16
    """Most connections open to Redis; a lookup that finds none free skips Redis, never waits."""
    redis_breaker_failures: int = 3
    """Redis failures in a row after which Redis is skipped, at no cost per lookup."""
    redis_breaker_open_seconds: float = 10.0
    """How long Redis is skipped after that; then one lookup probes it again."""
    namespace: str = "archfit"
    """Prefix of every key, so replicas of one deployment share and others do not."""

    def __post_init__(self) -> None:
        parts = urllib.parse.urlsplit(self.url)
        scheme = parts.scheme if self.url else "memory"
        if scheme not in ("memory", "redis", "rediss"):
            raise ValueError(f"url must be memory:// or redis://..., got scheme {scheme!r}")
        if scheme != "memory" and not parts.path.strip("/").isdigit() and parts.path.strip("/"):
            raise ValueError("url: the path of a redis URL must be a database number")
        for name in (
            "max_entries",
            "tag_ttl_seconds",
            "digest_ttl_seconds",
            "failure_ttl_seconds",
            "redis_timeout_seconds",
            "redis_max_connections",
            "redis_breaker_failures",
            "redis_breaker_open_seconds",
        ):
            _positive(getattr(self, name), _camel(name))
        if self.stale_if_error_seconds < 0:
            raise ValueError(
                f"staleIfErrorSeconds must be 0 or more, got {self.stale_if_error_seconds}"
            )

    @property
    def is_redis(self) -> bool:
        """Whether answers are shared through Redis."""
        return self.url.startswith(("redis://", "rediss://"))


_DOCKER_HUB_ALIASES = ("docker.io", "index.docker.io", "registry-1.docker.io")


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _valid_proxy(url: str) -> bool:
    # Like Go's httpproxy, `proxy.corp:3128` without a scheme means http://.
    parts = urllib.parse.urlsplit(url if "://" in url else f"http://{url}")
    return (
        parts.scheme in ("http", "https")
        and bool(parts.hostname)
        and parts.path in ("", "/")
        and not parts.query
        and not parts.fragment
    )


def split_port(entry: str) -> tuple[str, int | None]:
    """`host:port`, `1.2.3.4:port` or `[::1]:port` into its host and port; else (entry, None).

    A bare IPv6 address or CIDR has colons but no port.
    """
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        port = rest.removeprefix(":")
        return (host, int(port)) if rest.startswith(":") and port.isdigit() else (entry, None)
    head, colon, tail = entry.rpartition(":")
    if colon and ":" not in head and tail.isdigit():
        return head, int(tail)
    return entry, None


def _valid_allowed(entry: str) -> bool:
    host, port = split_port(entry)
    if port is not None and not 0 < port < 65536:
        return False
    try:
        network = ipaddress.ip_network(host, strict=False)
    except ValueError:
        pass
    else:
        # A port narrows one address, not a range: `10.0.0.0/8:5000` is refused.
        return port is None or network.num_addresses == 1
    name = host.removeprefix("*.")
    return bool(name) and all(
        label and len(label) <= 63 and label.replace("-", "").isalnum() and label.isascii()
        for label in name.split(".")
    )
