"""What extender.kube raises to the rest of archfit, importable with nothing of the API client
loaded: `archfit serve` catches these even when Kubernetes access is off."""

from __future__ import annotations

from collections.abc import Mapping

import orjson

from extender.core.text import cut
from extender.errors import ArchfitError, SetupError, WebhookSetupError

_MAX_ERROR = 300


def short_error(error: BaseException) -> str:
    """`Type: message` of an API or transport error, cut to a log field's length."""
    return cut(f"{type(error).__name__}: {error}", _MAX_ERROR)


class KubeConfigError(SetupError):
    """The API server cannot be configured as the settings ask."""

    summary = "cannot reach Kubernetes"


class CertificateSetupError(WebhookSetupError):
    """The webhook's self-managed certificate could not be stored, read or trusted."""


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
