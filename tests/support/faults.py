"""A local registry that misbehaves on purpose: slow, wrong digests, huge bodies, bad redirects.

Tests script it route by route (`serve`, `fail`, `redirect` ...) and read back every request
it saw, headers included, to assert what the client sent.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"


def sha256(body: bytes) -> str:
    """`sha256:<hex>` of body."""
    return "sha256:" + hashlib.sha256(body).hexdigest()


def canonical(document: Any) -> bytes:
    """Compact JSON, as registries store manifests."""
    return json.dumps(document, separators=(",", ":"), sort_keys=True).encode()


@dataclass(frozen=True)
class Seen:
    """One request the fault server received."""

    method: str
    path: str
    headers: dict[str, str]


@dataclass
class FaultRegistry:
    """Routes keyed by (method, path); anything else is a distribution-style 404."""

    routes: dict[tuple[str, str], Handler] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)

    def app(self) -> web.Application:
        """The aiohttp application to serve."""
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        return app

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        self.seen.append(Seen(request.method, request.path_qs, dict(request.headers)))
        handler = self.routes.get((request.method, request.path))
        if handler is None and request.method == "HEAD":
            handler = self.routes.get(("GET", request.path))
        if handler is None:
            return web.json_response(
                {"errors": [{"code": "MANIFEST_UNKNOWN", "message": "manifest unknown"}]},
                status=404,
            )
        return await handler(request)

    def count(self, method: str, path_part: str) -> int:
        """How many requests of `method` had `path_part` in their path."""
        return sum(1 for s in self.seen if s.method == method and path_part in s.path)

    # -- scripting ---------------------------------------------------------------------

    def route(self, method: str, path: str, handler: Handler) -> None:
        """Serve `path` with a custom handler."""
        self.routes[(method, path)] = handler

    def serve(
        self,
        path: str,
        body: bytes,
        content_type: str,
        *,
        digest: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Serve a fixed body; `digest` sets Docker-Content-Digest (may be a lie)."""

        async def handler(request: web.Request) -> web.StreamResponse:
            extra = dict(headers or {})
            if digest:
                extra["Docker-Content-Digest"] = digest
            return web.Response(body=body, content_type=None, headers={
                "Content-Type": content_type, **extra})  # fmt: skip

        self.route("GET", path, handler)

    def manifest(self, repo: str, ref: str, document: dict[str, Any], media_type: str) -> str:
        """Serve a manifest under `ref` and under its digest; return the digest."""
        body = canonical(document)
        digest = sha256(body)
        for name in (ref, digest):
            self.serve(f"/v2/{repo}/manifests/{name}", body, media_type, digest=digest)
        return digest

    def blob(self, repo: str, body: bytes) -> str:
        """Serve a blob under its digest; return the digest."""
        digest = sha256(body)
        self.serve(f"/v2/{repo}/blobs/{digest}", body, "application/octet-stream")
        return digest

    def fail(self, path: str, status: int, body: bytes = b"", method: str = "GET") -> None:
        """Answer `path` with a status and body."""

        async def handler(request: web.Request) -> web.StreamResponse:
            return web.Response(status=status, body=body)

        self.route(method, path, handler)

    def slow(self, path: str, seconds: float) -> None:
        """Answer `path` only after `seconds`."""

        async def handler(request: web.Request) -> web.StreamResponse:
            await asyncio.sleep(seconds)
            return web.Response(status=200, body=b"{}")

        self.route("GET", path, handler)

    def redirect(self, path: str, location: str, status: int = 307) -> None:
        """Redirect `path` to `location`."""

        async def handler(request: web.Request) -> web.StreamResponse:
            return web.Response(status=status, headers={"Location": location})

        self.route("GET", path, handler)

    def huge(self, path: str, size: int, content_type: str = OCI_MANIFEST) -> None:
        """Stream `size` bytes without a Content-Length, so only a read cap can stop it."""

        async def handler(request: web.Request) -> web.StreamResponse:
            response = web.StreamResponse(headers={"Content-Type": content_type})
            response.enable_chunked_encoding()
            await response.prepare(request)
            chunk = b" " * 65_536
            sent = 0
            try:
                while sent < size:
                    await response.write(chunk)
                    sent += len(chunk)
            except (ConnectionResetError, RuntimeError):
                pass  # the client hung up at its cap, as it should
            return response

        self.route("GET", path, handler)

    def image(self, repo: str, tag: str, platform: str, *, config_type: str = OCI_CONFIG) -> str:
        """Serve a single-platform OCI image (manifest + config); return the manifest digest."""
        os_, arch, *rest = platform.split("/")
        config = canonical(
            {"os": os_, "architecture": arch, **({"variant": rest[0]} if rest else {})}
        )
        config_digest = self.blob(repo, config)
        return self.manifest(
            repo,
            tag,
            {
                "schemaVersion": 2,
                "mediaType": OCI_MANIFEST,
                "config": {"mediaType": config_type, "digest": config_digest, "size": len(config)},
                "layers": [],
            },
            OCI_MANIFEST,
        )
