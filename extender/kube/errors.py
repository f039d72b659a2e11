"""What archfit's Kubernetes adapters raise besides the client's own errors
(extender.kube.client.errors)."""

from __future__ import annotations

from extender.errors import WebhookSetupError


class CertificateSetupError(WebhookSetupError):
    """The webhook's self-managed certificate could not be stored, read or trusted."""
