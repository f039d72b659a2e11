"""A server TLS context whose certificate follows its files, so rotation needs no restart.

Secrets mounted by kubelet, cert-manager renewals and archfit's own self-managed
certificate all replace the files in place. Each handshake picks the context built
from the newest pair that loaded cleanly and can serve: a half-written pair, or one that
kube-apiserver's client would refuse (a key that is not the certificate's, expired, not yet
valid, not for server use, or without the names served so far), keeps the old one.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import ssl
from collections.abc import Callable, Sequence
from pathlib import Path

import structlog

from extender.errors import ArchfitError

log = structlog.get_logger("archfit.tls")


class CertificateRefused(ArchfitError, ValueError):
    """The pair cannot serve (a key that is not the certificate's, expired, not yet valid,
    not for server use, wrong names); the message says why and what to do."""


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class ReloadingCertificate:
    """Serves `cert_file`/`key_file`, checking them for changes on `reload()`.

    `names`: hosts every certificate must name; without them, a rotated certificate must
    name what the one it replaces named (clients keep asking for those). `on_loaded` hears
    the expiry of each pair put in use, `on_refused` each pair refused. `client_ca_file`:
    every client must present a certificate that CA signed (mutual TLS).
    """

    def __init__(
        self,
        cert_file: str | Path,
        key_file: str | Path,
        *,
        names: Sequence[str] = (),
        clock: Callable[[], dt.datetime] = _now,
        on_loaded: Callable[[dt.datetime], None] | None = None,
        on_refused: Callable[[], None] | None = None,
        client_ca_file: str | Path = "",
    ) -> None:
        self.cert_file = Path(cert_file)
        self.key_file = Path(key_file)
        self.client_ca_file = Path(client_ca_file) if client_ca_file else None
        """With it, every handshake must present a client certificate this CA signed."""
        self._names = tuple(names)
        self._clock = clock
        self._on_loaded = on_loaded
        self._on_refused = on_refused
        self._stamp: tuple[object, ...] | None = None
        self._current: ssl.SSLContext | None = None
        self._served_names: frozenset[str] = frozenset()
        self.not_after: dt.datetime | None = None
        """When the certificate in use expires."""
        self.loads = 0
        """How many times a new pair was loaded (the first one included)."""
        self.problem: str | None = None
        """Why the last pair tried is not in use, and what to do; None once one is."""
        # The listener's own context only hands each handshake the newest context:
        # a context cannot drop a certificate, and loading a pair into a live one
        # could leave a new certificate beside an old key if the key fails to load.
        self.context = self._new_context()
        self.context.sni_callback = self._pick

    @property
    def ready(self) -> bool:
        """Whether a certificate is in use and still valid, so handshakes can succeed."""
        return (
            self._current is not None
            and self.not_after is not None
            and self._clock() < self.not_after
        )

    def load(self) -> None:
        """Load the pair now; raises OSError or ssl.SSLError if it is missing or broken,
        CertificateRefused if it cannot serve."""
        # Here, not at the top: plain HTTP serving loads no cryptography (docs/architecture.md).
        from extender.serving.pure import certs

        stamp = self._read_stamp()
        context = self._new_context()
        try:
            context.load_cert_chain(self.cert_file, self.key_file)
        except ssl.SSLError as error:
            if error.reason != "KEY_VALUES_MISMATCH":
                raise
            self._stamp = stamp
            raise CertificateRefused(
                f"{self.cert_file}: {self.key_file} is not this certificate's key; give the key"
                " it was made with (tls.key of the same Secret, or of the same openssl run)"
            ) from error
        pem = self.cert_file.read_bytes()
        required = self._names or sorted(self._served_names)
        problem = certs.serving_problem(pem, required, self._clock())
        if problem is not None:
            # Remembered, so the same refused pair is not read and logged every interval.
            self._stamp = stamp
            raise CertificateRefused(f"{self.cert_file}: {problem}")
        self._current, self._stamp, self.problem = context, stamp, None
        self._served_names = certs.san_names(pem)
        self.not_after = certs.not_after(pem)
        self.loads += 1
        if self._on_loaded is not None:
            self._on_loaded(self.not_after)

    def reload(self) -> bool:
        """Load the pair again if either file changed; True when a new pair is in use.

        A pair that fails to load (mid-rotation, or broken) or cannot serve is logged and
        the old one stays in use, so a bad rotation never takes the listener down.
        """
        try:
            if self._read_stamp() == self._stamp:
                return False
            self.load()
        except CertificateRefused as error:
            log.warning("tls_certificate_refused", cert_file=str(self.cert_file), error=str(error))
            self._remember(str(error))
            if self._on_refused is not None:
                self._on_refused()
            return False
        except (OSError, ssl.SSLError) as error:
            log.warning(
                "tls_certificate_reload_failed", cert_file=str(self.cert_file), error=str(error)
            )
            self._remember(
                f"cannot load {self.cert_file} and {self.key_file}: {error}; mount the"
                " certificate's Secret there (PEM certificate and key)"
            )
            return False
        log.info("tls_certificate_reloaded", cert_file=str(self.cert_file))
        return True

    def _remember(self, problem: str) -> None:
        # Only while nothing serves: a refused rotation leaves the old pair in use, ready.
        if self._current is None:
            self.problem = problem

    async def watch(self, interval: float) -> None:
        """Call reload() every `interval` seconds until cancelled."""
        while True:
            await asyncio.sleep(interval)
            self.reload()

    def _read_stamp(self) -> tuple[object, ...]:
        # stat() follows the ..data symlink swap kubelet does for Secret volumes.
        stamps: list[object] = []
        for path in (self.cert_file, self.key_file, *filter(None, [self.client_ca_file])):
            st = os.stat(path)
            stamps += [st.st_ino, st.st_dev, st.st_mtime_ns, st.st_size]
        return tuple(stamps)

    def _pick(self, sock: ssl.SSLObject, server_name: str | None, _: ssl.SSLContext) -> None:
        # OpenSSL calls this for every ClientHello, with or without SNI
        # (kube-apiserver sends none when the webhook URL names an IP address).
        if self._current is not None:
            sock.context = self._current

    def _new_context(self) -> ssl.SSLContext:
        context = _server_context()
        if self.client_ca_file is not None:
            # On the listener's context and on each pair's: which one OpenSSL verifies the
            # client with depends on when the SNI callback swaps them. Raises if unreadable.
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(cafile=self.client_ca_file)
        return context


def _server_context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context
