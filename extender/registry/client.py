"""The OCI distribution client: a tag's digest (HEAD) or manifest (GET), manifests and blobs
by digest.

Each call tries the registry's endpoints in order (mirrors, then the registry), and on
each endpoint every matching credential in order, then anonymous access, as kubelet does.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import orjson
import structlog
import yarl

from extender.registry.auth import Authenticator
from extender.registry.errors import (
    InvalidReference,
    ManifestInvalid,
    NotFound,
    RegistryError,
    Unauthorized,
    UnexpectedStatus,
    forget,
    snippet,
)
from extender.registry.hosts import Endpoint, HostTable
from extender.registry.manifests import ACCEPT, digest_of, media_type_of, verify
from extender.registry.pure.credentials import Credential
from extender.registry.pure.reference import Reference, parse_digest
from extender.registry.transport import Response, Transport
from extender.ttlmap import TTLMap

log = structlog.get_logger(__name__)
T = TypeVar("T")
# Registries that do not implement HEAD on manifests answer one of these.
_NO_HEAD = frozenset({400, 405, 501})
_REFUSED_SECONDS = 30.0
_MAX_REFUSED = 4096


class RegistryClient:
    """Reads manifests and blobs; owns nothing but borrows a Transport and HostTable."""

    def __init__(
        self, transport: Transport, hosts: HostTable, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._transport = transport
        self._hosts = hosts
        self._auth = Authenticator(transport, clock)
        self._settings = transport.settings
        self._refused: TTLMap[tuple[str, str, str], bool] = TTLMap(_MAX_REFUSED, clock)
        """(host, repository, credential identity) refused lately: not offered for a while."""

    async def aclose(self) -> None:
        """Stop token fetches still running."""
        await self._auth.aclose()

    async def resolve_tag(self, ref: Reference, creds: Sequence[Credential]) -> str:
        """The digest a tag points at: HEAD (free on Docker Hub), GET only if HEAD cannot say."""

        async def attempt(endpoint: Endpoint, cred: Credential | None) -> str:
            url = endpoint.url(ref.path, "manifests", ref.tag)
            response = await self._request("HEAD", endpoint, url, ref, cred, "manifest", 0)
            header = response.headers.get("Docker-Content-Digest", "")
            if response.status == 200 and header:
                _check_digest(header, endpoint)
                return header
            if response.status != 200 and response.status not in _NO_HEAD:
                raise _status_error(response, endpoint, ref, f":{ref.tag}")
            cap = self._settings.max_manifest_bytes
            got = await self._request("GET", endpoint, url, ref, cred, "manifest", cap)
            if got.status != 200:
                raise _status_error(got, endpoint, ref, f":{ref.tag}")
            return _body_digest(got, endpoint)

        return await self._each(ref, creds, attempt, resolve=True)

    def content_from_tag_hosts(self, ref: Reference) -> bool:
        """Whether the hosts that answer the reference's tags also serve its content first.

        Not so behind a pull-only mirror: then a digest's GET goes to the mirror (a pull-through
        cache, say), and a GET of the tag would spend the pull at the registry instead.
        """
        resolving = self._hosts.endpoints(ref, resolve=True)
        return resolving == self._hosts.endpoints(ref, resolve=False)

    async def tag_manifest(
        self, ref: Reference, creds: Sequence[Credential]
    ) -> tuple[str, bytes, str]:
        """A tag's digest, manifest body and media type in one GET (a Docker Hub pull).

        For a tag with nothing cached to revalidate: the body is needed anyway, and HEAD
        first would cost a round trip more. The body is verified against the digest the
        registry names (`Docker-Content-Digest`); without one, its sha256 is the digest.
        """

        async def attempt(endpoint: Endpoint, cred: Credential | None) -> tuple[str, bytes, str]:
            url = endpoint.url(ref.path, "manifests", ref.tag)
            cap = self._settings.max_manifest_bytes
            response = await self._request("GET", endpoint, url, ref, cred, "manifest", cap)
            if response.status != 200:
                raise _status_error(response, endpoint, ref, f":{ref.tag}")
            digest = _body_digest(response, endpoint)
            return digest, response.body, media_type_of(response.headers.get("Content-Type", ""))

        return await self._each(ref, creds, attempt, resolve=True)

    async def manifest(
        self, ref: Reference, digest: str, creds: Sequence[Credential]
    ) -> tuple[bytes, str]:
        """The manifest body stored under `digest` (verified) and its media type."""

        async def attempt(endpoint: Endpoint, cred: Credential | None) -> tuple[bytes, str]:
            url = endpoint.url(ref.path, "manifests", digest)
            cap = self._settings.max_manifest_bytes
            response = await self._request("GET", endpoint, url, ref, cred, "manifest", cap)
            if response.status != 200:
                raise _status_error(response, endpoint, ref, f"@{digest}")
            verify(response.body, digest)
            return response.body, media_type_of(response.headers.get("Content-Type", ""))

        return await self._each(ref, creds, attempt, resolve=False)

    async def blob(
        self, ref: Reference, digest: str, creds: Sequence[Credential], cap: int
    ) -> bytes:
        """A blob (an image config) by digest, verified; storage redirects are followed."""

        async def attempt(endpoint: Endpoint, cred: Credential | None) -> bytes:
            url = endpoint.url(ref.path, "blobs", digest)
            response = await self._request("GET", endpoint, url, ref, cred, "blob", cap)
            if response.status != 200:
                raise _status_error(response, endpoint, ref, f" blob {digest}")
            verify(response.body, digest)
            return response.body

        return await self._each(ref, creds, attempt, resolve=False)

    async def tags(
        self, ref: Reference, creds: Sequence[Credential], *, page_size: int, pages: int
    ) -> TagList:
        """The repository's tags (`GET /v2/<name>/tags/list`), at most `pages` pages of
        `page_size`: each page is one request, so a lookup costs at most `pages` of them."""

        async def attempt(endpoint: Endpoint, cred: Credential | None) -> TagList:
            found: list[str] = []
            last = ""
            for _page in range(pages):
                url = endpoint.url(ref.path, "tags", "list").update_query(n=str(page_size))
                if last:
                    url = url.update_query(last=last)
                cap = self._settings.max_manifest_bytes
                response = await self._request("GET", endpoint, url, ref, cred, "tags", cap)
                if response.status != 200:
                    raise _status_error(response, endpoint, ref, " tags")
                page = _tag_page(response.body, endpoint, ref)
                found += page
                # The next page starts after this one's last tag; the Link header says only
                # whether there is one (its URL is not followed: it could name another host).
                if not page or 'rel="next"' not in response.headers.get("Link", ""):
                    return TagList(tuple(found), complete=True)
                last = page[-1]
            return TagList(tuple(found), complete=False)

        return await self._each(ref, creds, attempt, resolve=True)

    async def _each(
        self,
        ref: Reference,
        creds: Sequence[Credential],
        attempt: Callable[[Endpoint, Credential | None], Awaitable[T]],
        *,
        resolve: bool,
    ) -> T:
        endpoints = self._hosts.endpoints(ref, resolve=resolve)
        for position, endpoint in enumerate(endpoints):
            try:
                return await self._each_credential(ref, endpoint, creds, attempt)
            except InvalidReference as error:
                raise ManifestInvalid(str(error)) from error
            except RegistryError as error:
                if position == len(endpoints) - 1:
                    raise
                # containerd moves on to the next host on any failure; so do we.
                log.info("mirror_failed", mirror=endpoint.host, image=str(ref), error=str(error))
        raise AssertionError("endpoints() always includes the registry itself")  # pragma: no cover

    async def _each_credential(
        self,
        ref: Reference,
        endpoint: Endpoint,
        creds: Sequence[Credential],
        attempt: Callable[[Endpoint, Credential | None], Awaitable[T]],
    ) -> T:
        # A credential just refused for this repository is not offered again for a while:
        # each of a lookup's requests would otherwise pay for the same refusal.
        fresh = [c for c in creds if self._refused.get(_key(endpoint, ref, c)) is None]
        if endpoint.is_mirror:
            # A registry's credentials are not the mirror's (docs/private-registries.md).
            fresh = [c for c in fresh if c.serves(endpoint.host)]
        refused: Unauthorized | None = None
        for cred in (*fresh, None):
            try:
                return await attempt(endpoint, cred)
            except Unauthorized as error:
                forget(error, cred.sent_forms() if cred is not None else ())
                refused = error  # kubelet tries the next credential, then anonymous
                if cred is not None:
                    self._refused.put(_key(endpoint, ref, cred), True, _REFUSED_SECONDS)
            except RegistryError as error:
                # An upstream may echo what it was sent; none of it goes further.
                forget(error, cred.sent_forms() if cred is not None else ())
                raise
        assert refused is not None
        raise refused

    async def _request(
        self,
        method: str,
        endpoint: Endpoint,
        url: yarl.URL,
        ref: Reference,
        cred: Credential | None,
        kind: str,
        cap: int,
    ) -> Response:
        """One request with auth: remembered challenge first, one retry after a 401."""
        headers = {"Accept": ACCEPT} if kind == "manifest" else {}
        sent = await self._auth.header(endpoint, ref.path, cred)
        borrowed = False
        if sent is None:
            # A repository new to us on a host we know: its host's challenge saves the 401.
            sent = await self._auth.borrowed_header(endpoint, ref.path, cred)
            borrowed = sent is not None
        response = await self._transport.send(
            method, url, kind=kind, cap=cap, headers=_with_auth(headers, sent), tls=endpoint.tls
        )
        if borrowed and response.status == 403:
            # Refused outright: ask as if nothing had been borrowed, so its own 401 decides.
            sent, borrowed = None, False
            response = await self._transport.send(
                method, url, kind=kind, cap=cap, headers=headers, tls=endpoint.tls
            )
        refreshed = False
        # At most two retries: one to answer a first challenge, one to replace a token the
        # registry calls invalid_token (expired or revoked).
        for _retry in range(2):
            if response.status != 401:
                break
            if response.url.origin() != url.origin():
                raise _redirected_challenge(endpoint, ref, response)
            # A refused borrowed header counts as none sent: the repository's own challenge
            # then decides, exactly as if nothing had been borrowed.
            retry = await self._auth.answer(
                endpoint,
                ref.path,
                cred,
                response,
                None if borrowed else sent,
                refresh=not refreshed,
            )
            if borrowed and retry == sent:
                # Its own challenge gives the header just refused: as if that had been its own.
                borrowed = False
                retry = await self._auth.answer(
                    endpoint, ref.path, cred, response, sent, refresh=not refreshed
                )
            if retry is None:
                break
            refreshed = refreshed or (sent is not None and not borrowed)
            sent, borrowed = retry, False
            response = await self._transport.send(
                method,
                url,
                kind=kind,
                cap=cap,
                headers=_with_auth(headers, sent),
                tls=endpoint.tls,
            )
        if response.status == 401:
            raise _unauthorized(endpoint, ref, cred, response)
        if response.status == 403:
            raise _unauthorized(endpoint, ref, cred, response)
        return response


@dataclass(frozen=True, slots=True)
class TagList:
    """A repository's tags as the registry listed them (lexically, as distribution does)."""

    tags: tuple[str, ...]
    complete: bool
    """False when the listing was cut at its page bound: later tags were not read."""


def _tag_page(body: bytes, endpoint: Endpoint, ref: Reference) -> list[str]:
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise ManifestInvalid(f"{endpoint.host}/{ref.path}: tag list is not JSON") from error
    tags = document.get("tags") if isinstance(document, dict) else None
    if tags is None:
        return []  # distribution answers `"tags": null` for a repository without tags
    if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
        raise ManifestInvalid(f"{endpoint.host}/{ref.path}: tag list is not a list of names")
    return tags


def _key(endpoint: Endpoint, ref: Reference, cred: Credential) -> tuple[str, str, str]:
    return (endpoint.host, ref.path, cred.identity)


def _with_auth(headers: dict[str, str], authorization: str | None) -> dict[str, str]:
    return headers if authorization is None else {**headers, "Authorization": authorization}


def _body_digest(response: Response, endpoint: Endpoint) -> str:
    """The digest of a manifest fetched by tag: the one the registry names, checked against
    the body, else the body's sha256."""
    header = response.headers.get("Docker-Content-Digest", "")
    if not header:
        return digest_of(response.body)
    try:
        verify(response.body, header)  # checks the digest's form first
    except InvalidReference as error:
        raise ManifestInvalid(f"{endpoint.host}: {error}") from error
    return header


def _check_digest(digest: str, endpoint: Endpoint) -> None:
    try:
        parse_digest(digest)
    except InvalidReference as error:
        raise ManifestInvalid(f"{endpoint.host}: {error}") from error


def _redirected_challenge(endpoint: Endpoint, ref: Reference, response: Response) -> Unauthorized:
    """A 401 from a host the registry redirected to: that host's challenge, not the registry's.

    containerd keys challenges by the host that answered (authorizer.go AddResponses) and asks
    for that host's credentials; the registry's own never go to a realm it did not name.
    """
    return Unauthorized(
        f"{endpoint.host} redirected {ref.path} to {response.url.host}, which asks for"
        f" credentials; {endpoint.host}'s credentials go only to token realms it names itself"
    )


def _unauthorized(
    endpoint: Endpoint, ref: Reference, cred: Credential | None, response: Response
) -> Unauthorized:
    who = cred.source if cred is not None else "anonymous access"
    return Unauthorized(
        f"{endpoint.host} refused {who} for {ref.path} ({response.status}"
        f"{_error_code(response.body)})"
    )


def _status_error(
    response: Response, endpoint: Endpoint, ref: Reference, what: str
) -> RegistryError:
    """An error for a non-2xx answer; `what` says what was asked for (`:tag`, `@digest`)."""
    where = f"{endpoint.host}/{ref.path}{what}"
    if response.status == 404:
        return NotFound(f"{where} not found{_error_code(response.body)}")
    if response.status == 429:
        return UnexpectedStatus(f"{where}: rate limited (429)", status=429)
    detail = _error_code(response.body) or f": {snippet(response.body)}"
    return UnexpectedStatus(f"{where}: answered {response.status}{detail}", response.status)


def _error_code(body: bytes) -> str:
    """`: CODE message` from a distribution error body, or ""."""
    try:
        document = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        return ""
    errors = document.get("errors") if isinstance(document, dict) else None
    if not isinstance(errors, list) or not errors or not isinstance(errors[0], dict):
        return ""
    first = errors[0]
    return (
        f": {snippet(str(first.get('code', '')), 40)} {snippet(str(first.get('message', '')), 120)}"
    )
