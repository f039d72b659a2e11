"""A kubeconfig user's `auth-provider`, as kubectl's client-go has them: `oidc`, and the
`gcp` and `azure` providers removed upstream, refused with client-go's words.

oidc sends the config's `id-token` while it is valid (its `exp` claim more than 10 s away).
client-go refreshes an expired one with the `refresh-token` at the issuer and writes the new
tokens back into the kubeconfig; archfit never writes the user's files, so it refuses to
refresh and says to log in again (docs/kubeconfig.md).
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Callable
from typing import Any

import orjson

from extender.kube.client.errors import CredentialUnavailable, KubeConfigError
from extender.kube.client.rest_config import AuthProvider

EXPIRY_MARGIN_SECONDS = 10.0
"""An id-token this close to its expiry counts as expired (client-go's expiryDelta)."""
_REMOVED = {
    "gcp": (
        'The gcp auth plugin has been removed.\nPlease use the "gke-gcloud-auth-plugin" '
        "kubectl/client-go credential plugin instead.\nSee https://cloud.google.com/blog/"
        "products/containers-kubernetes/kubectl-auth-changes-in-gke for further details"
    ),
    "azure": (
        'The azure auth plugin has been removed.\nPlease use the "kubelogin" kubectl/client-go '
        "credential plugin instead.\nSee https://kubernetes.io/docs/reference/access-authn-authz/"
        "authentication/#client-go-credential-plugins for further details"
    ),
}


class OIDCToken:
    """The Authorization header of an oidc auth-provider."""

    def __init__(self, config: dict[str, str], now: Callable[[], float] = time.time) -> None:
        if not config.get("idp-issuer-url"):
            raise KubeConfigError("Must provide idp-issuer-url")
        if not config.get("client-id"):
            raise KubeConfigError("Must provide client-id")
        if config.get("idp-certificate-authority-data"):
            try:
                base64.b64decode(config["idp-certificate-authority-data"], validate=True)
            except (binascii.Error, ValueError) as error:
                raise KubeConfigError(f"illegal base64 data: {error}") from error
        self._config = config
        self._now = now

    def token(self) -> str:
        """The id-token while valid. Raises CredentialUnavailable otherwise."""
        token = self._config.get("id-token", "")
        if token and _valid(token, self._now()):
            return token
        if not self._config.get("refresh-token"):
            raise CredentialUnavailable(
                "No valid id-token, and cannot refresh without refresh-token"
            )
        raise CredentialUnavailable(
            "the oidc id-token expired: archfit does not refresh it (that writes the kubeconfig);"
            " log in again, or use an exec credential plugin such as kubelogin"
        )


def _valid(token: str, now: float) -> bool:
    """Whether the JWT's `exp` is more than EXPIRY_MARGIN_SECONDS away. Raises
    CredentialUnavailable for a token that is no JWT."""
    parts = token.split(".")
    if len(parts) != 3:
        raise CredentialUnavailable("ID Token is not a valid JWT")
    payload = parts[1]
    if "=" in payload:
        raise CredentialUnavailable("illegal base64 data in the id-token")
    try:
        claims: Any = orjson.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (binascii.Error, ValueError) as error:
        raise CredentialUnavailable(f"parsing claims: {error}") from error
    expiry = claims.get("exp", 0) if isinstance(claims, dict) else 0
    if isinstance(expiry, bool) or not isinstance(expiry, int | float):
        raise CredentialUnavailable("parsing claims: exp is not a number")
    return now + EXPIRY_MARGIN_SECONDS < int(expiry)


def token_source(provider: AuthProvider, now: Callable[[], float] = time.time) -> OIDCToken:
    """The provider's token source. Raises KubeConfigError for a provider client-go does
    not have or has removed, and for an oidc config it refuses."""
    if provider.name in _REMOVED:
        raise KubeConfigError(_REMOVED[provider.name])
    if provider.name != "oidc":
        raise KubeConfigError(f'no Auth Provider found for name "{provider.name}"')
    return OIDCToken(dict(provider.config), now)
