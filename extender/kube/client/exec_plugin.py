"""client-go credential plugins (a kubeconfig user's `exec`), run as client-go runs them.

The plugin is a program: it gets the process's environment plus the user's `env` and
KUBERNETES_EXEC_INFO (an ExecCredential: whether it may prompt, and with provideClusterInfo
the cluster), and prints an ExecCredential whose status holds a token and/or a client
certificate and key, and when they expire. The answer is kept until then; a 401 runs it
again. Its standard input is the terminal only when it may prompt: `interactiveMode` Never,
IfAvailable (when stdin is a terminal) or Always (refused without one). Errors are worded
as client-go words them.
"""

from __future__ import annotations

import base64
import datetime
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from extender.kube.client import yaml_values
from extender.kube.client.errors import CredentialUnavailable, KubeConfigError
from extender.kube.client.rest_config import ExecConfig

EXEC_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
INSTALL_HELP = (
    "\n\nIt looks like you are trying to use a client-go credential plugin that is not "
    "installed.\n\nTo learn more about this feature, consult the documentation available at:"
    "\n      https://kubernetes.io/docs/reference/access-authn-authz/authentication/"
    "#client-go-credential-plugins"
)


@dataclass(frozen=True, slots=True)
class ExecCredentials:
    """What a plugin returned: a token, a client certificate and key (PEM), or both."""

    token: str = ""
    cert_pem: bytes = b""
    key_pem: bytes = b""


def stdin_is_terminal() -> bool:
    try:
        return os.isatty(sys.stdin.fileno())
    except (AttributeError, OSError, ValueError):
        return False


class ExecPlugin:
    """One user's plugin: run when no answer is kept or the kept one expired."""

    def __init__(
        self,
        config: ExecConfig,
        cluster: Mapping[str, Any] | None,
        environ: Mapping[str, str],
        *,
        is_terminal: Callable[[], bool] = stdin_is_terminal,
        now: Callable[[], float] = time.time,
    ) -> None:
        """Raises KubeConfigError for an API version client-go does not speak."""
        if config.api_version not in EXEC_VERSIONS:
            raise KubeConfigError(f'exec plugin: invalid apiVersion "{config.api_version}"')
        self.config = config
        self._cluster = cluster
        self._environ = environ
        self._is_terminal = is_terminal
        self._now = now
        self._lock = threading.Lock()
        self._kept: ExecCredentials | None = None
        self._expires: float | None = None

    def credentials(self) -> ExecCredentials:
        """The kept answer, or a new one. Raises CredentialUnavailable."""
        with self._lock:
            if self._kept is not None and not (
                self._expires is not None and self._now() > self._expires
            ):
                return self._kept
            return self._refresh()

    def unauthorized(self, used: ExecCredentials) -> None:
        """The server refused `used`: run the plugin again, unless another call already did."""
        with self._lock:
            if used is self._kept:
                self._refresh()

    def _interactive(self) -> bool:
        mode = self.config.interactive_mode
        if mode == "Never":
            return False
        if mode == "IfAvailable":
            return self._is_terminal()
        if mode == "Always":
            if not self._is_terminal():
                raise CredentialUnavailable(
                    "exec plugin cannot support interactive mode: standard input is not a terminal"
                )
            return True
        raise CredentialUnavailable(
            f'exec plugin cannot support interactive mode: unknown interactiveMode: "{mode}"'
        )

    def _refresh(self) -> ExecCredentials:
        interactive = self._interactive()
        spec: dict[str, Any] = {"interactive": interactive}
        if self.config.provide_cluster_info and self._cluster is not None:
            spec["cluster"] = self._cluster
        info = {"kind": "ExecCredential", "apiVersion": self.config.api_version, "spec": spec}
        env = {**self._environ, **{e.name: e.value for e in self.config.env}}
        env["KUBERNETES_EXEC_INFO"] = orjson.dumps(info).decode()
        command = os.path.normpath(self.config.command) if self.config.command else ""
        found = (
            command if "/" in command else shutil.which(command, path=self._environ.get("PATH", ""))
        )
        if not found or not os.access(found, os.X_OK) or os.path.isdir(found):
            hint = f"\n\n{self.config.install_hint}" if self.config.install_hint else ""
            raise CredentialUnavailable(f"exec: executable {command} not found{INSTALL_HELP}{hint}")
        try:
            # The kubeconfig names the program, and kubectl runs it just so.
            done = subprocess.run(  # noqa: S603
                [found, *self.config.args],
                env=env,
                stdin=None if interactive else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                check=False,
            )
        except OSError as error:
            raise CredentialUnavailable(f"exec: {error}") from error
        if done.returncode != 0:
            raise CredentialUnavailable(
                f"exec: executable {command} failed with exit code {done.returncode}"
            )
        credentials, expires = self._read(done.stdout)
        self._kept, self._expires = credentials, expires
        return credentials

    def _read(self, output: bytes) -> tuple[ExecCredentials, float | None]:
        try:
            answer = yaml_values.first_document(output)
        except yaml_values.YAMLError as error:
            raise CredentialUnavailable(f"decoding stdout: {error}") from error
        if not isinstance(answer, dict):
            raise CredentialUnavailable("decoding stdout: Object 'Kind' is missing")
        if not answer.get("kind"):
            raise CredentialUnavailable("decoding stdout: Object 'Kind' is missing")
        version = answer.get("apiVersion")
        if version != self.config.api_version:
            raise CredentialUnavailable(
                f"exec plugin is configured to use API version {self.config.api_version}, "
                f"plugin returned version {version}"
            )
        if answer.get("kind") != "ExecCredential":
            raise CredentialUnavailable(
                f'decoding stdout: no kind "{answer.get("kind")}" is registered'
            )
        status = answer.get("status")
        if status is None:
            raise CredentialUnavailable("exec plugin didn't return a status field")
        if not isinstance(status, dict):
            raise CredentialUnavailable("decoding stdout: status is not an object")
        token = _string(status, "token")
        cert, key = _string(status, "clientCertificateData"), _string(status, "clientKeyData")
        if not token and not cert and not key:
            raise CredentialUnavailable("exec plugin didn't return a token or cert/key pair")
        if bool(cert) != bool(key):
            raise CredentialUnavailable("exec plugin returned only certificate or key, not both")
        expires = _timestamp(status.get("expirationTimestamp"))
        if cert:
            _check_pair(cert.encode(), key.encode())
        return ExecCredentials(token, cert.encode(), key.encode()), expires


def _string(status: Mapping[str, Any], key: str) -> str:
    value = status.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise CredentialUnavailable(f"decoding stdout: status.{key} is not a string")
    return value


def _timestamp(value: Any) -> float | None:
    """metav1.Time from RFC 3339 (null or "" is none)."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise CredentialUnavailable("decoding stdout: expirationTimestamp is not a string")
    try:
        when = datetime.datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError as error:
        raise CredentialUnavailable(f"decoding stdout: {error}") from error
    if when.tzinfo is None:
        raise CredentialUnavailable(f"decoding stdout: {value!r} has no time zone")
    return when.timestamp()


def _check_pair(cert: bytes, key: bytes) -> None:
    """tls.X509KeyPair's check that the certificate and key go together."""
    from extender.kube.client.tls import load_pair

    try:
        load_pair(cert, key)
    except ValueError as error:
        raise CredentialUnavailable(f"failed parsing client key/certificate: {error}") from error


def cluster_info(
    server: str,
    *,
    server_name: str,
    insecure: bool,
    ca_data: bytes,
    proxy_url: str,
    disable_compression: bool,
    config: Any,
) -> dict[str, Any]:
    """The ExecCredential's `spec.cluster` (rest.ConfigToExecCluster), as JSON values."""
    cluster: dict[str, Any] = {"server": server}
    if server_name:
        cluster["tls-server-name"] = server_name
    if insecure:
        cluster["insecure-skip-tls-verify"] = True
    if ca_data:
        cluster["certificate-authority-data"] = base64.b64encode(ca_data).decode()
    if proxy_url:
        cluster["proxy-url"] = proxy_url
    if disable_compression:
        cluster["disable-compression"] = True
    cluster["config"] = config
    return cluster
