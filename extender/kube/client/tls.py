"""TLS to the API server as client-go's transport sets it up (transport.TLSConfigFor).

- Trust: the CA (data, else the file's content) as `x509.CertPool.AppendCertsFromPEM` reads
  it (the CERTIFICATE blocks that parse; text around them is skipped), refused when none
  does; a CA file that is empty trusts nothing; no CA at all trusts the system's. A CA file
  is read again every CA_REREAD_SECONDS and a changed, usable one replaces the old.
- A CA together with skipping verification is refused, as client-go refuses it.
- The client certificate: given as data (or a file with its key as data) it is loaded at
  once and a bad pair is an error now; given as two files they are read again for each
  request, so a renewed pair is used (a new context, and a new pool of connections) and a bad
  one fails the request, as client-go's handshake fails.

A context is never changed once built: connections in several threads handshake with it at
once, and OpenSSL does not allow loading into a context while it is in use (it crashes the
process). Whatever changes makes a new context.
"""

from __future__ import annotations

import os
import ssl
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from extender.kube.client.errors import CredentialUnavailable, KubeConfigError

CA_REREAD_SECONDS = 300.0
"""How often a CA file is read again (client-go's atomicTransportHolder, 5 minutes)."""
_BEGIN, _END = b"-----BEGIN ", b"-----END "


def pem_blocks(data: bytes) -> list[tuple[str, bool, bytes]]:
    """(type, has headers, DER) of each PEM block, as encoding/pem.Decode finds them."""
    import base64
    import binascii

    found = []
    rest = data
    while True:
        start = rest.find(_BEGIN)
        if start < 0:
            break
        rest = rest[start:]
        line_end = rest.find(b"\n")
        header = rest[len(_BEGIN) : line_end if line_end >= 0 else len(rest)].rstrip(b"\r")
        if not header.endswith(b"-----") or line_end < 0:
            rest = rest[len(_BEGIN) :]
            continue
        kind = header[: -len(b"-----")]
        end_marker = _END + kind + b"-----"
        end = rest.find(end_marker, line_end)
        if end < 0:
            rest = rest[len(_BEGIN) :]
            continue
        body = rest[line_end + 1 : end]
        rest = rest[end + len(end_marker) :]
        headers = b":" in body.split(b"\n\n", 1)[0] if b"\n\n" in body else False
        text = body.split(b"\n\n", 1)[1] if headers else body
        try:
            der = base64.b64decode(b"".join(text.split()), validate=True)
        except (binascii.Error, ValueError):
            continue
        found.append((kind.decode(errors="replace"), headers, der))
    return found


def certificates(data: bytes) -> list[bytes]:
    """The DER certificates of PEM `data` that parse, as AppendCertsFromPEM takes them
    (OpenSSL parses each; cryptography is not loaded for it)."""
    found = []
    for kind, headers, der in pem_blocks(data):
        if kind != "CERTIFICATE" or headers:
            continue
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cadata=der)
        except (ssl.SSLError, ValueError):
            continue
        found.append(der)
    return found


def _written(folder: str, name: str, data: bytes) -> str:
    """`data` in a file of `folder` only its owner reads."""
    path = os.path.join(folder, name)
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
        out.write(data)
    return path


def load_pair(cert: bytes, key: bytes, context: ssl.SSLContext | None = None) -> None:
    """Load a PEM certificate chain and its key into `context` (a scratch one when None):
    OpenSSL reads keys from files only, so they pass through a private temporary folder.
    Raises ValueError when they do not make a pair."""
    target = context or ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    with tempfile.TemporaryDirectory(prefix="archfit-") as folder:
        try:
            target.load_cert_chain(
                _written(folder, "tls.crt", cert), _written(folder, "tls.key", key)
            )
        except ssl.SSLError as error:
            raise ValueError(f"tls: {error.reason or error}") from error


@dataclass(frozen=True, slots=True)
class TLSSettings:
    """What the transport's TLS is made of."""

    insecure: bool = False
    server_name: str = ""
    ca_file: str = ""
    ca_data: bytes = b""
    cert_file: str = ""
    cert_data: bytes = b""
    key_file: str = ""
    key_data: bytes = b""

    @property
    def has_ca(self) -> bool:
        return bool(self.ca_file or self.ca_data)

    @property
    def reloads_pair(self) -> bool:
        """Both halves are files: read again for each request (client-go's ReloadTLSFiles
        reads them at each handshake)."""
        return bool(self.cert_file and self.key_file and not self.cert_data and not self.key_data)


class TrustedContext:
    """The SSL context for one server, rebuilt when its CA file changes or a credential
    plugin hands out another client certificate. `generation` counts the rebuilds, so a
    connection pool knows when to start afresh."""

    def __init__(
        self,
        settings: TLSSettings,
        *,
        plugin_pair: Callable[[], tuple[bytes, bytes]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Raises KubeConfigError for what client-go refuses when it builds its transport."""
        if settings.has_ca and settings.insecure:
            raise KubeConfigError(
                "specifying a root certificates file with the insecure flag is not allowed"
            )
        self.settings = settings
        self._plugin_pair = plugin_pair
        self._clock = clock
        self._lock = threading.Lock()
        self._ca = self._read_ca()
        self._ca_checked = clock()
        self._pair = self._static_pair()
        self.generation = 0
        self._context = self._build(self._pair)
        self._plugin_asked = False
        """Whether the plugin was asked yet: client-go runs it at the first handshake."""

    def _read_ca(self) -> bytes:
        if self.settings.ca_data:
            return self.settings.ca_data
        if not self.settings.ca_file:
            return b""
        try:
            return Path(self.settings.ca_file).read_bytes()
        except OSError as error:
            raise KubeConfigError(f"open {self.settings.ca_file}: {error.strerror}") from error

    def trusted(self) -> list[bytes] | None:
        """The DER certificates trusted, or None for the system's."""
        if not self.settings.has_ca:
            return None
        if not self._ca:
            return []  # an empty CA file: client-go's empty pool trusts nothing
        found = certificates(self._ca)
        if not found:
            raise KubeConfigError("unable to load root certificates: no valid certificate "
                                  "authority data seen")  # fmt: skip
        return found

    def _static_pair(self) -> tuple[bytes, bytes] | None:
        """The client pair client-go loads when it builds the transport (not two files)."""
        s = self.settings
        if not ((s.cert_file or s.cert_data) and (s.key_file or s.key_data)) or s.reloads_pair:
            return None
        try:
            cert = s.cert_data or Path(s.cert_file).read_bytes()
            key = s.key_data or Path(s.key_file).read_bytes()
        except OSError as error:
            raise KubeConfigError(f"open {error.filename}: {error.strerror}") from error
        try:
            load_pair(cert, key)
        except ValueError as error:
            raise KubeConfigError(str(error)) from error
        return cert, key

    def _build(self, pair: tuple[bytes, bytes] | None) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        if self.settings.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        trusted = self.trusted()
        if trusted is None:
            context.load_default_certs()
        elif trusted:
            context.load_verify_locations(cadata=b"".join(trusted))
        if pair is not None:
            load_pair(*pair, context)
        return context

    def _file_pair(self) -> tuple[bytes, bytes]:
        """The two files' pair as they are now. Raises CredentialUnavailable when either
        cannot be read."""
        try:
            return (
                Path(self.settings.cert_file).read_bytes(),
                Path(self.settings.key_file).read_bytes(),
            )
        except OSError as error:
            raise CredentialUnavailable(f"open {error.filename}: {error.strerror}") from error

    def context(self) -> ssl.SSLContext:
        """The context to connect with now: a changed CA file, pair of files or plugin
        certificate makes a new one. Raises CredentialUnavailable when the plugin fails or
        the files cannot be read or do not make a pair."""
        with self._lock:
            pair = self._pair
            if self._plugin_pair is not None:
                cert, key = self._plugin_pair()
                pair = (cert, key) if cert else None
            elif self.settings.reloads_pair:
                pair = self._file_pair()
            changed = pair != self._pair or (
                self._plugin_pair is not None and not self._plugin_asked
            )
            self._plugin_asked = True
            if (
                self.settings.ca_file
                and not self.settings.ca_data
                and self._clock() - self._ca_checked >= CA_REREAD_SECONDS
            ):
                self._ca_checked = self._clock()
                try:
                    fresh = Path(self.settings.ca_file).read_bytes()
                except OSError:
                    fresh = b""
                if fresh and fresh != self._ca and certificates(fresh):
                    self._ca, changed = fresh, True
            if changed:
                try:
                    context = self._build(pair)
                except ValueError as error:  # a pair that does not match, or not PEM
                    raise CredentialUnavailable(f"client certificate: {error}") from error
                self._pair, self._context = pair, context
                self.generation += 1
            return self._context

    def client_pair(self) -> tuple[bytes, bytes] | None:
        """The certificate and key presented now, as PEM (None: none). For two files, read
        now; raises ValueError when they do not make a pair."""
        if self._plugin_pair is not None:
            cert, key = self._plugin_pair()
            return (cert, key) if cert else None
        if self.settings.reloads_pair:
            cert = Path(self.settings.cert_file).read_bytes()
            key = Path(self.settings.key_file).read_bytes()
            load_pair(cert, key)
            return cert, key
        return self._pair
