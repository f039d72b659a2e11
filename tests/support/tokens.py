"""A Bearer token server whose JWTs distribution's `auth: token` accepts.

A throwaway CA signs a leaf key; tokens carry the leaf in `x5c` and the registry trusts
the CA through `rootcertbundle`. The server runs in a thread, so any fixture can use it.
"""

from __future__ import annotations

import base64
import json
import secrets
import ssl
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tests.support.registry import TokenAuthConfig
from tests.support.tls import issue, write_cert

SERVICE = "archfit-test-registry"
ISSUER = "archfit-test-issuer"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class TokenIssuer:
    """Mints RS256 JWTs for the registry and writes the CA bundle it must trust."""

    def __init__(self, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        ca = issue("archfit test token CA", ca_key, ca_key, days=1)
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        leaf = issue("archfit test token signer", self._key, ca_key, ca, days=1)
        self.root_cert_bundle = write_cert(ca, workdir / "token-ca.pem")
        self._x5c = [base64.b64encode(leaf.public_bytes(serialization.Encoding.DER)).decode()]

    def mint(
        self, subject: str, access: list[tuple[str, list[str]]], *, lifetime: int = 300
    ) -> str:
        """A token granting `access` ([(repository, actions)]) for `lifetime` seconds.

        A negative lifetime makes a token the registry rejects as `invalid_token`.
        """
        now = int(time.time())
        header = {"typ": "JWT", "alg": "RS256", "x5c": self._x5c}
        claims = {
            "iss": ISSUER,
            "sub": subject,
            "aud": SERVICE,
            "exp": now + lifetime,
            "nbf": now - 10 if lifetime > 0 else now + lifetime - 10,
            "iat": now,
            "jti": secrets.token_hex(8),
            "access": [
                {"type": "repository", "name": repo, "actions": actions} for repo, actions in access
            ],
        }
        signing_input = ".".join(
            _b64url(json.dumps(part, separators=(",", ":")).encode()) for part in (header, claims)
        )
        signature = self._key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64url(signature)}"


@dataclass
class TokenPolicy:
    """How the token server behaves; tests change it between requests."""

    users: dict[str, str] = field(default_factory=dict)
    """user → password accepted in Basic auth on the token endpoint."""
    public_prefixes: tuple[str, ...] = ()
    """Repositories anonymous callers may pull."""
    field_name: str = "token"
    """`token`, `access_token`, or `both`."""
    expires_in: int | None = 300
    """Reported lifetime; None omits it (clients must assume 60 s)."""
    stale_tokens: int = 0
    """Issue this many already-expired tokens first (to provoke `invalid_token`)."""


@dataclass(frozen=True)
class TokenRequest:
    """One call to the token endpoint."""

    user: str | None
    scopes: tuple[str, ...]
    service: str


class TokenServer:
    """`GET /token` on 127.0.0.1, in a daemon thread; use as a context manager."""

    def __init__(
        self,
        issuer: TokenIssuer,
        policy: TokenPolicy | None = None,
        tls: tuple[Path, Path] | None = None,
    ) -> None:
        """`tls`: (certificate, key) to serve HTTPS with, as public token servers do (a
        client may refuse an https registry's plain-HTTP realm: regclient does)."""
        self.issuer = issuer
        self.policy = policy or TokenPolicy()
        self.requests: list[TokenRequest] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._scheme = "http"
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
            self._scheme = "https"
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def realm(self) -> str:
        """The realm URL the registry puts in its Bearer challenge."""
        host, port = self._server.server_address[:2]
        return f"{self._scheme}://{host!s}:{port}/token"

    def registry_config(self) -> TokenAuthConfig:
        """What `RegistryProcess.start(token=...)` needs."""
        return TokenAuthConfig(self.realm, SERVICE, ISSUER, self.issuer.root_cert_bundle)

    def push_token(self, repo: str) -> str:
        """A push+pull token for fixtures that upload images."""
        return self.issuer.mint("pusher", [(repo, ["pull", "push"])])

    def __enter__(self) -> TokenServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _answer(self, query: str, authorization: str | None) -> tuple[int, dict[str, Any]]:
        params = urllib.parse.parse_qs(query)
        scopes = tuple(params.get("scope", []))
        user = None
        if authorization is not None:
            user = self._check_basic(authorization)
            if user is None:
                return 401, {"details": "incorrect username or password"}
        with self._lock:
            self.requests.append(TokenRequest(user, scopes, params.get("service", [""])[0]))
            stale = self.policy.stale_tokens > 0
            if stale:
                self.policy.stale_tokens -= 1
        access = []
        for scope in scopes:
            kind, _, rest = scope.partition(":")
            repo, _, actions = rest.rpartition(":")
            allowed = user is not None or repo.startswith(self.policy.public_prefixes)
            if kind == "repository" and allowed:
                access.append((repo, [a for a in actions.split(",") if a == "pull"]))
        token = self.issuer.mint(user or "anonymous", access, lifetime=-300 if stale else 300)
        body: dict[str, Any] = {}
        if self.policy.field_name in ("token", "both"):
            body["token"] = token
        if self.policy.field_name in ("access_token", "both"):
            body["access_token"] = token
        if self.policy.expires_in is not None:
            body["expires_in"] = self.policy.expires_in
        return 200, body

    def _check_basic(self, authorization: str) -> str | None:
        scheme, _, encoded = authorization.partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            user, _, password = base64.b64decode(encoded).decode().partition(":")
        except ValueError:
            return None
        expected = self.policy.users.get(user)
        if expected is None or not secrets.compare_digest(expected, password):
            return None
        return user

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path, _, query = self.path.partition("?")
                status, body = (
                    (404, {})
                    if path != "/token"
                    else server._answer(query, self.headers.get("Authorization"))
                )
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: pytest output is for failures."""

        return Handler
