"""kubeconfig files read as kubectl reads them, without the `kubernetes` package when it can.

Several files (a $KUBECONFIG list) merge as kubectl merges them: the first file to name a
cluster, user or context wins, and so does the first current-context. A context whose user
is a token, a token file or a client certificate becomes a `Connection` here; any other user
(an exec plugin, an auth provider, a username and password) is left to
`kubernetes.config.load_kube_config`, the one case that imports the client package.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from extender.kube.connection import BearerToken, Connection, Credentials, TokenFile
from extender.kube.errors import KubeConfigError

NATIVE_USER_KEYS = frozenset({
    "token", "tokenFile",
    "client-certificate", "client-certificate-data", "client-key", "client-key-data",
})  # fmt: skip
"""The user fields read here. A user with any other field that authenticates (exec,
auth-provider, username...) goes to the `kubernetes` package."""
IGNORED_USER_KEYS = frozenset({"as", "as-uid", "as-groups", "as-user-extra", "extensions"})
"""Fields the `kubernetes` package ignores as well (impersonation): they need no fallback."""


@dataclass(frozen=True, slots=True)
class _Entry:
    """A named cluster, user or context, and the file that named it first (relative paths in
    it are relative to that file's folder)."""

    body: Mapping[str, Any]
    file: Path


@dataclass(slots=True)
class Kubeconfig:
    """The merged files: named entries, the current context, and the files in order."""

    files: list[Path]
    clusters: dict[str, _Entry] = field(default_factory=dict)
    users: dict[str, _Entry] = field(default_factory=dict)
    contexts: dict[str, _Entry] = field(default_factory=dict)
    current_context: str = ""

    def context_names(self) -> list[str]:
        """Every context, in file order."""
        return list(self.contexts)

    def context(self, name: str = "") -> Mapping[str, Any]:
        """The named context's body (the current one for ""); KubeConfigError if there is none."""
        chosen = name or self.current_context
        if not chosen:
            raise KubeConfigError(
                f"Invalid kube-config file. Expected key current-context in {self.files[0]}"
            )
        entry = self.contexts.get(chosen)
        if entry is None:
            raise KubeConfigError(
                f"Invalid kube-config file. Expected object with name {chosen} in "
                f"{self.files[0]}/contexts list"
            )
        return _section(entry.body.get("context"))

    def namespace(self, name: str = "") -> str:
        """The context's namespace, or ""."""
        return str(self.context(name).get("namespace") or "")

    def connection(self, name: str = "") -> Connection | None:
        """The context's API server and credentials, or None when its user needs the
        `kubernetes` package (an exec plugin, an auth provider, a password)."""
        context = self.context(name)
        cluster_name = str(context.get("cluster") or "")
        cluster = self.clusters.get(cluster_name)
        if cluster is None:
            raise KubeConfigError(
                "Invalid kube-config file. Expected object with name "
                f"{cluster_name} in {self.files[0]}/clusters list"
            )
        user_entry = self.users.get(str(context.get("user") or ""))
        user = _section(user_entry.body.get("user")) if user_entry else {}
        if set(user) - NATIVE_USER_KEYS - IGNORED_USER_KEYS:
            return None
        server = _section(cluster.body.get("cluster"))
        host = str(server.get("server") or "").rstrip("/")
        if not host:
            raise KubeConfigError(
                f"Invalid kube-config file. Expected key server in {cluster.file}/clusters"
                f"[name={cluster_name}]/cluster"
            )
        here = cluster.file.parent
        mine = user_entry.file.parent if user_entry else here
        tls = host.startswith("https")  # the client reads certificates for https only
        return Connection(
            host=host,
            ca_file=_path(server, "certificate-authority", here) if tls else "",
            ca_data=_pem(server, "certificate-authority-data").decode() if tls else "",
            cert_file=_path(user, "client-certificate", mine) if tls else "",
            key_file=_path(user, "client-key", mine) if tls else "",
            cert_data=_pem(user, "client-certificate-data") if tls else b"",
            key_data=_pem(user, "client-key-data") if tls else b"",
            verify=not server.get("insecure-skip-tls-verify", False),
            tls_server_name=str(server.get("tls-server-name") or ""),
            proxy=str(server.get("proxy-url") or ""),
            credentials=_credentials(user, mine),
        )


def read_kubeconfig(paths: str) -> Kubeconfig:
    """Merge the files of an os.pathsep-separated list (those that exist), as kubectl does.
    Raises KubeConfigError for a file that cannot be read or is no kubeconfig."""
    files = [
        Path(p).expanduser() for p in paths.split(os.pathsep) if p and Path(p).expanduser().exists()
    ]
    if not files:
        raise KubeConfigError("Invalid kube-config file. No configuration found.")
    merged = Kubeconfig(files)
    for file in files:
        try:
            loaded = yaml.safe_load(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
            raise KubeConfigError(f"Invalid kube-config file {file}: {error}") from error
        if loaded is None:
            raise KubeConfigError(f"Invalid kube-config. {file} file is empty")
        if not isinstance(loaded, Mapping):
            raise KubeConfigError(f"Invalid kube-config file {file}: not a mapping")
        for key, named in (
            ("clusters", merged.clusters),
            ("users", merged.users),
            ("contexts", merged.contexts),
        ):
            for item in loaded.get(key) or ():
                if not isinstance(item, Mapping) or "name" not in item:
                    raise KubeConfigError(
                        "Invalid kube-config file. Expected all values in "
                        f"{file}/{key} list to have 'name' key"
                    )
                named.setdefault(str(item["name"]), _Entry(item, file.absolute()))
        if not merged.current_context:
            merged.current_context = str(loaded.get("current-context") or "")
    return merged


def _credentials(user: Mapping[str, Any], here: Path) -> Credentials | None:
    """The token (written, or in a file read again as it changes), else None: a client
    certificate alone, or nobody. A written token wins, as in the `kubernetes` package."""
    if user.get("token"):
        return BearerToken(str(user["token"]))
    if user.get("tokenFile"):
        path = Path(_joined(here, str(user["tokenFile"])))
        if not path.is_file():
            raise KubeConfigError(f"File does not exist: {path}")
        return TokenFile(path)
    return None


def _path(section: Mapping[str, Any], key: str, here: Path) -> str:
    """A file named by the kubeconfig, relative to the file that names it; "" when the
    `-data` form is there too (data wins, as in the `kubernetes` package)."""
    if not section.get(key) or section.get(f"{key}-data"):
        return ""
    path = _joined(here, str(section[key]))
    if not os.path.isfile(path):
        raise KubeConfigError(f"File does not exist: {path}")
    return path


def _pem(section: Mapping[str, Any], key: str) -> bytes:
    """The base64 `-data` form decoded to PEM, or b""."""
    value = section.get(key)
    if not value:
        return b""
    try:
        return base64.b64decode(str(value), validate=True)
    except (binascii.Error, ValueError) as error:
        raise KubeConfigError(f"Invalid kube-config file: {key} is not base64") from error


def _joined(here: Path, name: str) -> str:
    return os.path.normpath(os.path.join(here, os.path.expanduser(name)))


def _section(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
