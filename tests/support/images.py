"""Synthetic images pushed over the registry's HTTP upload API.

`Pusher` uploads blobs and manifests (stdlib HTTP, so session fixtures need no event
loop); `publish_catalog` pushes the set of images the integration tests reason about.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from tests.support.pull_secrets import auth_field

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
DOCKER_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"
HELM_CONFIG = "application/vnd.cncf.helm.config.v1+json"
ATTESTATION_ANNOTATION = "vnd.docker.reference.type"


@dataclass(frozen=True)
class Descriptor:
    """An OCI descriptor of something already pushed."""

    media_type: str
    digest: str
    size: int

    def as_json(self, **extra: Any) -> dict[str, Any]:
        """The descriptor as it appears inside a manifest."""
        return {"mediaType": self.media_type, "digest": self.digest, "size": self.size, **extra}


@dataclass(frozen=True)
class Image:
    """A pushed image and what a resolver must say about it."""

    reference: str
    """Full reference, `127.0.0.1:<port>/<repo>:<tag>` or `...@sha256:...`."""
    digest: str
    platforms: frozenset[str]
    """Expected platforms as `os/arch[/variant]`; empty for an artifact."""
    media_type: str
    size: int
    """Size of the manifest body in bytes."""


def digest_of(data: bytes) -> str:
    """The sha256 digest string of `data`."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def index_entry(child: Image, platform: str) -> dict[str, Any]:
    """An index's entry for `child`, described as `platform` ("os/arch[/variant]")."""
    os_, arch, *rest = platform.split("/")
    described = {"architecture": arch, "os": os_, **({"variant": rest[0]} if rest else {})}
    return {
        "mediaType": child.media_type,
        "digest": child.digest,
        "size": child.size,
        "platform": described,
    }


def put_indexes(
    connect: Callable[[], http.client.HTTPConnection],
    repository: str,
    entries: list[dict[str, Any]],
    tags: Sequence[str],
    *,
    headers: Mapping[str, str] | None = None,
    workers: int = 8,
) -> None:
    """PUT one OCI index over `entries` under each of `tags`, each annotated with its tag
    (so each its own digest), on kept connections from a thread pool: `connect()` opens
    one per thread. Thousands of distinct images in seconds, their manifests pushed once.
    Raises RuntimeError for an answer other than 201."""
    local = threading.local()
    sent = {"Content-Type": OCI_INDEX, **(headers or {})}

    def put(tag: str) -> None:
        connection = getattr(local, "connection", None)
        if connection is None:
            connection = local.connection = connect()
        index = {
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": entries,
            "annotations": {"bench.archfit/tag": tag},
        }
        body = json.dumps(index).encode()
        connection.request("PUT", f"/v2/{repository}/manifests/{tag}", body, sent)
        response = connection.getresponse()
        response.read()
        if response.status != 201:
            raise RuntimeError(f"PUT {repository}:{tag} -> {response.status}")

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(put, tags))


class Pusher:
    """Pushes blobs and manifests to one registry, with optional Basic or Bearer auth."""

    def __init__(
        self,
        base_url: str,
        *,
        basic: tuple[str, str] | None = None,
        token: Callable[[str], str] | None = None,
        context: ssl.SSLContext | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.host = urllib.parse.urlsplit(self.base_url).netloc
        self._basic = basic
        self._token = token
        self._context = context

    def blob(self, repo: str, data: bytes, media_type: str) -> Descriptor:
        """Upload `data` as a blob (POST then PUT ?digest=) and describe it."""
        digest = digest_of(data)
        start = self._send("POST", repo, f"/v2/{repo}/blobs/uploads/", b"", {})
        location = start.headers["Location"]
        target = urllib.parse.urljoin(self.base_url + "/", location)
        separator = "&" if "?" in target else "?"
        target = f"{target}{separator}digest={urllib.parse.quote(digest)}"
        headers = {"Content-Type": "application/octet-stream"}
        self._send("PUT", repo, target, data, headers)
        return Descriptor(media_type, digest, len(data))

    def manifest(self, repo: str, reference: str, body: bytes, media_type: str) -> Descriptor:
        """PUT a manifest under a tag or its digest."""
        path = f"/v2/{repo}/manifests/{reference}"
        self._send("PUT", repo, path, body, {"Content-Type": media_type})
        return Descriptor(media_type, digest_of(body), len(body))

    def _send(
        self, method: str, repo: str, path_or_url: str, body: bytes, headers: dict[str, str]
    ) -> Any:
        url = path_or_url if "://" in path_or_url else self.base_url + path_or_url
        request = urllib.request.Request(url, data=body, method=method, headers=dict(headers))  # noqa: S310
        if self._basic is not None:
            request.add_header("Authorization", "Basic " + auth_field(*self._basic))
        elif self._token is not None:
            request.add_header("Authorization", "Bearer " + self._token(repo))
        try:
            with urllib.request.urlopen(request, timeout=30, context=self._context) as response:  # noqa: S310
                response.read()
                return response
        except urllib.error.HTTPError as error:
            detail = error.read()[:500].decode(errors="replace")
            error.close()
            raise RuntimeError(f"{method} {url} -> {error.code}: {detail}") from None

    # -- image shapes ------------------------------------------------------------------

    def single(
        self, repo: str, tag: str | None, platform: str, *, docker: bool = False, salt: str = ""
    ) -> Image:
        """Push a single-platform manifest whose config names `platform`."""
        os_, arch, *rest = platform.split("/")
        config: dict[str, Any] = {
            "architecture": arch,
            "os": os_,
            "rootfs": {"type": "layers", "diff_ids": []},
            "config": {"Labels": {"archfit.test": f"{repo}:{tag}:{platform}:{salt}"}},
        }
        if rest:
            config["variant"] = rest[0]
        config_type, layer_type, manifest_type = (
            (DOCKER_CONFIG, DOCKER_LAYER, DOCKER_MANIFEST)
            if docker
            else (OCI_CONFIG, OCI_LAYER, OCI_MANIFEST)
        )
        layer = self.blob(repo, f"layer {repo} {platform} {salt}".encode(), layer_type)
        config_blob = self.blob(repo, _canonical(config), config_type)
        body = _canonical(
            {
                "schemaVersion": 2,
                "mediaType": manifest_type,
                "config": config_blob.as_json(),
                "layers": [layer.as_json()],
            }
        )
        pushed = self.manifest(repo, tag or digest_of(body), body, manifest_type)
        return self._image(repo, tag, pushed, frozenset({platform}))

    def index(
        self,
        repo: str,
        tag: str,
        platforms: Iterable[str],
        *,
        docker: bool = False,
        attestations: bool = False,
        salt: str = "",
        claims: Mapping[str, str] | None = None,
    ) -> tuple[Image, list[Image]]:
        """Push one manifest per platform and an index (or Docker list) over them.

        With `attestations`, each platform also gets a BuildKit-style attestation entry
        (`unknown/unknown`, annotated `vnd.docker.reference.type`). `claims` makes the index
        lie: {"linux/amd64": "linux/arm64"} lists the amd64 build (config: amd64) as arm64.
        Returns the index and its children, the children addressed by digest.
        """
        children: list[Image] = []
        entries: list[dict[str, Any]] = []
        for platform in platforms:
            child = self.single(repo, None, platform, docker=docker, salt=salt)
            children.append(child)
            entries.append(index_entry(child, (claims or {}).get(platform, platform)))
            if attestations:
                entries.append(self._attestation(repo, child.digest, salt))
        index_type = DOCKER_LIST if docker else OCI_INDEX
        body = _canonical({"schemaVersion": 2, "mediaType": index_type, "manifests": entries})
        pushed = self.manifest(repo, tag, body, index_type)
        expected = frozenset(
            (claims or {}).get(p, p) for image in children for p in image.platforms
        )
        return self._image(repo, tag, pushed, expected), children

    def artifact(self, repo: str, tag: str, config_type: str = HELM_CONFIG) -> Image:
        """Push an OCI manifest whose config is not an image config (a Helm chart, say)."""
        config = self.blob(repo, b'{"name":"chart","version":"1.0.0"}', config_type)
        layer = self.blob(
            repo, b"chart tarball", "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
        )
        body = _canonical(
            {
                "schemaVersion": 2,
                "mediaType": OCI_MANIFEST,
                "config": config.as_json(),
                "layers": [layer.as_json()],
            }
        )
        pushed = self.manifest(repo, tag, body, OCI_MANIFEST)
        return self._image(repo, tag, pushed, frozenset())

    def _attestation(self, repo: str, subject: str, salt: str) -> dict[str, Any]:
        config = self.blob(repo, f'{{"attestation":"{subject}{salt}"}}'.encode(), OCI_CONFIG)
        layer = self.blob(
            repo, f"in-toto statement for {subject}".encode(), "application/vnd.in-toto+json"
        )
        body = _canonical(
            {
                "schemaVersion": 2,
                "mediaType": OCI_MANIFEST,
                "config": config.as_json(),
                "layers": [layer.as_json()],
            }
        )
        pushed = self.manifest(repo, digest_of(body), body, OCI_MANIFEST)
        return pushed.as_json(
            platform={"architecture": "unknown", "os": "unknown"},
            annotations={
                ATTESTATION_ANNOTATION: "attestation-manifest",
                "vnd.docker.reference.digest": subject,
            },
        )

    def _image(
        self, repo: str, tag: str | None, pushed: Descriptor, platforms: frozenset[str]
    ) -> Image:
        reference = f"{self.host}/{repo}:{tag}" if tag else f"{self.host}/{repo}@{pushed.digest}"
        return Image(reference, pushed.digest, platforms, pushed.media_type, pushed.size)


@dataclass(frozen=True)
class Catalog:
    """The images every integration test can rely on, in one registry."""

    multiarch_oci: Image
    """OCI index: linux/amd64, linux/arm64, linux/arm/v7."""
    manifest_list: Image
    """Docker manifest list v2: linux/amd64, linux/arm64."""
    single: Image
    """Docker manifest v2 without an index: linux/arm64 (from its config blob)."""
    with_attestations: Image
    """OCI index with attestation entries: linux/amd64, linux/arm64 and nothing else."""
    armv7_only: Image
    amd64_only: Image
    pinned_child: Image
    """`repo@<digest of the arm64 child of multiarch_oci>`: single-arch though the tag is not."""
    artifact: Image
    """A Helm chart: no platforms at all."""

    def all(self) -> list[Image]:
        """Every image in the catalog."""
        return [getattr(self, name) for name in self.__dataclass_fields__]


def publish_catalog(pusher: Pusher, prefix: str = "archfit") -> Catalog:
    """Push the catalog under `<prefix>/...` repositories and describe it."""
    multi, children = pusher.index(
        f"{prefix}/multi", "1.0", ["linux/amd64", "linux/arm64", "linux/arm/v7"]
    )
    arm64_child = next(c for c in children if c.platforms == {"linux/arm64"})
    listed, _ = pusher.index(f"{prefix}/listed", "1.0", ["linux/amd64", "linux/arm64"], docker=True)
    attested, _ = pusher.index(
        f"{prefix}/attested", "1.0", ["linux/amd64", "linux/arm64"], attestations=True
    )
    armv7, _ = pusher.index(f"{prefix}/armv7", "1.0", ["linux/arm/v7"])
    amd64 = pusher.single(f"{prefix}/amd64", "1.0", "linux/amd64")
    single = pusher.single(f"{prefix}/single", "1.0", "linux/arm64", docker=True)
    return Catalog(
        multiarch_oci=multi,
        manifest_list=listed,
        single=single,
        with_attestations=attested,
        armv7_only=armv7,
        amd64_only=amd64,
        pinned_child=arm64_child,
        artifact=pusher.artifact(f"{prefix}/chart", "1.0"),
    )


def _canonical(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode()
