"""Registry auth: WWW-Authenticate challenges, Bearer tokens and Basic credentials.

Tokens are cached by (realm, service, scope, credential identity) with one fetch in
flight per key. Each repository's last challenge is remembered for a while to skip the
401 round trip; per repository, so one repository's bad challenge cannot break the others
on its host, and for a while, so a bad one is not kept until restart. A repository with no
challenge of its own borrows its host's last one that worked (a token came from its realm,
or a Basic credential went with it) for an hour, so a new repository skips the 401 too, and
so does one whose own challenge has expired; a borrowed challenge that fails in any way is
forgotten for that request, which then asks the repository's own.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import yarl

from extender.registry.errors import (
    ManifestInvalid,
    RegistryError,
    Unauthorized,
    UnexpectedStatus,
    snippet,
)
from extender.registry.hosts import Endpoint
from extender.registry.manifests import json_object
from extender.registry.pure.credentials import ANONYMOUS, Credential
from extender.registry.transport import Response, Transport
from extender.ttlmap import TTLMap

DEFAULT_EXPIRES_IN = 60
"""Seconds a token lives when the token server does not say (distribution's token spec)."""
_MAX_TOKENS = 4096
_MAX_CHALLENGES = 4096
CHALLENGE_TTL_SECONDS = 300.0
"""How long a remembered challenge is used before a fresh 401 is asked for."""
WORKING_CHALLENGE_TTL_SECONDS = 3600.0
"""How long a host's working challenge is lent to its repositories. Longer than their own:
a borrowed challenge that stops working costs only a fallback to the repository's own 401,
whose answer then replaces it."""
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')
_USABLE_TOKEN = re.compile(r"[\x21-\x7e]{1,65536}")

TokenKey = tuple[str, str, str, str]


@dataclass(frozen=True, slots=True)
class Challenge:
    """One challenge of a WWW-Authenticate header: a scheme and its parameters."""

    scheme: str
    """Lowercase: `bearer`, `basic`, ..."""
    params: dict[str, str] = field(default_factory=dict)
    """Parameter names lowercased; values unquoted."""

    @property
    def error(self) -> str:
        """The `error` parameter (`invalid_token`, `insufficient_scope`) or ""."""
        return self.params.get("error", "")


def parse_challenges(values: Iterable[str]) -> list[Challenge]:
    """Parse WWW-Authenticate values; one header may hold several comma-separated challenges.

    Quoted values may contain commas and escaped quotes. Unparseable input yields nothing.
    """
    challenges: list[Challenge] = []
    for value in values:
        challenges.extend(_parse_one(value[:8192]))
    return challenges


def _parse_one(text: str) -> list[Challenge]:
    found: list[Challenge] = []
    current: Challenge | None = None
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] in " \t,":
            i += 1
        match = _TOKEN.match(text, i)
        if match is None:
            i += 1  # skip a stray character rather than give up on the whole header
            continue
        name, j = match.group(), _skip_space(text, match.end())
        if current is not None and j < n and text[j] == "=":
            j = _skip_space(text, j + 1)
            quoted = _QUOTED.match(text, j)
            if quoted is not None:
                value, i = re.sub(r"\\(.)", r"\1", quoted.group(1)), quoted.end()
            elif j < n and text[j] == '"':
                value, i = text[j + 1 :], n  # unterminated quote: the rest is its value
            else:
                bare = _TOKEN.match(text, j)
                value, i = (bare.group(), bare.end()) if bare else ("", j)
            current.params[name.lower()] = value
        else:
            current = Challenge(name.lower())
            found.append(current)
            i = j
    return found


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t":
        i += 1
    return i


def pull_scope(repository: str) -> str:
    """The token scope for reading one repository."""
    return f"repository:{repository}:pull"


class Authenticator:
    """Works out the Authorization header for a request, fetching tokens as needed."""

    def __init__(self, transport: Transport, clock: Callable[[], float] = time.monotonic) -> None:
        self._transport = transport
        self._challenges: TTLMap[tuple[str, str], Challenge] = TTLMap(_MAX_CHALLENGES, clock)
        self._working: TTLMap[str, Challenge] = TTLMap(_MAX_CHALLENGES, clock)
        """Per host, the last challenge that gave a header: a token, or Basic credentials."""
        self._tokens: TTLMap[TokenKey, _Token] = TTLMap(_MAX_TOKENS, clock)

    async def aclose(self) -> None:
        """Cancel token fetches still running."""
        await self._tokens.aclose()

    async def header(self, endpoint: Endpoint, repo: str, cred: Credential | None) -> str | None:
        """The header to send up front, from the repository's remembered challenge, if any."""
        challenge = self._challenges.get((endpoint.host, repo))
        if challenge is None:
            return None
        return await self._header_for(challenge, endpoint, repo, cred)

    async def borrowed_header(
        self, endpoint: Endpoint, repo: str, cred: Credential | None
    ) -> str | None:
        """For a repository with no challenge of its own: the header its host's last working
        challenge gives, or None (also when that fails: the repository's own 401 will say)."""
        challenge = self._working.get(endpoint.host)
        if challenge is None:
            return None
        try:
            return await self._header_for(challenge, endpoint, repo, cred)
        except RegistryError:
            return None

    async def answer(
        self,
        endpoint: Endpoint,
        repo: str,
        cred: Credential | None,
        response: Response,
        sent: str | None,
        *,
        refresh: bool = True,
    ) -> str | None:
        """After a 401: the header to retry with, or None when a retry cannot help.

        A retry helps when nothing was sent yet, or (if `refresh`) when the token was
        rejected as `invalid_token` (expired or revoked: fetch a new one).
        """
        challenges = parse_challenges(response.headers.getall("WWW-Authenticate", []))
        usable = [c for c in challenges if c.scheme in ("bearer", "basic")]
        if not usable:
            return None
        # Prefer Bearer when a registry offers both: it works anonymously too.
        challenge = next((c for c in usable if c.scheme == "bearer"), usable[0])
        kept = self._remember((endpoint.host, repo), challenge)
        if sent is not None:
            if not refresh or challenge.scheme != "bearer" or challenge.error != "invalid_token":
                return None
            self._tokens.pop(self._token_key(challenge, repo, cred))
        header = await self._header_for(challenge, endpoint, repo, cred)
        if header is not None:
            self._working.put(endpoint.host, kept, WORKING_CHALLENGE_TTL_SECONDS)
        return header

    def _remember(self, key: tuple[str, str], challenge: Challenge) -> Challenge:
        # Only where tokens come from is worth remembering; error and scope are per answer.
        params = {k: v for k, v in challenge.params.items() if k in ("realm", "service")}
        kept = Challenge(challenge.scheme, params)
        self._challenges.put(key, kept, CHALLENGE_TTL_SECONDS)
        return kept

    async def _header_for(
        self, challenge: Challenge, endpoint: Endpoint, repo: str, cred: Credential | None
    ) -> str | None:
        if challenge.scheme == "basic":
            return cred.basic() if cred is not None else None
        if challenge.scheme != "bearer":
            return None
        token = await self.token(challenge, endpoint, repo, cred)
        return f"Bearer {token}"

    def _token_key(self, challenge: Challenge, repo: str, cred: Credential | None) -> TokenKey:
        identity = cred.identity if cred is not None else ANONYMOUS
        params = challenge.params
        return (params.get("realm", ""), params.get("service", ""), pull_scope(repo), identity)

    async def token(
        self, challenge: Challenge, endpoint: Endpoint, repo: str, cred: Credential | None
    ) -> str:
        """A Bearer token for pulling `repo`, from the cache or the realm."""
        key = self._token_key(challenge, repo, cred)
        fetch = lambda: self._fetch(key, endpoint, cred)  # noqa: E731
        return (await self._tokens.get_or_load(key, fetch, lambda token: token.seconds)).value

    async def _fetch(self, key: TokenKey, endpoint: Endpoint, cred: Credential | None) -> _Token:
        realm, service, scope, _identity = key
        url = yarl.URL(realm)
        if url.scheme not in ("http", "https") or not url.host:
            raise Unauthorized(
                f"{endpoint.host}: token realm {snippet(realm, 80)!r} is not http(s)"
            )
        query = {"scope": scope, **({"service": service} if service else {})}
        url = url.update_query(query)
        headers = {"Accept": "application/json"}
        if cred is not None:
            if url.scheme == "http" and endpoint.base.scheme == "https":
                # Unauthorized, not a hard stop: the next credential, or anonymous, may work.
                raise Unauthorized(
                    f"{endpoint.host}: refusing to send credentials to plain-HTTP realm {url.host}"
                )
            headers["Authorization"] = cred.basic()
        response = await self._transport.send(
            "GET",
            url,
            kind="token",
            cap=self._transport.settings.max_token_bytes,
            headers=headers,
            tls=endpoint.tls,  # containerd fetches tokens with the host's own TLS client
        )
        if response.status in (401, 403):
            who = "credentials" if cred is not None else "anonymous access"
            raise Unauthorized(f"{url.host}: token server refused {who} for {scope}")
        if response.status != 200:
            raise UnexpectedStatus(
                f"{url.host}: token server answered {response.status}: {snippet(response.body)}",
                status=response.status,
            )
        token, expires_in = _token_from(response.body, url.host or "")
        return _Token(token, expires_in * 0.9)  # renew before the server's clock says so


@dataclass(frozen=True, slots=True)
class _Token:
    value: str
    seconds: float
    """How long it is used: a little less than the token server said it lives."""


def _token_from(body: bytes, host: str) -> tuple[str, float]:
    document = json_object(body, f"{host}: token answer")
    token = document.get("token") or document.get("access_token")
    if not isinstance(token, str) or _USABLE_TOKEN.fullmatch(token) is None:
        raise ManifestInvalid(f"{host}: token answer has no usable token")
    expires_in = document.get("expires_in")
    if isinstance(expires_in, bool) or not isinstance(expires_in, int | float) or expires_in <= 0:
        expires_in = DEFAULT_EXPIRES_IN
    return token, float(min(expires_in, 86_400))
