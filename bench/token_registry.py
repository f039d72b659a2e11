"""A registry as a cold lookup meets it in production: HTTPS, Bearer tokens, a new tag per pod.

For bench/webhook_latency's cold rounds: a real registry (CNCF distribution) over TLS behind
the token server of tests/support, anonymous pulls allowed as Docker Hub allows them for
public images, and the time of one registry round trip on it, for the cold rows to be judged
against.
"""

from __future__ import annotations

import contextlib
import http.client
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.images import OCI_INDEX, Image, Pusher, index_entry, put_indexes
from tests.support.registry import RegistryProcess
from tests.support.tls import make_serving_cert
from tests.support.tokens import TokenIssuer, TokenPolicy, TokenServer

REPOSITORY = "bench/fresh"
"""One repository, a new tag per pod: after the first pod, its pull token is cached, as for a
Deployment's new release."""
_PLATFORMS = ("linux/amd64", "linux/arm64")


@dataclass(frozen=True)
class TokenRegistry:
    """The running registry, the CA bundle that trusts it, and its token issuer."""

    registry: RegistryProcess
    ca_bundle: Path
    issuer: TokenIssuer

    @property
    def host(self) -> str:
        """host:port, as image references and archfit's `registry.hosts` name it."""
        return self.registry.host

    def push_fresh(self, tags: list[str]) -> list[Image]:
        """Push a two-platform index under each tag, each one's content its own."""
        pusher = Pusher(
            self.registry.url,
            token=lambda repo: self.issuer.mint("pusher", [(repo, ["pull", "push"])]),
            context=self.registry.client_context(),
        )
        return [pusher.index(REPOSITORY, tag, _PLATFORMS, salt=tag)[0] for tag in tags]

    def push_many(self, prefix: str, count: int, workers: int = 8) -> list[str]:
        """Push `count` two-platform indexes, tags `<prefix>-<n>`, each its own digest; return
        their references.

        Faster than `push_fresh` by far (for the thousands of tags of bench/webhook_cost's
        cold rows): the platform manifests are pushed once, then each tag is one PUT of an
        index over them with its own annotation, on kept TLS connections from a thread pool.
        What a cold lookup reads is the same: one index, never read before.
        """
        pusher = Pusher(
            self.registry.url,
            token=lambda repo: self.issuer.mint("pusher", [(repo, ["pull", "push"])]),
            context=self.registry.client_context(),
        )
        children = [pusher.single(REPOSITORY, None, p, salt=prefix) for p in _PLATFORMS]
        entries = [index_entry(c, p) for c, p in zip(children, _PLATFORMS, strict=True)]
        token = self.issuer.mint("pusher", [(REPOSITORY, ["pull", "push"])], lifetime=3600)
        host, _, port = self.registry.host.partition(":")
        tags = [f"{prefix}-{index}" for index in range(count)]
        put_indexes(
            lambda: http.client.HTTPSConnection(
                host, int(port), context=self.registry.client_context(), timeout=30
            ),
            REPOSITORY,
            entries,
            tags,
            headers={"Authorization": f"Bearer {token}"},
            workers=workers,
        )
        return [f"{self.host}/{REPOSITORY}:{tag}" for tag in tags]

    @contextlib.contextmanager
    def round_trips(self, warm_tag: str) -> Iterator[RoundTrips]:
        """A kept TLS connection that times authenticated GETs of manifests; `warm_tag` is
        read a few times first (the handshake, and the registry's first look at it)."""
        host, _, port = self.registry.host.partition(":")
        connection = http.client.HTTPSConnection(
            host, int(port), context=self.registry.client_context(), timeout=10
        )
        trips = RoundTrips(connection, self.issuer.mint("anonymous", [(REPOSITORY, ["pull"])]))
        try:
            for _ in range(5):
                trips.get_ms(warm_tag)
            yield trips
        finally:
            connection.close()


@dataclass
class RoundTrips:
    """GETs of manifests over one kept connection, as archfit's client sends them: of a tag
    read before (`again`), and of a tag never read (`new`), as a cold lookup's is."""

    connection: http.client.HTTPSConnection
    token: str
    again: list[float] = field(default_factory=list)
    new: list[float] = field(default_factory=list)

    def get_ms(self, tag: str) -> float:
        """Milliseconds for one GET of `tag`'s manifest."""
        path = f"/v2/{REPOSITORY}/manifests/{tag}"
        headers = {"Authorization": f"Bearer {self.token}", "Accept": OCI_INDEX}
        started = time.perf_counter()
        self.connection.request("GET", path, headers=headers)
        response = self.connection.getresponse()
        response.read()
        spent = (time.perf_counter() - started) * 1000
        if response.status != 200:
            raise RuntimeError(f"GET {path} -> {response.status}")
        return spent

    def time_both(self, warm_tag: str, new_tag: str) -> None:
        """One GET of each, their times kept, the first of them taking turns: the first
        meets what the pod CREATE before it left running."""
        if len(self.new) % 2:
            self.new.append(self.get_ms(new_tag))
            self.again.append(self.get_ms(warm_tag))
        else:
            self.again.append(self.get_ms(warm_tag))
            self.new.append(self.get_ms(new_tag))


@contextlib.contextmanager
def token_registry(workdir: Path) -> Iterator[TokenRegistry]:
    """Start the token server and the registry behind it; stop both on the way out."""
    issuer = TokenIssuer(workdir / "issuer")
    policy = TokenPolicy(public_prefixes=(f"{REPOSITORY.split('/')[0]}/",))
    cert = make_serving_cert(workdir / "tls")
    # Its token server on HTTPS too, with the same certificate, as public registries' are.
    with TokenServer(issuer, policy, tls=(cert.cert, cert.key)) as server:
        registry = RegistryProcess.start(
            workdir / "registry", token=server.registry_config(), tls=cert
        )
        try:
            yield TokenRegistry(registry, cert.ca_bundle, issuer)
        finally:
            registry.stop()
