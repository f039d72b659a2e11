"""kubeconfig files read as client-go's clientcmd reads them, into the config of one context.

- **Files** (`load_rules`, clientcmd's loading rules): an explicit file must exist; otherwise
  $KUBECONFIG's list (duplicates dropped, missing files and empty names skipped), else
  ~/.kube/config. An empty or comment-only file is an empty config; only a file's first YAML
  document is read (yaml_values: go-yaml's rules, its alias budget).
- **Types**: the fields are typed as client-go's `v1.Config` is, and read as Go's JSON
  decoder reads them: keys are case-sensitive, unknown keys are ignored, a string where a
  bool belongs is an error (not "true"), `-data` fields are base64 (line breaks allowed).
  A name used twice in one file is an error.
- **Merging**: the first file to name a cluster, user or context wins it whole; the first
  current-context that is set wins.
- **Paths** in a file resolve against that file's folder, `~` included (it is not expanded);
  an exec command is resolved so only if it holds a `/` (else it is looked up in PATH).
- **The context** (`ClientConfig.rest_config`): clientcmd's checks of its user and cluster
  (ConfirmUsable: one authentication method, a key for a certificate, readable files, an
  exec plugin's fields...), then its server and, only when the server is https, its user's
  credentials and its cluster's CA, server name and verification: nothing identifies the
  user to a server that is not TLS.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from extender import urls
from extender.kube.client import yaml_values
from extender.kube.client.errors import KubeConfigError
from extender.kube.client.rest_config import (
    AuthProvider,
    ExecConfig,
    ExecEnv,
    Impersonation,
    RestConfig,
    is_transport_tls,
    parse_proxy_url,
)

EXEC_EXTENSION = "client.authentication.k8s.io/exec"
"""The cluster extension handed to an exec plugin as its `config` (provideClusterInfo)."""
EXEC_MODES = ("Never", "IfAvailable", "Always")
_DEFAULTED_EXEC_VERSIONS = (
    "client.authentication.k8s.io/v1beta1",
    "client.authentication.k8s.io/v1alpha1",
)
"""Exec API versions whose interactiveMode defaults to IfAvailable (v1 must say it)."""

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    server: str = ""
    tls_server_name: str = ""
    insecure_skip_tls_verify: bool = False
    certificate_authority: str = ""
    certificate_authority_data: bytes = b""
    proxy_url: str = ""
    disable_compression: bool = False
    extensions: Mapping[str, Any] = field(default_factory=dict)
    origin: str = ""
    """The file that named it: relative paths in it resolve against that file's folder."""


@dataclass(frozen=True, slots=True)
class AuthInfo:
    client_certificate: str = ""
    client_certificate_data: bytes = b""
    client_key: str = ""
    client_key_data: bytes = b""
    token: str = ""
    token_file: str = ""
    impersonate: str = ""
    impersonate_uid: str = ""
    impersonate_groups: tuple[str, ...] = ()
    impersonate_user_extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    username: str = ""
    password: str = ""
    auth_provider: AuthProvider | None = None
    exec: ExecConfig | None = None
    origin: str = ""


@dataclass(frozen=True, slots=True)
class Context:
    cluster: str = ""
    user: str = ""
    namespace: str = ""
    origin: str = ""


@dataclass(slots=True)
class Config:
    """Merged files: the named entries and the current context."""

    clusters: dict[str, ClusterInfo] = field(default_factory=dict)
    users: dict[str, AuthInfo] = field(default_factory=dict)
    contexts: dict[str, Context] = field(default_factory=dict)
    current_context: str = ""

    def is_empty(self) -> bool:
        return not (self.clusters or self.users or self.contexts or self.current_context)


# --- reading one file, typed as v1.Config and decoded as Go's JSON decoder does


def _where(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _text(value: Any, path: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise KubeConfigError(
            f"json: cannot unmarshal {_json_kind(value)} into {path} of type string"
        )
    return value


def _flag(value: Any, path: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise KubeConfigError(
            f"json: cannot unmarshal {_json_kind(value)} into {path} of type bool"
        )
    return value


def _data(value: Any, path: str) -> bytes:
    """A []byte field: standard base64, where Go's decoder skips line breaks."""
    text = _text(value, path)
    if not text:
        return b""
    try:
        return base64.b64decode(text.replace("\r", "").replace("\n", ""), validate=True)
    except (binascii.Error, ValueError) as error:
        raise KubeConfigError(f"illegal base64 data in {path}: {error}") from error


def _object(value: Any, path: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise KubeConfigError(
            f"json: cannot unmarshal {_json_kind(value)} into {path} of type object"
        )
    return value


def _items(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise KubeConfigError(
            f"json: cannot unmarshal {_json_kind(value)} into {path} of type array"
        )
    return value


def _texts(value: Any, path: str) -> tuple[str, ...]:
    return tuple(_text(item, path) for item in _items(value, path))


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _cluster(value: Any, origin: str) -> ClusterInfo:
    body, path = _object(value, "ClusterInfo"), "ClusterInfo.clusters.cluster"
    extensions = _extensions(body.get("extensions"), path)
    return ClusterInfo(
        server=_text(body.get("server"), _where(path, "server")),
        tls_server_name=_text(body.get("tls-server-name"), _where(path, "tls-server-name")),
        insecure_skip_tls_verify=_flag(
            body.get("insecure-skip-tls-verify"), _where(path, "insecure-skip-tls-verify")
        ),
        certificate_authority=_text(
            body.get("certificate-authority"), _where(path, "certificate-authority")
        ),
        certificate_authority_data=_data(
            body.get("certificate-authority-data"), _where(path, "certificate-authority-data")
        ),
        proxy_url=_text(body.get("proxy-url"), _where(path, "proxy-url")),
        disable_compression=_flag(
            body.get("disable-compression"), _where(path, "disable-compression")
        ),
        extensions=extensions,
        origin=origin,
    )


def _extensions(value: Any, path: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for item in _items(value, _where(path, "extensions")):
        entry = _object(item, _where(path, "extensions"))
        name = _text(entry.get("name"), _where(path, "extensions.name"))
        if name in found:
            raise KubeConfigError(f"duplicate name {name!r} in list of extensions")
        if entry.get("extension") is not None:
            found[name] = entry["extension"]
    return found


def _auth_info(value: Any, origin: str) -> AuthInfo:
    body, path = _object(value, "AuthInfo"), "AuthInfo.users.user"
    extra = {
        key: _texts(values, _where(path, "as-user-extra"))
        for key, values in _object(body.get("as-user-extra"), _where(path, "as-user-extra")).items()
    }
    provider = None
    if body.get("auth-provider") is not None:
        raw = _object(body["auth-provider"], _where(path, "auth-provider"))
        provider = AuthProvider(
            name=_text(raw.get("name"), _where(path, "auth-provider.name")),
            config={
                key: _text(item, _where(path, "auth-provider.config"))
                for key, item in _object(raw.get("config"), _where(path, "auth-provider")).items()
            },
        )
    return AuthInfo(
        client_certificate=_text(
            body.get("client-certificate"), _where(path, "client-certificate")
        ),
        client_certificate_data=_data(
            body.get("client-certificate-data"), _where(path, "client-certificate-data")
        ),
        client_key=_text(body.get("client-key"), _where(path, "client-key")),
        client_key_data=_data(body.get("client-key-data"), _where(path, "client-key-data")),
        token=_text(body.get("token"), _where(path, "token")),
        token_file=_text(body.get("tokenFile"), _where(path, "tokenFile")),
        impersonate=_text(body.get("as"), _where(path, "as")),
        impersonate_uid=_text(body.get("as-uid"), _where(path, "as-uid")),
        impersonate_groups=_texts(body.get("as-groups"), _where(path, "as-groups")),
        impersonate_user_extra=extra,
        username=_text(body.get("username"), _where(path, "username")),
        password=_text(body.get("password"), _where(path, "password")),
        auth_provider=provider,
        exec=_exec(body.get("exec"), _where(path, "exec"))
        if body.get("exec") is not None
        else None,
        origin=origin,
    )


def _exec(value: Any, path: str) -> ExecConfig:
    body = _object(value, path)
    version = _text(body.get("apiVersion"), _where(path, "apiVersion"))
    mode = _text(body.get("interactiveMode"), _where(path, "interactiveMode"))
    if not mode and version in _DEFAULTED_EXEC_VERSIONS:
        mode = "IfAvailable"
    env = []
    for item in _items(body.get("env"), _where(path, "env")):
        entry = _object(item, _where(path, "env"))
        env.append(
            ExecEnv(
                _text(entry.get("name"), _where(path, "env.name")),
                _text(entry.get("value"), _where(path, "env.value")),
            )
        )
    return ExecConfig(
        command=_text(body.get("command"), _where(path, "command")),
        args=_texts(body.get("args"), _where(path, "args")),
        env=tuple(env),
        api_version=version,
        install_hint=_text(body.get("installHint"), _where(path, "installHint")),
        provide_cluster_info=_flag(
            body.get("provideClusterInfo"), _where(path, "provideClusterInfo")
        ),
        interactive_mode=mode,
    )


def _context(value: Any, origin: str) -> Context:
    body, path = _object(value, "Context"), "Context.contexts.context"
    _extensions(body.get("extensions"), path)
    return Context(
        cluster=_text(body.get("cluster"), _where(path, "cluster")),
        user=_text(body.get("user"), _where(path, "user")),
        namespace=_text(body.get("namespace"), _where(path, "namespace")),
        origin=origin,
    )


def _named(
    document: Mapping[str, Any], key: str, inner: str, make: Callable[[Any, str], T], origin: str
) -> dict[str, T]:
    found: dict[str, T] = {}
    for item in _items(document.get(key), f"Config.{key}"):
        entry = _object(item, f"Config.{key}")
        name = _text(entry.get("name"), f"Config.{key}.name")
        if name in found:
            raise KubeConfigError(f"duplicate name {name!r} in list of {key}")
        found[name] = make(entry.get(inner), origin)
    return found


def parse(data: bytes, origin: str = "") -> Config:
    """One file's config (its entries marked with `origin`). Raises KubeConfigError."""
    if not data:
        return Config()
    try:
        document = yaml_values.first_document(data)
    except yaml_values.YAMLError as error:
        raise KubeConfigError(str(error)) from error
    if document is None:
        return Config()
    if not isinstance(document, dict):
        raise KubeConfigError(
            f"json: cannot unmarshal {_json_kind(document)} into Go value of type struct"
        )
    _check_kind(document)
    preferences = _object(document.get("preferences"), "Config.preferences")
    _flag(preferences.get("colors"), "Config.preferences.colors")
    _extensions(preferences.get("extensions"), "Config.preferences")
    _extensions(document.get("extensions"), "Config")
    return Config(
        clusters=_named(document, "clusters", "cluster", _cluster, origin),
        users=_named(document, "users", "user", _auth_info, origin),
        contexts=_named(document, "contexts", "context", _context, origin),
        current_context=_text(document.get("current-context"), "Config.current-context"),
    )


def _check_kind(document: Mapping[str, Any]) -> None:
    """apiVersion and kind, read as apimachinery reads them (any case of the key); empty
    means v1 and Config, and nothing else is a kubeconfig."""
    found = {"apiversion": "", "kind": ""}
    for key, value in document.items():
        lowered = key.lower()
        if lowered in found:
            if value is not None and not isinstance(value, str):
                kind = _json_kind(value)
                raise KubeConfigError(
                    f"json: cannot unmarshal {kind} into Go struct field of type string"
                )
            found[lowered] = value or ""
    version, kind = found["apiversion"] or "v1", found["kind"] or "Config"
    if version != "v1" or kind != "Config":
        raise KubeConfigError(f'no kind "{kind}" is registered for version "{version}"')


# --- the files: which, in what order, merged and resolved


@dataclass(frozen=True, slots=True)
class LoadingRules:
    """Which files make the config: clientcmd's ClientConfigLoadingRules."""

    explicit: str = ""
    """A file that must exist (kubectl --kubeconfig, archfit's kubernetes.kubeconfig)."""
    precedence: tuple[str, ...] = ()
    """Otherwise these, merged in order; missing ones are skipped."""


def load_rules(explicit: str, environ: Mapping[str, str]) -> LoadingRules:
    """client-go's default rules: `explicit`, else $KUBECONFIG's files (duplicates dropped),
    else ~/.kube/config ($HOME's)."""
    listed = environ.get("KUBECONFIG", "")
    if listed:
        precedence = tuple(dict.fromkeys(listed.split(os.pathsep)))
    else:
        precedence = (os.path.join(environ.get("HOME", ""), ".kube", "config"),)
    return LoadingRules(explicit, precedence)


def read_files(rules: LoadingRules) -> Config:
    """The merged, path-resolved config of the rules' files. Raises KubeConfigError for an
    explicit file that is missing, or a file that cannot be read or parsed."""
    if rules.explicit:
        if not os.path.lexists(rules.explicit):
            raise KubeConfigError(f"stat {rules.explicit}: no such file or directory")
        files: Sequence[str] = (rules.explicit,)
    else:
        files = rules.precedence
    loaded: list[Config] = []
    problems: list[str] = []
    for name in files:
        if not name:
            continue
        try:
            data = Path(name).read_bytes()
        except FileNotFoundError:
            continue
        except OSError as error:
            problems.append(f'error loading config file "{name}": {error.strerror or error}')
            continue
        try:
            loaded.append(parse(data, name))
        except KubeConfigError as error:
            problems.append(f'error loading config file "{name}": {error}')
    merged = Config()
    for config in loaded:
        for key, cluster in config.clusters.items():
            merged.clusters.setdefault(key, cluster)
        for key, user in config.users.items():
            merged.users.setdefault(key, user)
        for key, context in config.contexts.items():
            merged.contexts.setdefault(key, context)
        merged.current_context = merged.current_context or config.current_context
    merged.clusters = {name: _resolve_cluster(c) for name, c in merged.clusters.items()}
    merged.users = {name: _resolve_user(u) for name, u in merged.users.items()}
    if problems:
        raise KubeConfigError("; ".join(problems))
    return merged


def _base(origin: str) -> str:
    return os.path.dirname(os.path.abspath(origin)) if origin else ""


def _resolved(path: str, base: str) -> str:
    if not path or not base or os.path.isabs(path):
        return path
    return os.path.join(base, path)


def _resolve_cluster(cluster: ClusterInfo) -> ClusterInfo:
    base = _base(cluster.origin)
    return replace(cluster, certificate_authority=_resolved(cluster.certificate_authority, base))


def _resolve_user(user: AuthInfo) -> AuthInfo:
    base = _base(user.origin)
    command = user.exec
    if command is not None and "/" in command.command:
        command = replace(command, command=_resolved(command.command, base))
    return replace(
        user,
        client_certificate=_resolved(user.client_certificate, base),
        client_key=_resolved(user.client_key, base),
        token_file=_resolved(user.token_file, base),
        exec=command,
    )


# --- one context: clientcmd's DirectClientConfig


class ClientConfig:
    """The config of one context (`context`, else the current one), as clientcmd's
    DirectClientConfig builds it."""

    def __init__(self, config: Config, context: str = "") -> None:
        self.config = config
        self._override = context

    @property
    def context_name(self) -> str:
        return self._override or self.config.current_context

    def _context(self) -> Context:
        found = self.config.contexts.get(self.context_name)
        if found is None and self._override:
            raise KubeConfigError(f'context "{self._override}" does not exist')
        return found or Context()

    def _context_lenient(self) -> Context:
        try:
            return self._context()
        except KubeConfigError:
            return Context()

    def _user(self) -> tuple[str, AuthInfo]:
        name = self._context_lenient().user
        return name, self.config.users.get(name) or AuthInfo()

    def _cluster(self) -> tuple[str, ClusterInfo, bool]:
        """The context's cluster, and whether it is absent (an empty cluster)."""
        name = self._context_lenient().cluster
        found = self.config.clusters.get(name)
        return name, found or ClusterInfo(), found is None

    def confirm_usable(self) -> None:
        """clientcmd's ConfirmUsable: the context exists, its user and cluster are usable."""
        problems: list[str] = []
        name = self.context_name
        if name and name not in self.config.contexts:
            problems.append(f"context was not found for specified context: {name}")
        user_name, user = self._user()
        problems += _user_problems(user_name, user)
        cluster_name, cluster, absent = self._cluster()
        if absent:
            if not problems:
                raise KubeConfigError(
                    "invalid configuration: no configuration has been provided, try setting "
                    "KUBERNETES_MASTER environment variable"
                )
            problems.append("cluster has no server defined")
        else:
            problems += _cluster_problems(cluster_name, cluster)
        if problems:
            raise KubeConfigError("invalid configuration: " + _aggregate(problems))

    def namespace(self) -> str:
        """The context's namespace, else `default`."""
        self.confirm_usable()
        return self._context().namespace or "default"

    def rest_config(self) -> RestConfig:
        """The context's server and identities (clientcmd's ClientConfig)."""
        _, user = self._user()
        self._context()
        self.confirm_usable()
        _, cluster, _ = self._cluster()
        proxy = parse_proxy_url(cluster.proxy_url) if cluster.proxy_url else None
        host = _clean_host(cluster.server)
        impersonation = Impersonation(
            user.impersonate, user.impersonate_uid, user.impersonate_groups,
            dict(user.impersonate_user_extra),
        ) if user.impersonate else None  # fmt: skip
        config = RestConfig(
            host=host,
            proxy=proxy,
            disable_compression=cluster.disable_compression,
            impersonation=impersonation,
        )
        if not is_transport_tls(config):
            return config
        token = user.token
        if not token and user.token_file:
            try:
                token = Path(user.token_file).read_text(encoding="utf-8", errors="surrogateescape")
            except OSError as error:
                raise KubeConfigError(f"open {user.token_file}: {error.strerror}") from error
        exec_config = user.exec
        if exec_config is not None:
            exec_config = replace(exec_config, config=cluster.extensions.get(EXEC_EXTENSION))
        has_cert = bool(user.client_certificate or user.client_certificate_data)
        return replace(
            config,
            bearer_token=token,
            bearer_token_file=user.token_file if (user.token or user.token_file) else "",
            cert_file=user.client_certificate if has_cert else "",
            cert_data=user.client_certificate_data if has_cert else b"",
            key_file=user.client_key if has_cert else "",
            key_data=user.client_key_data if has_cert else b"",
            username=user.username,
            password=user.password,
            auth_provider=user.auth_provider,
            exec=exec_config,
            ca_file=cluster.certificate_authority,
            ca_data=cluster.certificate_authority_data,
            insecure=cluster.insecure_skip_tls_verify,
            server_name=cluster.tls_server_name,
        )


def _aggregate(problems: list[str]) -> str:
    return problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"


def _clean_host(server: str) -> str:
    """A server with a path loses its query (clientcmd, with url.ParseRequestURI: a `#`
    stays in the path)."""
    try:
        found = urls.parse_request_uri(server)
    except urls.URLError:
        return server
    if not found.opaque and len(found.path) > 1:
        return str(replace(found, raw_query="", force_query=False, fragment=""))
    return server


def _readable(path: str) -> str | None:
    """Why `path` cannot be opened, or None (os.Open: a folder opens)."""
    try:
        with open(path, "rb"):
            return None
    except IsADirectoryError:
        return None
    except OSError as error:
        return f"open {path}: {error.strerror}"


def _user_problems(name: str, user: AuthInfo) -> list[str]:
    """clientcmd's validateAuthInfo."""
    problems: list[str] = []
    methods = []
    if user.token:
        methods.append("token")
    if user.username or user.password:
        methods.append("basicAuth")
    if user.client_certificate or user.client_certificate_data:
        if user.client_certificate and user.client_certificate_data:
            problems.append(
                f"client-cert-data and client-cert are both specified for {name}. "
                "client-cert-data will override."
            )
        if user.client_key and user.client_key_data:
            problems.append(
                f"client-key-data and client-key are both specified for {name}; "
                "client-key-data will override"
            )
        if not user.client_key and not user.client_key_data:
            problems.append(
                f"client-key-data or client-key must be specified for {name} to use the "
                "clientCert authentication method."
            )
        for kind, path in (
            ("client-cert", user.client_certificate),
            ("client-key", user.client_key),
        ):
            why = _readable(path) if path else None
            if why:
                problems.append(f"unable to read {kind} {path} for {name} due to {why}")
    if user.exec is not None:
        command = user.exec
        if user.auth_provider is not None:
            problems.append(
                f"authProvider cannot be provided in combination with an exec plugin for {name}"
            )
        if not command.command:
            problems.append(
                f"command must be specified for {name} to use exec authentication plugin"
            )
        if not command.api_version:
            problems.append(
                f"apiVersion must be specified for {name} to use exec authentication plugin"
            )
        if any(not env.name for env in command.env):
            problems.append(
                f"env variable name must be specified for {name} to use exec authentication plugin"
            )
        if not command.interactive_mode:
            problems.append(
                f"interactiveMode must be specified for {name} to use exec authentication plugin"
            )
        elif command.interactive_mode not in EXEC_MODES:
            problems.append(f'invalid interactiveMode for {name}: "{command.interactive_mode}"')
    if len(methods) > 1:
        problems.append(
            f"more than one authentication method found for {name}; found {methods}, only one "
            "is allowed"
        )
    if (
        user.impersonate_uid or user.impersonate_groups or user.impersonate_user_extra
    ) and not user.impersonate:
        problems.append(
            f"requesting uid, groups or user-extra for {name} without impersonating a user"
        )
    return problems


def _cluster_problems(name: str, cluster: ClusterInfo) -> list[str]:
    """clientcmd's validateClusterInfo."""
    problems: list[str] = []
    if not cluster.server:
        problems.append(
            f'no server found for cluster "{name}"'
            if name
            else "default cluster has no server defined"
        )
    if cluster.proxy_url:
        try:
            parse_proxy_url(cluster.proxy_url)
        except ValueError as error:
            problems.append(
                f"invalid 'proxy-url' {cluster.proxy_url!r} for cluster {name!r}: {error}"
            )
    if cluster.certificate_authority and cluster.certificate_authority_data:
        problems.append(
            f"certificate-authority-data and certificate-authority are both specified for {name}. "
            "certificate-authority-data will override."
        )
    if cluster.certificate_authority:
        why = _readable(cluster.certificate_authority)
        if why:
            problems.append(
                f"unable to read certificate-authority {cluster.certificate_authority} for {name} "
                f"due to {why}"
            )
    return problems
