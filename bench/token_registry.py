"""A registry as a cold lookup meets it in production: HTTPS, Bearer tokens, a new tag per pod.

For bench/webhook_latency's cold rounds: a real registry (CNCF distribution) over TLS behind
the token server of tests/support, anonymous pulls allowed as Docker Hub allows them for
public images, and the time of one registry round trip on it, for the cold rows to be judged
against.
"""

from __future__ import annotations

import contextlib
import http.client
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.images import OCI_INDEX, Image, Pusher
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

    @contextlib.contextmanager
    def round_trips(self, tag: str) -> Iterator[RoundTrips]:
        """A kept TLS connection that times one authenticated GET of `tag`'s manifest."""
        connection = http.client.HTTPSConnection(
            self.registry.host.split(":")[0],
            int(self.registry.host.split(":")[1]),
            context=self.registry.client_context(),
            timeout=10,
        )
        token = self.issuer.mint("anonymous", [(REPOSITORY, ["pull"])])
        trips = RoundTrips(connection, f"/v2/{REPOSITORY}/manifests/{tag}", token)
        try:
            for _ in range(5):  # the handshake and the registry's first look at the tag
                trips.time_one()
            trips.samples.clear()
            yield trips
        finally:
            connection.close()


@dataclass
class RoundTrips:
    """GETs of one manifest over one kept connection, as archfit's client sends them."""

    connection: http.client.HTTPSConnection
    path: str
    token: str
    samples: list[float] = field(default_factory=list)

    def time_one(self) -> None:
        """One GET, its milliseconds kept."""
        headers = {"Authorization": f"Bearer {self.token}", "Accept": OCI_INDEX}
        started = time.perf_counter()
        self.connection.request("GET", self.path, headers=headers)
        response = self.connection.getresponse()
        response.read()
        self.samples.append((time.perf_counter() - started) * 1000)
        if response.status != 200:
            raise RuntimeError(f"GET {self.path} -> {response.status}")

    def median_ms(self) -> float:
        return statistics.median(self.samples)


@contextlib.contextmanager
def token_registry(workdir: Path) -> Iterator[TokenRegistry]:
    """Start the token server and the registry behind it; stop both on the way out."""
    issuer = TokenIssuer(workdir / "issuer")
    policy = TokenPolicy(public_prefixes=(f"{REPOSITORY.split('/')[0]}/",))
    cert = make_serving_cert(workdir / "tls")
    with TokenServer(issuer, policy) as server:
        registry = RegistryProcess.start(
            workdir / "registry", token=server.registry_config(), tls=cert
        )
        try:
            yield TokenRegistry(registry, cert.ca_bundle, issuer)
        finally:
            registry.stop()
