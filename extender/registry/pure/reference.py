"""Image references normalised as distribution/reference does (`nginx` → docker.io/library/nginx).

Pure: the grammar is expressed as regular expressions; no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import NamedTuple

from extender.registry.errors import InvalidReference, snippet

DEFAULT_DOMAIN = "docker.io"
LEGACY_DEFAULT_DOMAIN = "index.docker.io"
DOCKER_HUB_API_HOST = "registry-1.docker.io"
DEFAULT_TAG = "latest"

PATH_MAX = 255
"""distribution/reference v0.6.0 RepositoryNameTotalLengthMax: the path alone, not the domain."""
_INPUT_MAX = 1024
"""Longest input we even look at: a name, a tag (128) and a sha512 digest fit easily."""

# The grammar of distribution/reference (regexp.go), restated.
_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_REMOTE_NAME = rf"{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN_NAME = rf"{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*"
# IPv6 in brackets, compressed or not; zone ids and embedded IPv4 are deliberately excluded.
_IPV6 = r"\[[a-fA-F0-9:]+\]"
_DOMAIN = rf"(?:{_DOMAIN_NAME}|{_IPV6})(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"

_IDENTIFIER_RE = re.compile(r"[a-f0-9]{64}")


class _Grammar(NamedTuple):
    reference: re.Pattern[str]
    name: re.Pattern[str]


@cache
def _grammar() -> _Grammar:
    """The compiled grammar, on first use: compiling costs `serve`'s start about 3 ms."""
    return _Grammar(
        re.compile(rf"((?:{_DOMAIN}/)?{_REMOTE_NAME})(?::({_TAG}))?(?:@({_DIGEST}))?", re.ASCII),
        re.compile(rf"(?:({_DOMAIN})/)?({_REMOTE_NAME})", re.ASCII),
    )


_DIGEST_HEX_LENGTHS = {"sha256": 64, "sha384": 96, "sha512": 128}


@dataclass(frozen=True, slots=True)
class Reference:
    """A normalised image reference.

    `tag` is "latest" when neither a tag nor a digest was given; when both were,
    `digest` is what gets fetched and `tag` is kept only for display.
    """

    domain: str
    """Registry as written in the name, normalised: `docker.io`, `ghcr.io`, `127.0.0.1:5000`."""
    path: str
    """Repository path: `library/nginx`."""
    tag: str = ""
    digest: str = ""

    @property
    def name(self) -> str:
        """`domain/path`, the repository's full name."""
        return f"{self.domain}/{self.path}"

    @property
    def api_host(self) -> str:
        """The host that serves the registry API for this domain."""
        return DOCKER_HUB_API_HOST if self.domain == DEFAULT_DOMAIN else self.domain

    @property
    def object(self) -> str:
        """What goes after `/manifests/`: the digest if there is one, otherwise the tag."""
        return self.digest or self.tag

    def __str__(self) -> str:
        text = self.name
        if self.tag:
            text += f":{self.tag}"
        if self.digest:
            text += f"@{self.digest}"
        return text


def parse(text: str) -> Reference:
    """Parse and normalise an image reference the way docker and kubelet do.

    Raises InvalidReference with a message naming what is wrong.
    """
    if not text:
        raise InvalidReference("invalid image reference: it is empty")
    if len(text) > _INPUT_MAX:
        raise InvalidReference(
            f"invalid image reference {_shown(text)!r}: longer than {_INPUT_MAX}"
        )
    if _IDENTIFIER_RE.fullmatch(text):
        raise InvalidReference(
            f"invalid image reference {_shown(text)!r}: a 64-character hex string is an image ID"
        )
    domain, remainder = _split_domain(text)
    remote = remainder.split(":", 1)[0].split("@", 1)[0]
    grammar = _grammar()
    # As distribution says it: "must be lowercase" only when lowercase would be valid.
    lowered = f"{domain}/{remote.lower()}{remainder[len(remote) :]}"
    if remote.lower() != remote and grammar.reference.fullmatch(lowered):
        raise InvalidReference(
            f"invalid image reference {_shown(text)!r}: repository must be lowercase"
        )
    match = grammar.reference.fullmatch(f"{domain}/{remainder}")
    if match is None:
        raise InvalidReference(
            f"invalid image reference {_shown(text)!r}: not a valid name[:tag][@digest]"
        )
    name, tag, digest = match.group(1), match.group(2) or "", match.group(3) or ""
    name_match = grammar.name.fullmatch(name)
    if name_match is None:  # pragma: no cover - the reference pattern already matched it
        raise InvalidReference(f"invalid image reference {_shown(text)!r}: bad repository name")
    # reference.go Parse: a first component that is no valid domain ("reg_istry.io") reads
    # as part of the path, leaving the reference without a domain.
    found_domain, path = name_match.group(1) or "", name_match.group(2)
    if len(path) > PATH_MAX:
        raise InvalidReference(
            f"invalid image reference {_shown(text)!r}: path longer than {PATH_MAX}"
        )
    if digest:
        _check_digest(digest, text)
    if not found_domain:
        # containerd would dial the first component as a host and CRI-O would fail; no
        # registry is named, so archfit asks none rather than guess one.
        raise InvalidReference(
            f"invalid image reference {_shown(text)!r}: {domain!r} is not a registry host, so the"
            f" name has no registry (distribution reads {snippet(path, 80)!r} as its path)"
        )
    if not tag and not digest:
        tag = DEFAULT_TAG
    return Reference(found_domain, path, tag, digest)


def _split_domain(text: str) -> tuple[str, str]:
    # The first component is a registry only if it looks like one: localhost, or it has a
    # dot or a port, or (distribution's quirk) an uppercase letter.
    first, slash, rest = text.partition("/")
    if not slash or (
        "." not in first and ":" not in first and first != "localhost" and first.lower() == first
    ):
        domain, remainder = DEFAULT_DOMAIN, text
    else:
        domain, remainder = first, rest
    if domain == LEGACY_DEFAULT_DOMAIN:
        domain = DEFAULT_DOMAIN
    if domain == DEFAULT_DOMAIN and "/" not in remainder:
        remainder = f"library/{remainder}"
    return domain, remainder


def _shown(text: str) -> str:
    """How an error shows the text it refuses; made only when one is raised, for a valid
    name is the common case and making it costs more than parsing the name."""
    return snippet(text, 80)


def _check_digest(digest: str, text: str) -> None:
    """`text` is what holds the digest (the reference, or the digest alone), for the error."""
    algorithm, _, encoded = digest.partition(":")
    expected = _DIGEST_HEX_LENGTHS.get(algorithm)
    if expected is None:
        raise InvalidReference(
            f"invalid image reference {_shown(text)!r}: unsupported digest algorithm"
        )
    if len(encoded) != expected or encoded.lower() != encoded:
        raise InvalidReference(
            f"invalid image reference {_shown(text)!r}: {algorithm} digest needs {expected}"
            " lowercase hex"
        )


@cache
def _digest_pattern() -> re.Pattern[str]:
    """`_DIGEST`, compiled on first use (a registry names a digest in every answer)."""
    return re.compile(_DIGEST, re.ASCII)


def parse_digest(digest: str) -> tuple[str, str]:
    """Split and check a digest string from a registry: ("sha256", hex).

    Raises InvalidReference when it is malformed or uses an algorithm we cannot verify.
    """
    if len(digest) > 200 or _digest_pattern().fullmatch(digest) is None:
        raise InvalidReference(f"invalid digest {_shown(digest)!r}")
    _check_digest(digest, digest)
    algorithm, _, encoded = digest.partition(":")
    return algorithm, encoded
