"""The differential test's corpus: kubeconfig and in-cluster set-ups, each a folder of files,
an environment and the loader's inputs (an explicit file, a context), generated from a seed.

A named catalog covers each dimension on purpose (merging, paths, empty and missing files,
data versus file, every TLS field and its YAML types, credentials over http, impersonation,
tokens and token files, basic auth, exec plugins, auth providers, proxies, server URLs,
namespaces, in-cluster files and env, hostile YAML, a large file); seeded random
combinations of ordinary fields fill in the rest. Every text may name `{root}` (the case's
folder), `{python}` and `{plugin}` (tests/support/exec_plugin.py), filled in per run.
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

SEED = 39
RANDOM_CASES = 300
PLUGIN_PATH = Path(__file__).resolve().parents[1] / "support" / "exec_plugin.py"


@dataclass(frozen=True)
class Materials:
    """PEM bytes the cases use: two CAs, a client certificate and its key, and a second
    client certificate and key from another CA."""

    ca: bytes
    ca2: bytes
    client_cert: bytes
    client_key: bytes
    other_cert: bytes
    other_key: bytes


@dataclass(frozen=True)
class Case:
    """One set-up, as both loaders are given it."""

    name: str
    topic: str
    files: Mapping[str, str | bytes] = field(default_factory=dict)
    """Path under the case's folder -> content ({root}... filled in when it is text)."""
    env: Mapping[str, str] = field(default_factory=dict)
    """The case's own variables, added to HOME={root}/home and PATH={root}/bin:/usr/bin:/bin."""
    mode: str = "kubeconfig"
    """`kubeconfig`, or `in-cluster` with the service account folder `account`."""
    kubeconfig: str = ""
    """An explicit kubeconfig file (kubectl --kubeconfig), relative to the working folder."""
    context: str = ""
    rotate: tuple[tuple[str, str], ...] = ()
    """(source, target) files renamed between the two requests."""
    cwd: str = "."
    account: str = "sa"


def _b64(data: bytes | str) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def _doc(
    cluster: Mapping[str, Any],
    user: Mapping[str, Any] | None,
    *,
    namespace: str | None = None,
    current: str = "ctx",
    **top: Any,
) -> str:
    """A one-context kubeconfig (cluster c, user u, context ctx) as YAML."""
    context: dict[str, Any] = {"cluster": "c", "user": "u"}
    if namespace is not None:
        context["namespace"] = namespace
    document: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": dict(cluster)}],
        "users": [{"name": "u", "user": dict(user or {})}],
        "contexts": [{"name": "ctx", "context": context}],
        "current-context": current,
        **top,
    }
    return yaml.safe_dump(document, sort_keys=False)


SERVER = "https://10.0.0.1:6443"
WRAPPER = '#!/bin/sh\nexec "{python}" "{plugin}" "$@"\n'


def _exec(
    behaviour: str = "token",
    *,
    version: str = "client.authentication.k8s.io/v1",
    mode: str | None = "Never",
    command: str = "kplug",
    **more: Any,
) -> dict[str, Any]:
    exec_config: dict[str, Any] = {
        "apiVersion": version,
        "command": command,
        "args": [behaviour, *more.pop("args", [])],
        **more,
    }
    if mode is not None:
        exec_config["interactiveMode"] = mode
    return {"exec": exec_config}


def _jwt(expiry: int) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none'})}.{part({'exp': expiry, 'sub': 'me'})}.c2ln"


def _one(name: str, topic: str, text: str, **case: Any) -> Case:
    """A case whose kubeconfig is `text`, read as $KUBECONFIG."""
    files = {"config": text, "bin/kplug": WRAPPER, **case.pop("files", {})}
    env = {"KUBECONFIG": "{root}/config", **case.pop("env", {})}
    return Case(name, topic, files=files, env=env, **case)


def catalog(m: Materials) -> Iterator[Case]:
    """The named cases: each dimension of the issue, on purpose."""
    ca, ca2 = m.ca.decode(), m.ca2.decode()
    pki = {
        "pki/ca.crt": m.ca,
        "pki/ca2.crt": m.ca2,
        "pki/bundle.crt": m.ca + m.ca2,
        "pki/client.crt": m.client_cert,
        "pki/client.key": m.client_key,
        "pki/other.crt": m.other_cert,
        "pki/other.key": m.other_key,
        "pki/garbage.crt": b"not a certificate\n",
        "pki/empty.crt": b"",
        "token": "file-token\n",
        "token2": "rotated-token\n",
        "emptytoken": "",
    }
    cert_user = {"client-certificate": "pki/client.crt", "client-key": "pki/client.key"}

    def one(name: str, topic: str, text: str, **case: Any) -> Case:
        return _one(name, topic, text, files={**pki, **case.pop("files", {})}, **case)

    # --- merging several files
    split_cluster = yaml.safe_dump(
        {
            "clusters": [
                {"name": "c", "cluster": {"server": SERVER, "certificate-authority": "ca.crt"}}
            ]
        }
    )
    split_user = yaml.safe_dump(
        {
            "users": [{"name": "u", "user": {"tokenFile": "tok"}}],
            "contexts": [
                {"name": "ctx", "context": {"cluster": "c", "user": "u", "namespace": "b"}}
            ],
            "current-context": "ctx",
        }
    )
    split = {"a/config": split_cluster, "a/ca.crt": m.ca, "b/config": split_user, "b/tok": "split"}
    yield Case(
        "merge-split-across-files",
        "merging",
        files=split,
        env={"KUBECONFIG": "{root}/a/config:{root}/b/config"},
    )
    yield Case(
        "merge-relative-kubeconfig-list",
        "merging",
        files=split,
        env={"KUBECONFIG": "a/config:b/config"},
    )
    first = _doc(
        {"server": SERVER, "certificate-authority-data": _b64(ca)},
        {"token": "first"},
        namespace="one",
    )
    second = _doc(
        {"server": "https://10.9.9.9:6443", "insecure-skip-tls-verify": True},
        {"token": "second", "as": "mallory"},
        namespace="two",
        current="other",
    )
    yield Case(
        "merge-first-file-wins",
        "merging",
        files={"1/config": first, "2/config": second},
        env={"KUBECONFIG": "{root}/1/config:{root}/2/config"},
    )
    yield Case(
        "merge-second-file-only-current-context",
        "merging",
        files={
            "1/config": first.replace("current-context: ctx", "current-context: ''"),
            "2/config": second,
        },
        env={"KUBECONFIG": "{root}/1/config:{root}/2/config"},
    )
    yield Case(
        "merge-missing-file-in-list",
        "merging",
        files={"1/config": first},
        env={"KUBECONFIG": "{root}/missing:{root}/1/config"},
    )
    yield Case(
        "merge-all-files-missing", "merging", env={"KUBECONFIG": "{root}/missing:{root}/nothing"}
    )
    yield Case(
        "merge-empty-file-in-list",
        "merging",
        files={"1/config": first, "empty": ""},
        env={"KUBECONFIG": "{root}/empty:{root}/1/config"},
    )
    yield Case(
        "merge-comment-only-file-in-list",
        "merging",
        files={"1/config": first, "comments": "# nothing yet\n"},
        env={"KUBECONFIG": "{root}/comments:{root}/1/config"},
    )
    yield Case(
        "merge-same-file-twice",
        "merging",
        files={"1/config": first},
        env={"KUBECONFIG": "{root}/1/config:{root}/1/config"},
    )
    yield Case(
        "merge-broken-second-file",
        "merging",
        files={"1/config": first, "2/config": "clusters: [\n"},
        env={"KUBECONFIG": "{root}/1/config:{root}/2/config"},
    )
    yield Case(
        "merge-context-from-second-file",
        "merging",
        files={"1/config": first, "2/config": second},
        env={"KUBECONFIG": "{root}/1/config:{root}/2/config"},
        context="other",
    )
    yield Case(
        "merge-empty-kubeconfig-entries",
        "merging",
        files={"1/config": first},
        env={"KUBECONFIG": "::{root}/1/config:"},
    )
    cert_in_b = yaml.safe_dump({"users": [{"name": "u", "user": cert_user}]})
    yield Case(
        "merge-client-cert-relative-to-its-own-file",
        "merging",
        files={
            "a/config": first.replace("token: first", "{}").replace(
                "- name: u\n  user: {}", "- name: u2\n  user: {}"
            ),
            "b/config": cert_in_b,
            "b/pki/client.crt": m.client_cert,
            "b/pki/client.key": m.client_key,
            "a/pki/client.crt": m.other_cert,
            "a/pki/client.key": m.other_key,
        },
        env={"KUBECONFIG": "{root}/a/config:{root}/b/config"},
    )

    # --- explicit file, empty, missing, multi-document
    yield Case(
        "explicit-file",
        "files",
        files={"k": first},
        kubeconfig="k",
        env={"KUBECONFIG": "{root}/missing"},
    )
    yield Case("explicit-file-missing", "files", kubeconfig="{root}/nothing-here")
    yield Case("explicit-file-empty", "files", files={"k": ""}, kubeconfig="k")
    yield Case("explicit-file-comments-only", "files", files={"k": "# empty\n\n"}, kubeconfig="k")
    yield Case(
        "explicit-over-kubeconfig-env",
        "files",
        files={"k": first, "1/config": second},
        kubeconfig="k",
        env={"KUBECONFIG": "{root}/1/config"},
    )
    yield Case("default-home-kube-config", "files", files={"home/.kube/config": first})
    yield Case("default-home-kube-config-missing", "files")
    yield one("two-documents", "files", first + "---\n" + second)
    yield one("document-marker-first", "files", "---\n" + first)
    yield one("json-kubeconfig", "files", json.dumps(yaml.safe_load(first)))
    yield one("not-a-mapping", "files", "- just\n- a list\n")
    yield one("a-scalar", "files", "hello\n")
    yield one("kind-is-not-config", "files", first.replace("kind: Config", "kind: Pod"))
    yield one("api-version-v2", "files", first.replace("apiVersion: v1", "apiVersion: v2"))
    yield one(
        "no-api-version-or-kind",
        "files",
        first.replace("apiVersion: v1\n", "").replace("kind: Config\n", ""),
    )
    yield one("kubeconfig-is-a-folder", "files", first, env={"KUBECONFIG": "{root}/pki"})
    yield one("utf8-bom", "files", "\ufeff" + first)
    yield one("tabs-in-yaml", "files", first.replace("  server", "\tserver"))

    # --- paths: the kubeconfig is conf/config, so ../ stays inside the case's folder
    for name, value in [
        ("path-ca-relative", "pki/ca.crt"),
        ("path-ca-dot-relative", "./pki/ca.crt"),
        ("path-ca-absolute", "{root}/pki/ca.crt"),
        ("path-ca-tilde", "~/ca.crt"),
        ("path-ca-parent", "../outside/ca.crt"),
        ("path-ca-missing", "pki/none.crt"),
        ("path-ca-a-folder", "pki"),
    ]:
        yield Case(
            name,
            "paths",
            files={
                **pki,
                "conf/config": _doc(
                    {"server": SERVER, "certificate-authority": value}, {"token": "t"}
                ),
                "conf/pki/ca.crt": m.ca,
                "conf/~/ca.crt": m.ca,
                "home/ca.crt": m.ca2,
                "outside/ca.crt": m.ca,
            },
            env={"KUBECONFIG": "{root}/conf/config"},
        )
    yield one(
        "path-token-file-tilde",
        "paths",
        _doc({"server": SERVER}, {"tokenFile": "~/tok"}),
        files={"~/tok": "tilde-literal", "home/tok": "from-home"},
    )
    yield one(
        "path-token-file-relative-nested",
        "paths",
        _doc({"server": SERVER}, {"tokenFile": "sub/tok"}),
        files={"sub/tok": "nested"},
        cwd="pki",
    )
    yield Case(
        "path-relative-to-kubeconfig-not-cwd",
        "paths",
        files={
            **pki,
            "conf/config": _doc(
                {"server": SERVER, "certificate-authority": "ca.crt"}, {"tokenFile": "token"}
            ),
            "conf/ca.crt": m.ca2,
            "conf/token": "next-to-config",
            "ca.crt": m.ca,
        },
        env={"KUBECONFIG": "conf/config"},
    )
    yield one(
        "path-client-cert-tilde",
        "paths",
        _doc({"server": SERVER}, {"client-certificate": "~/c.crt", "client-key": "~/c.key"}),
        files={"home/c.crt": m.client_cert, "home/c.key": m.client_key},
    )
    yield one(
        "path-home-tilde-in-kubeconfig-env",
        "paths",
        first,
        env={"KUBECONFIG": "~/config"},
        files={"home/config": second},
    )

    # --- data versus file
    yield one(
        "ca-data-and-file",
        "data-vs-file",
        _doc(
            {
                "server": SERVER,
                "certificate-authority": "pki/ca.crt",
                "certificate-authority-data": _b64(ca2),
            },
            {"token": "t"},
        ),
    )
    yield one(
        "ca-data-with-line-breaks",
        "data-vs-file",
        _doc({"server": SERVER}, {"token": "t"}).replace(
            "server: https://10.0.0.1:6443",
            "server: https://10.0.0.1:6443\n    certificate-authority-data: |\n"
            + "".join(f"      {_b64(ca)[i : i + 60]}\n" for i in range(0, len(_b64(ca)), 60)),
        ),
    )
    yield one(
        "ca-data-not-base64",
        "data-vs-file",
        _doc({"server": SERVER, "certificate-authority-data": "not base64!"}, {"token": "t"}),
    )
    yield one(
        "ca-data-base64-no-padding",
        "data-vs-file",
        _doc(
            {"server": SERVER, "certificate-authority-data": _b64(ca).rstrip("=") + "A"},
            {"token": "t"},
        ),
    )
    yield one(
        "ca-data-not-pem",
        "data-vs-file",
        _doc({"server": SERVER, "certificate-authority-data": _b64("hello")}, {"token": "t"}),
    )
    yield one(
        "ca-data-two-certs",
        "data-vs-file",
        _doc({"server": SERVER, "certificate-authority-data": _b64(ca + ca2)}, {"token": "t"}),
    )
    yield one(
        "ca-file-two-certs",
        "data-vs-file",
        _doc({"server": SERVER, "certificate-authority": "pki/bundle.crt"}, {"token": "t"}),
    )
    yield one(
        "ca-file-garbage",
        "data-vs-file",
        _doc({"server": SERVER, "certificate-authority": "pki/garbage.crt"}, {"token": "t"}),
    )
    yield one(
        "ca-file-empty",
        "data-vs-file",
        _doc({"server": SERVER, "certificate-authority": "pki/empty.crt"}, {"token": "t"}),
    )
    yield one(
        "ca-pem-with-junk-around",
        "data-vs-file",
        _doc(
            {
                "server": SERVER,
                "certificate-authority-data": _b64("junk before\n" + ca + "junk after\n"),
            },
            {"token": "t"},
        ),
    )
    yield one(
        "ca-data-empty-string",
        "data-vs-file",
        _doc({"server": SERVER, "certificate-authority-data": ""}, {"token": "t"}),
    )
    yield one(
        "client-cert-data",
        "data-vs-file",
        _doc(
            {"server": SERVER},
            {"client-certificate-data": _b64(m.client_cert), "client-key-data": _b64(m.client_key)},
        ),
    )
    yield one("client-cert-files", "data-vs-file", _doc({"server": SERVER}, cert_user))
    yield one(
        "client-cert-data-and-file",
        "data-vs-file",
        _doc({"server": SERVER}, {**cert_user, "client-certificate-data": _b64(m.other_cert)}),
    )
    yield one(
        "client-key-data-and-file",
        "data-vs-file",
        _doc({"server": SERVER}, {**cert_user, "client-key-data": _b64(m.other_key)}),
    )
    yield one(
        "client-cert-without-key",
        "data-vs-file",
        _doc({"server": SERVER}, {"client-certificate": "pki/client.crt"}),
    )
    yield one(
        "client-key-without-cert",
        "data-vs-file",
        _doc({"server": SERVER}, {"client-key": "pki/client.key", "token": "t"}),
    )
    yield one(
        "client-cert-file-key-data",
        "data-vs-file",
        _doc(
            {"server": SERVER},
            {"client-certificate": "pki/client.crt", "client-key-data": _b64(m.client_key)},
        ),
    )
    yield one(
        "client-cert-key-mismatch",
        "data-vs-file",
        _doc(
            {"server": SERVER},
            {"client-certificate-data": _b64(m.client_cert), "client-key-data": _b64(m.other_key)},
        ),
    )
    yield one(
        "client-cert-files-key-mismatch",
        "data-vs-file",
        _doc(
            {"server": SERVER},
            {"client-certificate": "pki/client.crt", "client-key": "pki/other.key"},
        ),
    )
    yield one(
        "client-cert-file-missing",
        "data-vs-file",
        _doc(
            {"server": SERVER},
            {"client-certificate": "pki/none.crt", "client-key": "pki/client.key"},
        ),
    )
    yield one(
        "client-cert-and-token",
        "data-vs-file",
        _doc({"server": SERVER}, {**cert_user, "token": "both"}),
    )

    # --- TLS fields and their YAML types
    for name, value in [
        ("insecure-true", "true"),
        ("insecure-false", "false"),
        ("insecure-string-false", '"false"'),
        ("insecure-string-true", '"true"'),
        ("insecure-yes", "yes"),
        ("insecure-on", "on"),
        ("insecure-y", "y"),
        ("insecure-1", "1"),
        ("insecure-null", "null"),
        ("insecure-True", "True"),
        ("insecure-list", "[true]"),
    ]:
        text = _doc({"server": SERVER}, {"token": "t"}).replace(
            "server: https://10.0.0.1:6443",
            f"server: https://10.0.0.1:6443\n    insecure-skip-tls-verify: {value}",
        )
        yield one(f"tls-{name}", "tls-types", text)
    yield one(
        "tls-insecure-with-ca-file",
        "tls-types",
        _doc(
            {
                "server": SERVER,
                "insecure-skip-tls-verify": True,
                "certificate-authority": "pki/ca.crt",
            },
            {"token": "t"},
        ),
    )
    yield one(
        "tls-insecure-with-ca-data",
        "tls-types",
        _doc(
            {
                "server": SERVER,
                "insecure-skip-tls-verify": True,
                "certificate-authority-data": _b64(ca),
            },
            {"token": "t"},
        ),
    )
    yield one(
        "tls-insecure-with-client-cert",
        "tls-types",
        _doc({"server": SERVER, "insecure-skip-tls-verify": True}, cert_user),
    )
    yield one(
        "tls-server-name",
        "tls-types",
        _doc(
            {
                "server": SERVER,
                "tls-server-name": "kubernetes.default",
                "certificate-authority": "pki/ca.crt",
            },
            {"token": "t"},
        ),
    )
    yield one(
        "tls-server-name-number",
        "tls-types",
        _doc({"server": SERVER}, {"token": "t"}).replace(
            "server: https://10.0.0.1:6443",
            "server: https://10.0.0.1:6443\n    tls-server-name: 12345",
        ),
    )
    yield one(
        "tls-server-name-with-insecure",
        "tls-types",
        _doc(
            {"server": SERVER, "tls-server-name": "api", "insecure-skip-tls-verify": True},
            {"token": "t"},
        ),
    )
    yield one(
        "tls-disable-compression",
        "tls-types",
        _doc({"server": SERVER, "disable-compression": True}, {"token": "t"}),
    )
    yield one(
        "tls-ca-data-as-number",
        "tls-types",
        _doc({"server": SERVER}, {"token": "t"}).replace(
            "server: https://10.0.0.1:6443",
            "server: https://10.0.0.1:6443\n    certificate-authority-data: 1234",
        ),
    )
    yield one(
        "tls-upper-case-key-ignored",
        "tls-types",
        _doc({"server": SERVER}, {"token": "t"}).replace(
            "server: https://10.0.0.1:6443",
            "server: https://10.0.0.1:6443\n    Insecure-Skip-TLS-Verify: true",
        ),
    )
    yield one(
        "tls-unknown-field-ignored",
        "tls-types",
        _doc(
            {"server": SERVER, "insecure-skip-tls": True, "colour": "blue"},
            {"token": "t", "tokne": "x"},
        ),
    )

    # --- when credentials are sent
    for server in [
        "http://10.0.0.1:8080",
        "10.0.0.1:6443",
        "api.example.com:6443",
        "localhost",
        "HTTP://10.0.0.1:9090",
    ]:
        slug = server.replace("://", "-").replace(":", "-").replace(".", "-").lower()
        yield one(f"cleartext-token-{slug}", "cleartext", _doc({"server": server}, {"token": "t"}))
    yield one(
        "cleartext-basic",
        "cleartext",
        _doc({"server": "http://10.0.0.1:8080"}, {"username": "u", "password": "p"}),
    )
    yield one(
        "cleartext-client-cert", "cleartext", _doc({"server": "http://10.0.0.1:8080"}, cert_user)
    )
    yield one(
        "cleartext-token-file",
        "cleartext",
        _doc({"server": "http://10.0.0.1:8080"}, {"tokenFile": "token"}),
    )
    yield one("cleartext-exec", "cleartext", _doc({"server": "http://10.0.0.1:8080"}, _exec()))
    yield one(
        "cleartext-oidc",
        "cleartext",
        _doc(
            {"server": "http://10.0.0.1:8080"},
            {
                "auth-provider": {
                    "name": "oidc",
                    "config": {
                        "idp-issuer-url": "https://issuer.example",
                        "client-id": "k",
                        "id-token": _jwt(4102444800),
                    },
                }
            },
        ),
    )
    yield one(
        "cleartext-impersonation",
        "cleartext",
        _doc({"server": "http://10.0.0.1:8080"}, {"token": "t", "as": "alice"}),
    )
    yield one(
        "cleartext-ca-ignored",
        "cleartext",
        _doc(
            {
                "server": "http://10.0.0.1:8080",
                "certificate-authority": "pki/ca.crt",
                "insecure-skip-tls-verify": True,
            },
            {"token": "t"},
        ),
    )
    yield one(
        "userinfo-in-server",
        "cleartext",
        _doc({"server": "https://admin:secret@10.0.0.1:6443"}, {}),
    )
    yield one(
        "userinfo-in-http-server",
        "cleartext",
        _doc({"server": "http://admin:secret@10.0.0.1:8080"}, {}),
    )

    # --- impersonation
    yield one(
        "impersonate-user", "impersonation", _doc({"server": SERVER}, {"token": "t", "as": "alice"})
    )
    yield one(
        "impersonate-all",
        "impersonation",
        _doc(
            {"server": SERVER},
            {
                "token": "t",
                "as": "alice",
                "as-uid": "1234",
                "as-groups": ["dev", "ops"],
                "as-user-extra": {"scopes": ["a", "b"], "team/x y": ["z"]},
            },
        ),
    )
    yield one(
        "impersonate-groups-without-user",
        "impersonation",
        _doc({"server": SERVER}, {"token": "t", "as-groups": ["dev"]}),
    )
    yield one(
        "impersonate-uid-without-user",
        "impersonation",
        _doc({"server": SERVER}, {"token": "t", "as-uid": "1"}),
    )
    yield one(
        "impersonate-empty-user",
        "impersonation",
        _doc({"server": SERVER}, {"token": "t", "as": ""}),
    )
    yield one(
        "impersonate-groups-not-a-list",
        "impersonation",
        _doc({"server": SERVER}, {"token": "t", "as": "a", "as-groups": "dev"}),
    )
    yield one(
        "impersonate-with-cert",
        "impersonation",
        _doc({"server": SERVER}, {**cert_user, "as": "system:admin"}),
    )
    yield one("impersonate-anonymous", "impersonation", _doc({"server": SERVER}, {"as": "alice"}))

    # --- tokens and token files
    yield one("token-inline", "tokens", _doc({"server": SERVER}, {"token": "inline"}))
    yield one("token-file", "tokens", _doc({"server": SERVER}, {"tokenFile": "token"}))
    yield one(
        "token-and-token-file",
        "tokens",
        _doc({"server": SERVER}, {"token": "inline", "tokenFile": "token"}),
    )
    yield one(
        "token-and-missing-token-file",
        "tokens",
        _doc({"server": SERVER}, {"token": "inline", "tokenFile": "nothing"}),
    )
    yield one("token-file-missing", "tokens", _doc({"server": SERVER}, {"tokenFile": "nothing"}))
    yield one("token-file-empty", "tokens", _doc({"server": SERVER}, {"tokenFile": "emptytoken"}))
    yield one(
        "token-file-whitespace",
        "tokens",
        _doc({"server": SERVER}, {"tokenFile": "ws"}),
        files={"ws": "  spaced-token \n\n"},
    )
    yield one(
        "token-file-rotated",
        "tokens",
        _doc({"server": SERVER}, {"tokenFile": "token"}),
        rotate=(("token2", "token"),),
    )
    yield one(
        "token-file-removed",
        "tokens",
        _doc({"server": SERVER}, {"tokenFile": "token"}),
        rotate=(("token", "gone"),),
    )
    yield one(
        "token-and-file-rotated",
        "tokens",
        _doc({"server": SERVER}, {"token": "inline", "tokenFile": "token"}),
        rotate=(("token2", "token"),),
    )
    yield one(
        "token-number",
        "tokens",
        _doc({"server": SERVER}, {}).replace("user: {}", "user:\n    token: 12345"),
    )
    yield one(
        "token-date-like",
        "tokens",
        _doc({"server": SERVER}, {}).replace("user: {}", "user:\n    token: 2024-01-02"),
    )
    yield one("token-with-spaces", "tokens", _doc({"server": SERVER}, {"token": " a b "}))
    yield one("token-file-a-folder", "tokens", _doc({"server": SERVER}, {"tokenFile": "pki"}))

    # --- basic auth
    yield one("basic-auth", "basic", _doc({"server": SERVER}, {"username": "u", "password": "p"}))
    yield one("basic-username-only", "basic", _doc({"server": SERVER}, {"username": "u"}))
    yield one("basic-password-only", "basic", _doc({"server": SERVER}, {"password": "p"}))
    yield one(
        "basic-and-token",
        "basic",
        _doc({"server": SERVER}, {"username": "u", "password": "p", "token": "t"}),
    )
    yield one(
        "basic-and-token-file",
        "basic",
        _doc({"server": SERVER}, {"username": "u", "password": "p", "tokenFile": "token"}),
    )
    yield one(
        "basic-and-cert",
        "basic",
        _doc({"server": SERVER}, {"username": "u", "password": "p", **cert_user}),
    )
    yield one(
        "basic-unicode", "basic", _doc({"server": SERVER}, {"username": "ü", "password": "pä:ss"})
    )

    # --- exec plugins
    yield one("exec-v1", "exec", _doc({"server": SERVER}, _exec()))
    yield one(
        "exec-v1beta1",
        "exec",
        _doc({"server": SERVER}, _exec(version="client.authentication.k8s.io/v1beta1", mode=None)),
    )
    yield one(
        "exec-v1alpha1",
        "exec",
        _doc({"server": SERVER}, _exec(version="client.authentication.k8s.io/v1alpha1", mode=None)),
    )
    yield one("exec-no-api-version", "exec", _doc({"server": SERVER}, _exec(version="")))
    yield one("exec-v1-no-interactive-mode", "exec", _doc({"server": SERVER}, _exec(mode=None)))
    yield one(
        "exec-interactive-if-available", "exec", _doc({"server": SERVER}, _exec(mode="IfAvailable"))
    )
    yield one("exec-interactive-always", "exec", _doc({"server": SERVER}, _exec(mode="Always")))
    yield one("exec-interactive-bogus", "exec", _doc({"server": SERVER}, _exec(mode="Sometimes")))
    yield one("exec-fails", "exec", _doc({"server": SERVER}, _exec("fail")))
    yield one(
        "exec-not-found",
        "exec",
        _doc({"server": SERVER}, _exec(command="no-such-plugin", installHint="install it")),
    )
    yield one("exec-empty-command", "exec", _doc({"server": SERVER}, _exec(command="")))
    yield one("exec-garbage-output", "exec", _doc({"server": SERVER}, _exec("garbage")))
    yield one("exec-no-status", "exec", _doc({"server": SERVER}, _exec("nostatus")))
    yield one("exec-empty-status", "exec", _doc({"server": SERVER}, _exec("empty")))
    yield one("exec-other-version", "exec", _doc({"server": SERVER}, _exec("otherversion")))
    yield one("exec-yaml-output", "exec", _doc({"server": SERVER}, _exec("yaml")))
    yield one("exec-expired", "exec", _doc({"server": SERVER}, _exec("expired")))
    yield one("exec-future-expiry", "exec", _doc({"server": SERVER}, _exec("future")))
    yield one(
        "exec-client-cert",
        "exec",
        _doc(
            {"server": SERVER},
            _exec("cert", args=["{root}/pki/client.crt", "{root}/pki/client.key"]),
        ),
    )
    yield one(
        "exec-only-cert",
        "exec",
        _doc({"server": SERVER}, _exec("onlycert", args=["{root}/pki/client.crt"])),
    )
    yield one(
        "exec-env-and-args",
        "exec",
        _doc(
            {"server": SERVER},
            _exec(args=["x", "y z"], env=[{"name": "PLUGIN_VAR", "value": "from-env"}]),
        ),
    )
    yield one(
        "exec-env-without-name",
        "exec",
        _doc({"server": SERVER}, _exec(env=[{"name": "", "value": "v"}])),
    )
    yield one(
        "exec-process-env-passed",
        "exec",
        _doc({"server": SERVER}, _exec()),
        env={"PLUGIN_VAR": "from-process"},
    )
    yield one(
        "exec-provide-cluster-info",
        "exec",
        _doc(
            {
                "server": SERVER,
                "certificate-authority": "pki/ca.crt",
                "tls-server-name": "api",
                "extensions": [
                    {
                        "name": "client.authentication.k8s.io/exec",
                        "extension": {"audience": "k8s", "n": 3},
                    }
                ],
            },
            _exec(provideClusterInfo=True),
        ),
    )
    yield one(
        "exec-cluster-info-not-asked",
        "exec",
        _doc(
            {
                "server": SERVER,
                "extensions": [
                    {"name": "client.authentication.k8s.io/exec", "extension": {"a": 1}}
                ],
            },
            _exec(),
        ),
    )
    yield one(
        "exec-relative-command", "exec", _doc({"server": SERVER}, _exec(command="./bin/kplug"))
    )
    yield one(
        "exec-relative-command-no-dot", "exec", _doc({"server": SERVER}, _exec(command="bin/kplug"))
    )
    yield one(
        "exec-absolute-command", "exec", _doc({"server": SERVER}, _exec(command="{root}/bin/kplug"))
    )
    yield one("exec-and-token", "exec", _doc({"server": SERVER}, {**_exec(), "token": "static"}))
    yield one("exec-and-cert", "exec", _doc({"server": SERVER}, {**_exec(), **cert_user}))
    yield one(
        "exec-and-auth-provider",
        "exec",
        _doc({"server": SERVER}, {**_exec(), "auth-provider": {"name": "oidc", "config": {}}}),
    )
    yield one(
        "exec-and-basic",
        "exec",
        _doc({"server": SERVER}, {**_exec(), "username": "u", "password": "p"}),
    )
    yield one(
        "exec-with-impersonation", "exec", _doc({"server": SERVER}, {**_exec(), "as": "alice"})
    )
    yield one(
        "exec-args-null",
        "exec",
        _doc({"server": SERVER}, {}).replace(
            "user: {}",
            "user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
            "      command: kplug\n      args: null\n      interactiveMode: Never",
        ),
    )

    # --- auth providers
    yield one(
        "auth-provider-gcp",
        "auth-provider",
        _doc({"server": SERVER}, {"auth-provider": {"name": "gcp", "config": {}}}),
    )
    yield one(
        "auth-provider-azure",
        "auth-provider",
        _doc({"server": SERVER}, {"auth-provider": {"name": "azure", "config": {}}}),
    )
    yield one(
        "auth-provider-unknown",
        "auth-provider",
        _doc({"server": SERVER}, {"auth-provider": {"name": "keystone"}}),
    )
    oidc = {"idp-issuer-url": "https://issuer.example", "client-id": "kubectl"}
    yield one(
        "auth-provider-oidc-valid",
        "auth-provider",
        _doc(
            {"server": SERVER},
            {"auth-provider": {"name": "oidc", "config": {**oidc, "id-token": _jwt(4102444800)}}},
        ),
    )
    yield one(
        "auth-provider-oidc-expired",
        "auth-provider",
        _doc(
            {"server": SERVER},
            {"auth-provider": {"name": "oidc", "config": {**oidc, "id-token": _jwt(1000)}}},
        ),
    )
    yield one(
        "auth-provider-oidc-not-a-jwt",
        "auth-provider",
        _doc(
            {"server": SERVER},
            {"auth-provider": {"name": "oidc", "config": {**oidc, "id-token": "abc"}}},
        ),
    )
    yield one(
        "auth-provider-oidc-no-issuer",
        "auth-provider",
        _doc(
            {"server": SERVER},
            {
                "auth-provider": {
                    "name": "oidc",
                    "config": {"client-id": "k", "id-token": _jwt(4102444800)},
                }
            },
        ),
    )
    yield one(
        "auth-provider-oidc-no-client-id",
        "auth-provider",
        _doc(
            {"server": SERVER},
            {
                "auth-provider": {
                    "name": "oidc",
                    "config": {"idp-issuer-url": "https://i", "id-token": _jwt(4102444800)},
                }
            },
        ),
    )
    yield one(
        "auth-provider-oidc-no-token",
        "auth-provider",
        _doc({"server": SERVER}, {"auth-provider": {"name": "oidc", "config": oidc}}),
    )
    yield one(
        "auth-provider-oidc-bad-ca-data",
        "auth-provider",
        _doc(
            {"server": SERVER},
            {
                "auth-provider": {
                    "name": "oidc",
                    "config": {
                        **oidc,
                        "id-token": _jwt(4102444800),
                        "idp-certificate-authority-data": "!!",
                    },
                }
            },
        ),
    )
    yield one(
        "auth-provider-oidc-with-token",
        "auth-provider",
        _doc(
            {"server": SERVER},
            {
                "token": "t",
                "auth-provider": {"name": "oidc", "config": {**oidc, "id-token": _jwt(4102444800)}},
            },
        ),
    )
    yield one(
        "auth-provider-oidc-float-exp",
        "auth-provider",
        _doc(
            {"server": SERVER},
            {
                "auth-provider": {
                    "name": "oidc",
                    "config": {
                        **oidc,
                        "id-token": _jwt(4102444800).replace(
                            _jwt(4102444800).split(".")[1],
                            base64.urlsafe_b64encode(b'{"exp": 4102444800.5}').decode().rstrip("="),
                        ),
                    },
                }
            },
        ),
    )

    # --- proxies
    plain = _doc({"server": "https://api.example.com:6443"}, {"token": "t"})
    for name, env in [
        ("env-https-proxy", {"HTTPS_PROXY": "http://proxy:3128"}),
        ("env-https-proxy-lower", {"https_proxy": "http://lower:3128"}),
        (
            "env-https-proxy-both-cases",
            {"HTTPS_PROXY": "http://upper:3128", "https_proxy": "http://lower:3128"},
        ),
        ("env-https-proxy-upper-empty", {"HTTPS_PROXY": "", "https_proxy": "http://lower:3128"}),
        ("env-all-proxy-only", {"ALL_PROXY": "http://all:3128", "all_proxy": "http://all:3128"}),
        ("env-http-proxy-only", {"HTTP_PROXY": "http://plain:3128"}),
        ("env-proxy-no-scheme", {"HTTPS_PROXY": "proxy:3128"}),
        ("env-proxy-socks5", {"HTTPS_PROXY": "socks5://proxy:1080"}),
        ("env-proxy-https-scheme", {"HTTPS_PROXY": "https://proxy:3129"}),
        ("env-proxy-with-userinfo", {"HTTPS_PROXY": "http://user:pw@proxy:3128"}),
        ("env-proxy-garbage", {"HTTPS_PROXY": "http://[::1"}),
        ("no-proxy-exact", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "api.example.com"}),
        ("no-proxy-parent-domain", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "example.com"}),
        ("no-proxy-dot-domain", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": ".example.com"}),
        ("no-proxy-star-domain", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "*.example.com"}),
        ("no-proxy-other-domain", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "ample.com"}),
        ("no-proxy-host-port", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "api.example.com:6443"}),
        (
            "no-proxy-host-other-port",
            {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "api.example.com:443"},
        ),
        ("no-proxy-star", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "*"}),
        ("no-proxy-spaces", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": " foo , api.example.com "}),
        ("no-proxy-lower", {"HTTPS_PROXY": "http://p:1", "no_proxy": "api.example.com"}),
        (
            "no-proxy-upper-wins",
            {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "other", "no_proxy": "api.example.com"},
        ),
        ("no-proxy-upper-case-entry", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "API.Example.COM"}),
    ]:
        yield one(f"proxy-{name}", "proxies", plain, env=env)
    ip_doc = _doc({"server": "https://10.1.2.3:6443"}, {"token": "t"})
    for name, env in [
        ("cidr", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "10.0.0.0/8"}),
        ("cidr-miss", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "192.168.0.0/16"}),
        ("cidr-host-bits", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "10.1.2.3/8"}),
        ("cidr-leading-zero", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "010.0.0.0/8"}),
        ("cidr-with-space", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "foo, 10.0.0.0/8"}),
        ("ip-exact", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "10.1.2.3"}),
        ("ip-port", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "10.1.2.3:6443"}),
        ("ip-other-port", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "10.1.2.3:443"}),
        ("ip-as-domain-suffix", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": ".2.3"}),
    ]:
        yield one(f"proxy-ip-{name}", "proxies", ip_doc, env=env)
    for name, server in [
        ("loopback-ip", "https://127.0.0.1:6443"),
        ("loopback-other", "https://127.5.5.5:6443"),
        ("localhost", "https://localhost:6443"),
        ("localhost-upper", "https://LOCALHOST:6443"),
        ("ipv6-loopback", "https://[::1]:6443"),
        ("ipv6", "https://[fd00::1]:6443"),
        ("localhost-subdomain", "https://api.localhost:6443"),
    ]:
        yield one(
            f"proxy-server-{name}",
            "proxies",
            _doc({"server": server}, {"token": "t"}),
            env={"HTTPS_PROXY": "http://p:1", "NO_PROXY": "[fd00::1]" if name == "ipv6" else ""},
        )
    for name, url in [
        ("http", "http://proxy:3128"),
        ("https", "https://proxy:3129"),
        ("socks5", "socks5://proxy:1080"),
        ("socks5h", "socks5h://proxy:1080"),
        ("socks4", "socks4://proxy:1080"),
        ("ftp", "ftp://proxy"),
        ("no-scheme", "proxy:3128"),
        ("garbage", "http://[::1"),
        ("empty", ""),
        ("with-userinfo", "http://u:p@proxy:3128"),
        ("upper-scheme", "HTTP://proxy:3128"),
    ]:
        yield one(
            f"proxy-url-{name}",
            "proxies",
            _doc({"server": "https://api.example.com:6443", "proxy-url": url}, {"token": "t"}),
        )
    yield one(
        "proxy-url-despite-no-proxy",
        "proxies",
        _doc(
            {"server": "https://api.example.com:6443", "proxy-url": "http://proxy:3128"},
            {"token": "t"},
        ),
        env={"NO_PROXY": "*"},
    )
    yield one(
        "proxy-url-loopback-server",
        "proxies",
        _doc(
            {"server": "https://127.0.0.1:6443", "proxy-url": "http://proxy:3128"}, {"token": "t"}
        ),
    )
    yield one(
        "proxy-url-over-env",
        "proxies",
        _doc(
            {"server": "https://api.example.com:6443", "proxy-url": "http://mine:3128"},
            {"token": "t"},
        ),
        env={"HTTPS_PROXY": "http://env:3128"},
    )
    yield one(
        "proxy-env-http-server",
        "proxies",
        _doc({"server": "http://api.example.com:8080"}, {}),
        env={"HTTPS_PROXY": "http://secure:1", "HTTP_PROXY": "http://plain:1"},
    )
    yield one(
        "proxy-env-http-server-no-proxy-port",
        "proxies",
        _doc({"server": "http://api.example.com"}, {}),
        env={"HTTP_PROXY": "http://plain:1", "NO_PROXY": "api.example.com:80"},
    )
    yield one(
        "proxy-env-https-default-port",
        "proxies",
        _doc({"server": "https://api.example.com"}, {"token": "t"}),
        env={"HTTPS_PROXY": "http://p:1", "NO_PROXY": "api.example.com:443"},
    )
    yield one(
        "proxy-env-cgi",
        "proxies",
        _doc({"server": "http://api.example.com:8080"}, {}),
        env={"HTTP_PROXY": "http://plain:1", "REQUEST_METHOD": "GET"},
    )

    # --- server URLs
    for name, server in [
        ("upper-scheme", "HTTPS://10.0.0.1:6443"),
        ("mixed-scheme", "Https://10.0.0.1:6443"),
        ("path-prefix", "https://10.0.0.1:6443/k8s/clusters/c-1"),
        ("path-prefix-slash", "https://10.0.0.1:6443/k8s/"),
        ("trailing-slash", "https://10.0.0.1:6443/"),
        ("query", "https://10.0.0.1:6443?x=1"),
        ("query-and-path", "https://10.0.0.1:6443/p?x=1"),
        ("fragment", "https://10.0.0.1:6443/#frag"),
        ("ipv6", "https://[fd00::10]:6443"),
        ("ipv6-no-port", "https://[fd00::10]"),
        ("no-port", "https://10.0.0.1"),
        ("host-upper", "https://API.Example.COM:6443"),
        ("empty", ""),
        ("ftp", "ftp://10.0.0.1"),
        ("spaces", " https://10.0.0.1:6443 "),
        ("no-scheme-with-path", "10.0.0.1:6443/prefix"),
        ("double-slash-path", "https://h//x"),
        ("percent-path", "https://10.0.0.1:6443/a%20b"),
        ("unicode-host", "https://bücher.example"),
        ("port-only", ":6443"),
        ("bad-port", "https://10.0.0.1:99999"),
    ]:
        yield one(
            f"server-{name}",
            "servers",
            _doc({"server": server, "certificate-authority": "pki/ca.crt"}, {"token": "t"}),
        )
    yield one(
        "server-number",
        "servers",
        _doc({"server": SERVER}, {"token": "t"}).replace(
            "server: https://10.0.0.1:6443", "server: 8080"
        ),
    )
    yield one("server-missing", "servers", _doc({"insecure-skip-tls-verify": True}, {"token": "t"}))

    # --- namespaces and contexts
    yield one(
        "namespace-from-context",
        "namespaces",
        _doc({"server": SERVER}, {"token": "t"}, namespace="shop"),
    )
    yield one("namespace-none", "namespaces", _doc({"server": SERVER}, {"token": "t"}))
    yield one(
        "namespace-invalid",
        "namespaces",
        _doc({"server": SERVER}, {"token": "t"}, namespace="Not_A_Label"),
    )
    yield one(
        "namespace-number",
        "namespaces",
        _doc({"server": SERVER}, {"token": "t"}, namespace="x").replace(
            "namespace: x", "namespace: 42"
        ),
    )
    yield one(
        "namespace-too-long",
        "namespaces",
        _doc({"server": SERVER}, {"token": "t"}, namespace="n" * 64),
    )
    yield one(
        "namespace-pod-namespace-ignored",
        "namespaces",
        _doc({"server": SERVER}, {"token": "t"}, namespace="ctx-ns"),
        env={"POD_NAMESPACE": "pod-ns"},
    )
    yield one(
        "context-named", "namespaces", _doc({"server": SERVER}, {"token": "t"}), context="ctx"
    )
    yield one(
        "context-missing", "namespaces", _doc({"server": SERVER}, {"token": "t"}), context="nope"
    )
    yield one(
        "current-context-missing",
        "namespaces",
        _doc({"server": SERVER}, {"token": "t"}, current="gone"),
    )
    yield one(
        "current-context-empty", "namespaces", _doc({"server": SERVER}, {"token": "t"}, current="")
    )
    yield one(
        "context-user-missing",
        "namespaces",
        _doc({"server": SERVER}, {"token": "t"}).replace("user: u\n", "user: nobody\n"),
    )
    yield one(
        "context-cluster-missing",
        "namespaces",
        _doc({"server": SERVER}, {"token": "t"}).replace("cluster: c\n", "cluster: far\n"),
    )
    yield one(
        "context-without-user",
        "namespaces",
        _doc({"server": SERVER}, {"token": "t"}).replace("    user: u\n", ""),
    )
    yield one(
        "context-list-entry-without-name",
        "namespaces",
        _doc({"server": SERVER}, {"token": "t"})
        .replace("- name: ctx\n  context:", "- context:")
        .replace("current-context: ctx", "current-context: ''"),
    )
    yield one(
        "duplicate-cluster-names",
        "namespaces",
        _doc({"server": SERVER}, {"token": "t"}).replace(
            "clusters:\n", "clusters:\n- name: c\n  cluster:\n    server: https://9.9.9.9\n"
        ),
    )
    yield one(
        "duplicate-user-names-other-file",
        "namespaces",
        first,
        files={"2/config": _doc({"server": SERVER}, {"token": "two"})},
        env={"KUBECONFIG": "{root}/config:{root}/2/config"},
    )
    yield one(
        "user-is-a-list",
        "namespaces",
        _doc({"server": SERVER}, {}).replace("user: {}", "user: [a]"),
    )
    yield one(
        "clusters-is-a-map", "namespaces", "clusters: {c: {server: x}}\ncurrent-context: ctx\n"
    )

    # --- in-cluster
    def account(**files: str | bytes) -> dict[str, str | bytes]:
        return {f"sa/{name}": content for name, content in files.items()}

    service = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    good = account(token="sa-token\n", **{"ca.crt": m.ca, "namespace": "archfit"})
    for name, files, env in [
        ("plain", good, service),
        ("pod-namespace", good, {**service, "POD_NAMESPACE": "from-env"}),
        ("no-namespace-file", account(token="t", **{"ca.crt": m.ca}), service),
        ("empty-namespace-file", account(token="t", namespace=" \n", **{"ca.crt": m.ca}), service),
        ("ipv6", good, {**service, "KUBERNETES_SERVICE_HOST": "fd00::1"}),
        ("no-host", good, {"KUBERNETES_SERVICE_PORT": "443"}),
        ("no-port", good, {"KUBERNETES_SERVICE_HOST": "10.96.0.1"}),
        ("empty-host", good, {**service, "KUBERNETES_SERVICE_HOST": ""}),
        ("no-token", account(**{"ca.crt": m.ca}), service),
        ("empty-token", account(token="", **{"ca.crt": m.ca}), service),
        ("no-ca", account(token="t"), service),
        ("empty-ca", account(token="t", **{"ca.crt": ""}), service),
        ("garbage-ca", account(token="t", **{"ca.crt": "junk"}), service),
        ("ca-bundle", account(token="t", **{"ca.crt": m.ca + m.ca2}), service),
        ("token-whitespace", account(token="  spaced \n", **{"ca.crt": m.ca}), service),
        ("proxy-env", good, {**service, "HTTPS_PROXY": "http://p:1"}),
        (
            "proxy-env-no-proxy-cidr",
            good,
            {**service, "HTTPS_PROXY": "http://p:1", "NO_PROXY": "10.96.0.0/12"},
        ),
        (
            "kubeconfig-env-ignored",
            {**good, "config": first},
            {**service, "KUBECONFIG": "{root}/config"},
        ),
        ("hostname", good, {**service, "KUBERNETES_SERVICE_HOST": "kubernetes.default.svc"}),
    ]:
        yield Case(f"in-cluster-{name}", "in-cluster", files=files, env=env, mode="in-cluster")
    yield Case(
        "in-cluster-token-rotated",
        "in-cluster",
        files={**good, "sa/token.new": "rotated-sa-token"},
        env=service,
        mode="in-cluster",
        rotate=(("sa/token.new", "sa/token"),),
    )

    # --- hostile YAML and big files
    bomb = 'a: &a ["x","x","x","x","x","x","x","x","x"]\n'
    for level in "bcdefghij":
        previous = chr(ord(level) - 1)
        bomb += (
            f"{level}: &{level} [*{previous},*{previous},*{previous},*{previous},*{previous},"
            f"*{previous},*{previous},*{previous},*{previous}]\n"
        )
    yield one("hostile-alias-bomb-top-level", "hostile", bomb)
    yield one(
        "hostile-alias-bomb-in-namespace",
        "hostile",
        _doc({"server": SERVER}, {"token": "t"}, namespace="PLACEHOLDER")
        .replace("namespace: PLACEHOLDER", "namespace: *j")
        .replace("apiVersion: v1\n", "apiVersion: v1\nbomb:\n  " + bomb.replace("\n", "\n  ")),
    )
    yield one(
        "hostile-small-aliases",
        "hostile",
        "clusters:\n- name: c\n  cluster: &c {server: " + SERVER + "}\n"
        "- name: d\n  cluster: *c\nusers: [{name: u, user: &u {token: t}}]\n"
        "contexts: [{name: ctx, context: {cluster: d, user: u}}]\ncurrent-context: ctx\n",
    )
    yield one(
        "hostile-merge-key",
        "hostile",
        "base: &base {server: " + SERVER + "}\nclusters:\n- name: c\n  cluster:\n"
        "    <<: *base\n    insecure-skip-tls-verify: true\n"
        "users: [{name: u, user: {token: t}}]\ncurrent-context: ctx\n"
        "contexts: [{name: ctx, context: {cluster: c, user: u}}]\n",
    )
    yield one(
        "hostile-deep-nesting",
        "hostile",
        _doc({"server": SERVER}, {"token": "t"}) + "deep: " + "[" * 5000 + "]" * 5000 + "\n",
    )
    yield one("hostile-anchor-recursion", "hostile", "a: &a [*a]\n")
    yield one(
        "hostile-duplicate-keys",
        "hostile",
        _doc({"server": SERVER}, {"token": "first"}).replace(
            "token: first", "token: first\n    token: second"
        ),
    )
    yield one(
        "hostile-binary-tag",
        "hostile",
        _doc({"server": SERVER}, {"token": "t"}).replace("token: t", "token: !!binary c2VjcmV0"),
    )
    yield one(
        "hostile-str-tag-number",
        "hostile",
        _doc({"server": SERVER}, {"token": "t"}).replace("token: t", "token: !!str 123"),
    )
    yield one(
        "hostile-custom-tag",
        "hostile",
        _doc({"server": SERVER}, {"token": "t"}).replace("token: t", "token: !secret abc"),
    )
    yield one("hostile-invalid-utf8", "hostile", "x", files={"config": b"clusters: [\xff\xfe]\n"})
    yield one(
        "hostile-non-string-key",
        "hostile",
        _doc({"server": SERVER}, {"token": "t"}).replace("kind: Config", "kind: Config\n1: x"),
    )
    yield one("hostile-null-document", "hostile", "null\n")
    yield one(
        "hostile-octal-token",
        "hostile",
        _doc({"server": SERVER}, {}).replace("user: {}", "user:\n    token: 0o17"),
    )
    yield one(
        "hostile-float-token",
        "hostile",
        _doc({"server": SERVER}, {}).replace("user: {}", "user:\n    token: 1.5e3"),
    )

    # 20,000 clusters, ~1.5 MB, written as kubectl writes them (block style).
    def cluster(i: int) -> str:
        address = f"10.{i // 65536}.{i // 256 % 256}.{i % 256}"
        verify = "true" if i % 2 == 0 else "false"
        return (
            f"- name: cluster-{i}\n  cluster:\n    server: https://{address}:6443\n"
            f"    insecure-skip-tls-verify: {verify}\n"
        )

    many = (
        "apiVersion: v1\nkind: Config\nclusters:\n"
        + "".join(cluster(i) for i in range(20000))
        + "users:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: ctx\n  context:\n"
        "    cluster: cluster-19999\n    user: u\ncurrent-context: ctx\n"
    )
    yield one("large-20000-clusters", "hostile", many)


def _random_cases(m: Materials, rng: random.Random, count: int) -> Iterator[Case]:
    """Seeded combinations of ordinary fields: a server, how it is trusted, a user, proxies in
    the environment, the kubeconfig's proxy-url, a namespace, and how the files are laid out."""
    servers = [
        SERVER,
        "https://api.example.com",
        "https://api.example.com:443/",
        "HTTPS://api.example.com:6443",
        "https://[fd00::1]:6443",
        "http://10.0.0.1:8080",
        "https://10.0.0.1:6443/prefix",
        "https://10.0.0.1/prefix/?q=1",
        "https://127.0.0.1:6443",
        "https://localhost:6443",
        "10.0.0.1:6443",
        "https://api.internal.example.com:6443",
    ]
    trust: list[dict[str, Any]] = [
        {},
        {"certificate-authority": "pki/ca.crt"},
        {"certificate-authority": "{root}/pki/ca.crt"},
        {"certificate-authority-data": _b64(m.ca)},
        {"insecure-skip-tls-verify": True},
        {"insecure-skip-tls-verify": True, "certificate-authority": "pki/ca.crt"},
        {"tls-server-name": "kubernetes", "certificate-authority-data": _b64(m.ca)},
        {"certificate-authority": "pki/bundle.crt"},
        {"certificate-authority": "pki/empty.crt"},
        {"insecure-skip-tls-verify": False, "certificate-authority-data": _b64(m.ca2)},
    ]
    cert_user = {"client-certificate": "pki/client.crt", "client-key": "pki/client.key"}
    users: list[dict[str, Any]] = [
        {"token": "tok"},
        {"tokenFile": "token"},
        {"token": "inline", "tokenFile": "token"},
        cert_user,
        {"client-certificate-data": _b64(m.client_cert), "client-key-data": _b64(m.client_key)},
        {"username": "admin", "password": "pw"},
        _exec(),
        _exec("expired"),
        _exec(version="client.authentication.k8s.io/v1beta1", mode=None),
        {
            "auth-provider": {
                "name": "oidc",
                "config": {
                    "idp-issuer-url": "https://i.example",
                    "client-id": "c",
                    "id-token": _jwt(4102444800),
                },
            }
        },
        {},
        {"token": "tok", "as": "alice", "as-groups": ["a"]},
    ]
    proxies: list[dict[str, str]] = [
        {},
        {},
        {"HTTPS_PROXY": "http://proxy:3128"},
        {"https_proxy": "http://lower:3128"},
        {"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "api.example.com"},
        {"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": ".example.com"},
        {"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "10.0.0.0/8,[fd00::1]"},
        {"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "*"},
        {"ALL_PROXY": "http://all:3128"},
        {"HTTP_PROXY": "http://plain:3128"},
        {"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "example.com:6443"},
    ]
    proxy_urls = ["", "", "", "", "http://mine:3128", "socks5://mine:1080", "https://mine:3129"]
    namespaces = [None, None, "shop", "kube-system", "Bad_NS"]
    layouts = ["env", "explicit", "split", "home"]
    files = {
        "pki/ca.crt": m.ca,
        "pki/ca2.crt": m.ca2,
        "pki/bundle.crt": m.ca + m.ca2,
        "pki/client.crt": m.client_cert,
        "pki/client.key": m.client_key,
        "pki/empty.crt": b"",
        "token": "file-token\n",
        "bin/kplug": WRAPPER,
    }
    for index in range(count):
        cluster = {"server": rng.choice(servers), **rng.choice(trust)}
        proxy_url = rng.choice(proxy_urls)
        if proxy_url:
            cluster["proxy-url"] = proxy_url
        user = rng.choice(users)
        env = dict(rng.choice(proxies))
        text = _doc(cluster, user, namespace=rng.choice(namespaces))
        layout = rng.choice(layouts)
        name = f"random-{index:03d}-{layout}"
        if layout == "env":
            yield Case(
                name,
                "random",
                files={**files, "config": text},
                env={**env, "KUBECONFIG": "{root}/config"},
            )
        elif layout == "explicit":
            yield Case(
                name, "random", files={**files, "k/config": text}, env=env, kubeconfig="k/config"
            )
        elif layout == "home":
            yield Case(name, "random", files={**files, "home/.kube/config": text}, env=env)
        else:
            document = yaml.safe_load(text)
            half = yaml.safe_dump({"clusters": document["clusters"]})
            rest = yaml.safe_dump(
                {key: value for key, value in document.items() if key != "clusters"}
            )
            yield Case(
                name,
                "random",
                files={**files, "config": rest, "c/config": half, "c/pki/ca.crt": m.ca2},
                env={**env, "KUBECONFIG": "{root}/config:{root}/c/config"},
            )


def corpus(m: Materials, *, seed: int = SEED, random_cases: int = RANDOM_CASES) -> list[Case]:
    """The catalog, then `random_cases` seeded combinations."""
    cases = [*catalog(m), *_random_cases(m, random.Random(seed), random_cases)]
    names = [case.name for case in cases]
    duplicated = {name for name in names if names.count(name) > 1}
    assert not duplicated, f"corpus: case names used twice: {sorted(duplicated)}"
    return cases


def fill(text: str, values: Mapping[str, str]) -> str:
    """`text` with {root}, {python} and {plugin} filled in (other braces kept)."""
    for key, value in values.items():
        text = text.replace("{" + key + "}", value)
    return text


def materialize(case: Case, root: Path, values: Mapping[str, str]) -> dict[str, str]:
    """Write the case's files under `root`; return its environment."""
    for name, content in case.files.items():
        path = root / fill(name, values)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else fill(content, values).encode())
        if name.startswith("bin/"):
            path.chmod(0o755)
    (root / "home").mkdir(exist_ok=True)
    (root / "sa").mkdir(exist_ok=True)
    env = {"HOME": f"{root}/home", "PATH": f"{root}/bin:/usr/bin:/bin"}
    env.update({key: fill(value, values) for key, value in case.env.items()})
    return env
