"""The webhook's self-managed certificate: kept in a Secret, written to files, trusted by the API.

Every replica runs `ensure()` at start and then every `checkSeconds`: it reads the
Secret, makes a CA and serving pair if there is none or it is due for renewal (the
first writer wins; the others read its pair back), writes the pair where the TLS
listener reads it, and sets the caBundle of the MutatingWebhookConfiguration (and of the
workload warnings' ValidatingWebhookConfiguration).
Until the caBundle is set, kube-apiserver cannot call the webhook and, with
`failurePolicy: Ignore`, admits pods unchanged. So each configuration is also watched: when
it changes (a GitOps sync that reverts the caBundle, a re-created configuration), the pass
runs at once, not at the next checkSeconds.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import datetime as dt
import os
import tempfile
from collections.abc import Callable
from http import HTTPStatus
from pathlib import Path
from typing import Any

import msgspec
import structlog

from extender.config.settings import WebhookSettings
from extender.kube.client.api import JSON_PATCH, KubeApi
from extender.kube.client.calls import blocking
from extender.kube.client.errors import ApiError, short_error
from extender.kube.client.rest_config import SERVICE_ACCOUNT_DIR
from extender.kube.client.watching import REQUEST_TIMEOUT, ListWatch
from extender.kube.errors import CertificateSetupError
from extender.serving.pure import certs

log = structlog.get_logger("archfit.webhook")

_NAMESPACE_FILE = SERVICE_ACCOUNT_DIR / "namespace"
ADMISSION_API = "/apis/admissionregistration.k8s.io/v1"
"""Where admission configurations and policies are served (admissionregistration.k8s.io/v1)."""
_MUTATING = f"{ADMISSION_API}/mutatingwebhookconfigurations"
_VALIDATING = f"{ADMISSION_API}/validatingwebhookconfigurations"
_RETRY_SECONDS = (1, 2, 5, 10, 30)


def own_namespace() -> str:
    """archfit's namespace: its service account's, or $POD_NAMESPACE (downward API)."""
    try:
        return _NAMESPACE_FILE.read_text(encoding="utf-8").strip()
    except OSError:
        pass
    namespace = os.environ.get("POD_NAMESPACE", "")
    if not namespace:
        raise CertificateSetupError(
            "webhook.certificate.secretNamespace is empty and archfit's own namespace is "
            f"unknown (no {_NAMESPACE_FILE}, no POD_NAMESPACE)"
        )
    return namespace


class SelfManagedCertificate:
    """Keeps the Secret, the certificate files and the caBundle in step."""

    def __init__(
        self,
        api: KubeApi,
        settings: WebhookSettings,
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self._api = api
        self._settings = settings
        self._cert = settings.certificate
        self._now = now
        self.namespace = self._cert.secret_namespace or own_namespace()
        self.expires: dt.datetime | None = None
        """When the serving certificate in use expires (for the expiry metric)."""
        self.first_pass = asyncio.Event()
        """Set once the first `ensure()` has finished, well or not."""

    def ensure(self) -> None:
        """One pass: Secret, files, caBundle. Blocking; run it in a thread."""
        bundle = self._stored_or_new()
        self._write_files(bundle.serving)
        self._trust(bundle.ca.cert)

    async def keep(self, on_change: Callable[[dt.datetime], None] | None = None) -> None:
        """Run `ensure()` until cancelled: every checkSeconds, sooner after a failure.

        Failures are logged, never raised: the extender in the same process must keep
        serving while the API server or RBAC is being fixed.
        """
        loop = asyncio.get_running_loop()
        changed = asyncio.Event()
        watches = [
            _ConfigurationWatch(
                self._api, path, name, lambda: loop.call_soon_threadsafe(changed.set)
            )
            for path, name in self._watched()
        ]
        try:
            for watch in watches:
                watch.start()
            await self._keep(changed, on_change)
        finally:
            for watch in watches:
                await watch.stop()

    async def _keep(
        self, changed: asyncio.Event, on_change: Callable[[dt.datetime], None] | None
    ) -> None:
        failures = 0
        while True:
            # Cleared before the pass: a change while it runs (its own patch, too) runs
            # one more, which finds nothing to do.
            changed.clear()
            try:
                await blocking(self.ensure)
                failures = 0
            except Exception as error:  # a passing API error must not end the loop
                log.error(
                    "webhook_certificate_failed",
                    error=short_error(error),
                    hint="check the RBAC of archfit's ServiceAccount on its Secret and "
                    "webhook configurations (deploy/kustomize/components/webhook)",
                )
                failures += 1
            self.first_pass.set()
            if on_change is not None and self.expires is not None:
                on_change(self.expires)
            delay = self._cert.check_seconds
            if failures:
                delay = min(delay, _RETRY_SECONDS[min(failures, len(_RETRY_SECONDS)) - 1])
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), delay)

    def _watched(self) -> list[tuple[str, str]]:
        """The collection paths and names of the configurations whose caBundle is kept."""
        watched = [(_MUTATING, self._cert.webhook_configuration)]
        if self._settings.workload_warnings.enabled and self._cert.validating_webhook_configuration:
            watched.append((_VALIDATING, self._cert.validating_webhook_configuration))
        return watched

    def _stored_or_new(self) -> certs.Bundle:
        secret = self._read_secret()
        stored = _bundle_of(secret)
        now = self._now()
        why = certs.needs_renewal(stored, self._cert.hosts, now) if stored else "none stored"
        if why is None and stored is not None:
            self._note_expiry(stored)
            return stored
        ca = stored.ca if stored and certs.ca_usable(stored.ca, now) else certs.new_ca(now)
        serving = certs.new_serving(ca, self._cert.hosts, now, self._cert.validity_days)
        fresh = certs.Bundle(ca, serving)
        log.info("webhook_certificate_issued", reason=why, secret=self._cert.secret_name)
        try:
            self._store(secret, fresh)
        except ApiError as error:
            if error.status != HTTPStatus.CONFLICT:
                raise CertificateSetupError(f"cannot store Secret: {_api_error(error)}") from error
            # Another replica wrote first: use its pair, so all serve the same CA.
            theirs = _bundle_of(self._read_secret())
            if theirs is None:
                raise CertificateSetupError("Secret changed under us and is unreadable") from error
            fresh = theirs
        self._note_expiry(fresh)
        return fresh

    def _secret_path(self, name: str = "") -> str:
        collection = f"/api/v1/namespaces/{self.namespace}/secrets"
        return f"{collection}/{name}" if name else collection

    def _read_secret(self) -> dict[str, Any] | None:
        try:
            secret: dict[str, Any] = self._api.get(
                self._secret_path(self._cert.secret_name), timeout=REQUEST_TIMEOUT
            )
        except ApiError as error:
            if error.status == HTTPStatus.NOT_FOUND:
                return None
            raise CertificateSetupError(f"cannot read Secret: {_api_error(error)}") from error
        return secret

    def _store(self, existing: dict[str, Any] | None, bundle: certs.Bundle) -> None:
        data = {
            "tls.crt": bundle.serving.cert,
            "tls.key": bundle.serving.key,
            "ca.crt": bundle.ca.cert,
            "ca.key": bundle.ca.key,
        }
        metadata: dict[str, Any] = {
            "name": self._cert.secret_name,
            "namespace": self.namespace,
            "labels": {"app.kubernetes.io/name": "archfit"},
        }
        if existing is not None:
            # On an update, resourceVersion makes a concurrent writer's update fail (409).
            metadata["resourceVersion"] = (existing.get("metadata") or {}).get("resourceVersion")
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/tls",
            "metadata": metadata,
            "data": {k: base64.b64encode(v).decode("ascii") for k, v in data.items()},
        }
        if existing is None:
            self._api.post(self._secret_path(), body, timeout=REQUEST_TIMEOUT)
            return
        self._api.put(self._secret_path(self._cert.secret_name), body, timeout=REQUEST_TIMEOUT)

    def _write_files(self, serving: certs.KeyPair) -> None:
        for path, content in (
            (Path(self._settings.key_file), serving.key),
            (Path(self._settings.cert_file), serving.cert),
        ):
            if path.is_file() and path.read_bytes() == content:
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            # Write then rename, so the listener never reads half a file.
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as out:
                out.write(content)
            os.chmod(tmp, 0o600)
            os.replace(tmp, path)

    def _trust(self, ca_pem: bytes) -> None:
        """Set every webhook's clientConfig.caBundle to our CA, in the mutating configuration
        and, with the workload warnings on, in their validating one (when named)."""
        self._trust_in(
            "MutatingWebhookConfiguration", _MUTATING, self._cert.webhook_configuration, ca_pem
        )
        if self._settings.workload_warnings.enabled and self._cert.validating_webhook_configuration:
            self._trust_in(
                "ValidatingWebhookConfiguration",
                _VALIDATING,
                self._cert.validating_webhook_configuration,
                ca_pem,
            )

    def _trust_in(self, kind: str, collection: str, name: str, ca_pem: bytes) -> None:
        try:
            configuration = self._api.get(f"{collection}/{name}", timeout=REQUEST_TIMEOUT)
        except ApiError as error:
            if error.status == HTTPStatus.NOT_FOUND:
                log.warning("webhook_configuration_missing", kind=kind, name=name)
                return
            raise CertificateSetupError(
                f"cannot read {kind} {name}: {_api_error(error)}"
            ) from error
        version = (configuration.get("metadata") or {}).get("resourceVersion")
        stale = [
            index
            for index, hook in enumerate(configuration.get("webhooks") or ())
            if _decoded((hook.get("clientConfig") or {}).get("caBundle")) != ca_pem
        ]
        if not stale:
            return
        encoded = base64.b64encode(ca_pem).decode("ascii")
        # A JSON patch guarded by `test` on resourceVersion: no lost update on a race.
        patch: list[dict[str, Any]] = [
            {
                "op": "test",
                "path": "/metadata/resourceVersion",
                "value": version,
            }
        ]
        patch += [
            {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": encoded}
            for i in stale
        ]
        try:
            self._api.patch(
                f"{collection}/{name}", patch, content_type=JSON_PATCH, timeout=REQUEST_TIMEOUT
            )
        except ApiError as error:
            # Changed meanwhile: the next pass retries.
            if error.status in (HTTPStatus.CONFLICT, HTTPStatus.UNPROCESSABLE_ENTITY):
                log.info("webhook_ca_bundle_race", kind=kind, name=name)
                return
            raise CertificateSetupError(
                f"cannot set the caBundle of {kind} {name}: {_api_error(error)}"
            ) from error
        log.info("webhook_ca_bundle_set", kind=kind, name=name, webhooks=len(stale))

    def _note_expiry(self, bundle: certs.Bundle) -> None:
        self.expires = certs.not_after(bundle.serving.cert)


class _Meta(msgspec.Struct, rename="camel", frozen=True):
    resource_version: str = ""


class _Object(msgspec.Struct, frozen=True):
    metadata: _Meta = _Meta()


_decode_object = msgspec.json.Decoder(_Object).decode


class _ConfigurationWatch:
    """A list-watch, in a thread, of one webhook configuration by name (a field selector,
    which RBAC limited to that name requires): `changed()` on each change after the first
    list, and on each list again (a change may have been missed)."""

    def __init__(self, api: KubeApi, path: str, name: str, changed: Callable[[], Any]):
        self._api, self._path, self._changed = api, path, changed
        self._selector = f"metadata.name={name}"
        self._lists = 0
        self._watch = ListWatch(
            "archfit-ca-bundle",
            self._list,
            self._watch_from,
            log,
            ("webhook_configuration_watch_expired", "webhook_configuration_watch_failed"),
        )

    def start(self) -> None:
        self._watch.start()

    async def stop(self) -> None:
        await self._watch.stop()

    def _list(self) -> str:
        listed = self._api.get(
            self._path, query={"fieldSelector": self._selector}, timeout=REQUEST_TIMEOUT
        )
        self._lists += 1
        if self._lists > 1:
            self._changed()
        return str((listed.get("metadata") or {}).get("resourceVersion") or "")

    def _watch_from(self, version: str) -> str:
        return self._watch.follow(
            self._api, self._path, version, self._apply, {"fieldSelector": self._selector}
        )

    def _apply(self, kind: str, raw: msgspec.Raw, version: str) -> str:
        if kind in ("ADDED", "MODIFIED"):
            self._changed()
        return _decode_object(raw).metadata.resource_version or version


def _bundle_of(secret: dict[str, Any] | None) -> certs.Bundle | None:
    data = (secret or {}).get("data")
    if not data:
        return None
    try:
        raw = {k: base64.b64decode(v, validate=True) for k, v in data.items()}
        return certs.Bundle(
            certs.KeyPair(raw["ca.crt"], raw["ca.key"]),
            certs.KeyPair(raw["tls.crt"], raw["tls.key"]),
        )
    except (KeyError, binascii.Error, ValueError):
        return None  # a broken Secret is replaced, not trusted


def _decoded(ca_bundle: str | bytes | None) -> bytes:
    if not ca_bundle:
        return b""
    try:
        return base64.b64decode(ca_bundle)
    except (binascii.Error, ValueError):
        return b""


def _api_error(error: ApiError) -> str:
    return f"{error.status} {error.reason}"
