"""What extender.kube raises to the rest of archfit, importable without the `kubernetes`
package: `archfit serve` catches these even when Kubernetes access is off, and with it off
the client (~20 MB, ~0.4 s to import) must not be loaded at all."""

from __future__ import annotations

from extender.core.text import cut
from extender.errors import SetupError, WebhookSetupError

_MAX_ERROR = 300


def short_error(error: BaseException) -> str:
    """`Type: message` of an API or transport error, cut to a log field's length."""
    return cut(f"{type(error).__name__}: {error}", _MAX_ERROR)


class KubeConfigError(SetupError):
    """The API server cannot be configured as the settings ask."""

    summary = "cannot reach Kubernetes"


class CertificateSetupError(WebhookSetupError):
    """The webhook's self-managed certificate could not be stored, read or trusted."""
