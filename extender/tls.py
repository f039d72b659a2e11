"""A server TLS context whose certificate follows its files, so rotation needs no restart.

Secrets mounted by kubelet, cert-manager renewals and archfit's own self-managed
certificate all replace the files in place. Each handshake picks the context built
from the newest pair that loaded cleanly; a half-written pair keeps the old one.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from pathlib import Path

import structlog

log = structlog.get_logger("archfit.tls")


class ReloadingCertificate:
    """Serves `cert_file`/`key_file`, checking them for changes on `reload()`."""

    def __init__(
        self, cert_file: str | Path, key_file: str | Path, client_ca_file: str | Path = ""
    ) -> None:
        self.cert_file = Path(cert_file)
        self.key_file = Path(key_file)
        self.client_ca_file = Path(client_ca_file) if client_ca_file else None
        """With it, every handshake must present a client certificate this CA signed."""
        self._stamp: tuple[object, ...] | None = None
        self._current: ssl.SSLContext | None = None
        self.loads = 0
        """How many times a new pair was loaded (the first one included)."""
        # The listener's own context only hands each handshake the newest context:
        # a context cannot drop a certificate, and loading a pair into a live one
        # could leave a new certificate beside an old key if the key fails to load.
        self.context = self._new_context()
        self.context.sni_callback = self._pick

    @property
    def ready(self) -> bool:
        """Whether a certificate is loaded and handshakes can succeed."""
        return self._current is not None

    def load(self) -> None:
        """Load the pair now; raises OSError or ssl.SSLError if it is missing or broken."""
        stamp = self._read_stamp()
        context = self._new_context()
        context.load_cert_chain(self.cert_file, self.key_file)
        self._current, self._stamp = context, stamp
        self.loads += 1

    def reload(self) -> bool:
        """Load the pair again if either file changed; True when a new pair is in use.

        A pair that fails to load (mid-rotation, or broken) is logged and the old one
        stays in use, so a bad rotation never takes the listener down.
        """
        try:
            if self._read_stamp() == self._stamp:
                return False
            self.load()
        except (OSError, ssl.SSLError) as error:
            log.warning(
                "tls_certificate_reload_failed", cert_file=str(self.cert_file), error=str(error)
            )
            return False
        log.info("tls_certificate_reloaded", cert_file=str(self.cert_file))
        return True

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
