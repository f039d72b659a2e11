"""Why a registry lookup failed: one small hierarchy, safe to log and show in events.

    RegistryError               (under extender.errors.ArchfitError)
    ├── NotCached               the cache has no answer and the registry may not be asked
    ├── InvalidReference        the image name is not a valid reference (also a ValueError)
    ├── AddressForbidden        the SSRF guard refused a host, address or redirect hop
    ├── Unreachable             no HTTP answer: DNS, connect or TLS failure
    │   └── Timeout             connect or total time limit hit
    ├── Unauthorized            401/403 after every credential (and anonymous) was tried
    │   └── NoCredentials       ... and no credential source matched the image at all
    ├── NotFound                404: the repository, tag or digest is unknown
    ├── UnexpectedStatus        any other status (5xx, 429, ...), with a cut body
    ├── TooLarge                a body exceeded its size cap
    └── ManifestInvalid         a body we cannot read as a manifest, config or token
        ├── DigestMismatch      a body fetched by digest does not hash to it
        └── Schema1Unsupported  a Docker schema 1 manifest (containerd 2.x refuses them)

Messages never carry credentials: every message passes `redact` (a registry's error body
may echo the request's headers), and bodies are cut with `snippet`. `transient` tells a
failure that may pass on its own (no answer, 5xx, 429) from a definite answer (401, 404 ...).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache

from extender.core.text import cut, printable
from extender.errors import ArchfitError

_SNIPPET = 200
_REDACTED = "[redacted]"


@cache
def _secrets() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """What a credential looks like inside an echoed request: a header line, an auth scheme
    followed by its secret, or a JSON/query field that names one (docker config.json, token
    answers, OAuth forms). Compiled on first use: about 4 ms that `serve`'s start need not pay.
    """
    return (
        re.compile(r"(?i)\b((?:proxy-)?authorization\b[\"']?\s*[:=]\s*[\"']?)[^\r\n\"',}]*"),
        re.compile(
            r"(?i)\b(basic|bearer)(\s+)(?!(?:realm|service|scope|error)\b)[A-Za-z0-9._~+/=-]{4,}"
        ),
        # A field whose name ends in a secret-sounding word (`SecretAccessKey`, `api_key`,
        # `sessionToken`, `client-secret`), quoted values whole.
        re.compile(
            r"(?i)\b([\w-]*(?:password|passwd|secret|token|auth|credentials?"
            r"|(?:access|secret|private|api|signing|session|account)[_-]?key)"
            r"[\"']?\s*[:=]\s*)(\"(?:[^\"\\]|\\.)*\"?|'[^']*'?|[^\s\"',}&]+)"
        ),
    )


def redact(text: str) -> str:
    """`text` with anything that looks like a credential replaced by `[redacted]`."""
    header, scheme, field = _secrets()
    text = header.sub(lambda m: m.group(1) + _REDACTED, text)
    text = scheme.sub(lambda m: m.group(1) + m.group(2) + _REDACTED, text)
    return field.sub(lambda m: m.group(1) + _quoted_like(m.group(2)), text)


def _quoted_like(value: str) -> str:
    quote = value[0] if value[:1] in ("'", '"') else ""
    return quote + _REDACTED + quote


def forget(error: BaseException, secrets: Iterable[str]) -> None:
    """Remove every one of `secrets` (what archfit itself sent) from `error`'s message.

    A registry may echo what it was sent in any encoding; the caller names the encodings
    it used (credentials.Credential.sent_forms). The longest go first, so a password inside
    a `user:password` pair does not leave the rest of the pair behind.
    """
    if not error.args or not isinstance(error.args[0], str):
        return
    text = error.args[0]
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, _REDACTED)
    error.args = (text, *error.args[1:])


def snippet(body: bytes | str, limit: int = _SNIPPET) -> str:
    """The start of an error body, redacted, made printable and cut to `limit` characters.

    Redacted before it is cut, so a cut never leaves half a secret behind its name.
    """
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    if not text.isprintable():  # most are: then the character-by-character pass is skipped
        text = printable(text, " ")
    return cut(redact(text).strip(), limit)


class RegistryError(ArchfitError):
    """Any failure to learn an image's platforms from its registry."""

    def __init__(self, message: str = "") -> None:
        # Redacted here, once, so no subclass or caller can forget it.
        super().__init__(redact(message))

    @property
    def transient(self) -> bool:
        """True when asking again later may succeed: the registry did not really answer."""
        return False


class NotCached(RegistryError):
    """The cache's tiers have no answer and the lookup may not ask the registry
    (`deadline.cached_only`)."""


class InvalidReference(RegistryError, ValueError):
    """The image name does not parse as a distribution reference."""


class AddressForbidden(RegistryError):
    """A request would go to an address outside what the SSRF guard allows."""


class Unreachable(RegistryError):
    """The registry gave no HTTP answer (DNS, connection or TLS failure)."""

    @property
    def transient(self) -> bool:
        return True


class Timeout(Unreachable):
    """A connect or total time limit was hit."""


class Unauthorized(RegistryError):
    """The registry refused every credential we had, and anonymous access."""


class NoCredentials(Unauthorized):
    """Refused, and no pull secret, plugin or docker config had a credential for the image."""


class NotFound(RegistryError):
    """The registry does not know the repository, tag or digest."""


class UnexpectedStatus(RegistryError):
    """Any status we do not handle specially (5xx, 429 ...)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status

    @property
    def transient(self) -> bool:
        """A server error or a rate limit; not a redirect loop or another 4xx."""
        return self.status >= 500 or self.status == 429


class TooLarge(RegistryError):
    """A response body was bigger than its cap."""


class ManifestInvalid(RegistryError):
    """A body that should be a manifest, config or token cannot be read as one."""


class DigestMismatch(ManifestInvalid):
    """The body fetched by digest hashes to something else."""


class Schema1Unsupported(ManifestInvalid):
    """Docker image manifest schema 1: deprecated, refused by containerd 2.x."""
