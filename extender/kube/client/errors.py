"""What the Kubernetes client raises, importable with nothing of it loaded: `archfit serve`
catches these even when Kubernetes access is off."""

from __future__ import annotations

from collections.abc import Mapping

import orjson

from extender.core.text import cut
from extender.errors import ArchfitError, SetupError

_MAX_ERROR = 300


def short_error(error: BaseException) -> str:
    """`Type: message` of an API or transport error, cut to a log field's length."""
    return cut(f"{type(error).__name__}: {error}", _MAX_ERROR)


class KubeConfigError(SetupError):
    """The API server cannot be configured as the settings ask."""

    summary = "cannot reach Kubernetes"


class CredentialUnavailable(ArchfitError):
    """A request's credentials could not be had (an exec plugin failed, a token file is
    gone, an OIDC token expired): the request is not sent."""


class ApiError(ArchfitError):
    """The API server answered a call with a status other than 2xx. Carries what it said:
    the status, its reason phrase, the body (a Status object, usually) and the headers."""

    def __init__(self, status: int, reason: str, body: bytes, headers: Mapping[str, str]) -> None:
        self.status = status
        self.reason = reason
        self.body = body
        self.headers = dict(headers)
        super().__init__(f"{status} {self.message}")

    @property
    def message(self) -> str:
        """The Status object's message, else the reason phrase."""
        try:
            said = orjson.loads(self.body or b"{}")
        except orjson.JSONDecodeError:
            said = None
        message = said.get("message") if isinstance(said, dict) else None
        return str(message or self.reason)

    @property
    def details(self) -> Mapping[str, str]:
        """The Status object's details (kind, name, group), where it has them."""
        try:
            said = orjson.loads(self.body or b"{}")
        except orjson.JSONDecodeError:
            return {}
        found = said.get("details") if isinstance(said, dict) else None
        if not isinstance(found, dict):
            return {}
        return {key: str(value) for key, value in found.items() if isinstance(value, str)}
