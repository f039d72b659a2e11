"""What extender.kube raises to the rest of archfit, importable without the `kubernetes`
package: `archfit serve` catches these even when Kubernetes access is off, and with it off
the client (~20 MB, ~0.4 s to import) must not be loaded at all."""

from __future__ import annotations


class KubeConfigError(RuntimeError):
    """The API server cannot be configured as the settings ask."""


class CertificateSetupError(RuntimeError):
    """The webhook's self-managed certificate could not be stored, read or trusted."""
