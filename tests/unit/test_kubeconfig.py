"""kubeconfig files read natively (extender.kube.kubeconfig), as kubectl reads them: tokens,
token files, certificates as files or data, merged files, contexts; what goes to the client
package; and the in-cluster service account."""

from __future__ import annotations

import base64
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from extender.config.settings import KubernetesSettings
from extender.kube.client import build_api_client, context_names, current_namespace
from extender.kube.connection import TokenFile, in_cluster
from extender.kube.errors import KubeConfigError
from extender.kube.kubeconfig import read_kubeconfig
from tests.support.json_server import json_server


def _write(path: Path, **config: Any) -> Path:
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", **config}))
    return path


def _one(path: Path, user: dict[str, Any], cluster: dict[str, Any] | None = None, **more: Any):
    return _write(
        path,
        clusters=[{"name": "c", "cluster": cluster or {"server": "https://10.0.0.1:6443/"}}],
        users=[{"name": "u", "user": user}],
        contexts=[{"name": "ctx", "context": {"cluster": "c", "user": "u", "namespace": "shop"}}],
        **{"current-context": "ctx", **more},
    )


def test_a_written_token_is_sent_as_a_bearer_token_to_the_server_without_its_slash(tmp_path):
    """The host loses its trailing slash, as the client's did."""
    connection = read_kubeconfig(str(_one(tmp_path / "config", {"token": "abc"}))).connection()
    assert ("https://10.0.0.1:6443", "Bearer abc") == (
        connection.host,
        connection.credentials.authorization(),
    )


def test_a_token_file_relative_to_the_kubeconfig_is_read_again_when_it_changes(tmp_path):
    """kubelet and other token projectors replace the file; the next call sends the new one."""
    (tmp_path / "token").write_text("first\n")
    config = _one(tmp_path / "config", {"tokenFile": "token"})
    credentials = read_kubeconfig(str(config)).connection().credentials
    said = [credentials.authorization()]
    replacement = tmp_path / "token.new"
    replacement.write_text("second")
    os.replace(replacement, tmp_path / "token")
    said.append(credentials.authorization())
    assert ["Bearer first", "Bearer second"] == said


def test_an_unchanged_token_file_is_read_again_after_a_minute(tmp_path):
    """client-go's cached token source: re-read periodically, even if no change was noticed."""
    token = tmp_path / "token"
    token.write_text("first")
    now = [0.0]
    source = TokenFile(token, reread_seconds=60, clock=lambda: now[0])
    said = [source.authorization()]
    stat = token.stat()
    token.write_text("again")
    os.utime(token, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # a change no stamp shows
    said.append(source.authorization())
    now[0] = 61.0
    said.append(source.authorization())
    assert ["Bearer first", "Bearer first", "Bearer again"] == said


def test_certificates_as_data_are_decoded_and_as_files_resolved_next_to_the_kubeconfig(tmp_path):
    """certificate-authority-data is PEM once decoded; client-certificate is a relative path."""
    (tmp_path / "pki").mkdir()
    for name in ("client.crt", "client.key"):
        (tmp_path / "pki" / name).write_text("PEM")
    pem = b"-----BEGIN CERTIFICATE-----\n"
    config = _one(
        tmp_path / "config",
        {"client-certificate": "pki/client.crt", "client-key": "pki/client.key"},
        {"server": "https://h:6443", "certificate-authority-data": base64.b64encode(pem).decode()},
    )
    connection = read_kubeconfig(str(config)).connection()
    assert (pem.decode(), str(tmp_path / "pki/client.crt"), str(tmp_path / "pki/client.key")) == (
        connection.ca_data,
        connection.cert_file,
        connection.key_file,
    )


def test_tls_server_name_insecure_and_proxy_url_are_kept(tmp_path):
    """The cluster's other fields the client honoured."""
    cluster = {
        "server": "https://h:6443",
        "insecure-skip-tls-verify": True,
        "tls-server-name": "kubernetes.default",
        "proxy-url": "http://proxy:3128",
    }
    connection = read_kubeconfig(str(_one(tmp_path / "c", {"token": "t"}, cluster))).connection()
    assert (False, "kubernetes.default", "http://proxy:3128") == (
        connection.verify,
        connection.tls_server_name,
        connection.proxy,
    )


def test_merged_files_keep_the_first_of_each_name_and_the_first_current_context(tmp_path):
    """kubectl's rule for a $KUBECONFIG list: the first file to set a value wins."""
    first = _write(
        tmp_path / "first",
        clusters=[{"name": "c", "cluster": {"server": "https://first:6443"}}],
        users=[{"name": "u", "user": {"token": "first"}}],
        contexts=[{"name": "a", "context": {"cluster": "c", "user": "u"}}],
        **{"current-context": "a"},
    )
    second = _write(
        tmp_path / "second",
        clusters=[
            {"name": "c", "cluster": {"server": "https://second:6443"}},
            {"name": "d", "cluster": {"server": "https://d:6443"}},
        ],
        users=[{"name": "u", "user": {"token": "second"}}],
        contexts=[{"name": "b", "context": {"cluster": "d", "user": "u", "namespace": "bee"}}],
        **{"current-context": "b"},
    )
    merged = read_kubeconfig(f"{first}{os.pathsep}{tmp_path / 'absent'}{os.pathsep}{second}")
    current, other = merged.connection(), merged.connection("b")
    assert (
        ["a", "b"],
        "https://first:6443",
        "Bearer first",
        "https://d:6443",
        "bee",
    ) == (
        merged.context_names(),
        current.host,
        current.credentials.authorization(),
        other.host,
        merged.namespace("b"),
    )


def test_an_exec_user_is_left_to_the_client_package(tmp_path):
    """exec plugins (and auth providers, passwords) are what `kubernetes` alone can run."""
    exec_user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "true"}}
    assert None is read_kubeconfig(str(_one(tmp_path / "config", exec_user))).connection()


def test_a_context_the_files_lack_is_named(tmp_path):
    """The message names the context and where it was looked for."""
    config = _one(tmp_path / "config", {"token": "t"})
    with pytest.raises(KubeConfigError) as raised:
        read_kubeconfig(str(config)).connection("prod")
    assert (
        f"Invalid kube-config file. Expected object with name prod in {config}/contexts list"
        == str(raised.value)
    )


def test_the_namespace_and_context_names_follow_the_kubernetes_settings(tmp_path):
    """`kubernetes.context` chooses the context; a missing one means `default`."""
    config = str(_one(tmp_path / "config", {"token": "t"}))
    chosen = KubernetesSettings(mode="kubeconfig", kubeconfig=config)
    missing = KubernetesSettings(mode="kubeconfig", kubeconfig=config, context="nope")
    assert ("shop", "default", ["ctx"]) == (
        current_namespace(chosen),
        current_namespace(missing),
        context_names(chosen),
    )


def test_in_cluster_reads_the_service_account_and_brackets_an_ipv6_host(tmp_path):
    """The token is read through the same re-reading source as a kubeconfig's tokenFile."""
    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "ca.crt").write_text("PEM")
    environ = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    connection = in_cluster(environ, tmp_path)
    assert ("https://[fd00::1]:443", str(tmp_path / "ca.crt"), "Bearer sa-token") == (
        connection.host,
        connection.ca_file,
        connection.credentials.authorization(),
    )


def test_in_cluster_without_a_token_says_so_as_the_client_did(tmp_path):
    """The `kubernetes` package's own words, which operators search for."""
    environ = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    with pytest.raises(KubeConfigError) as raised:
        in_cluster(environ, tmp_path)
    assert "Service token file does not exist." == str(raised.value)


@pytest.fixture
def echo_server() -> Iterator[str]:
    """Answers the Authorization header it was sent."""
    with json_server(lambda _path, headers: {"authorization": headers.get("Authorization")}) as url:
        yield url


def test_an_exec_plugin_user_authenticates_through_the_client_packages_loader(
    tmp_path, echo_server
):
    """The package runs the plugin; archfit's client sends the token the plugin printed."""
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "import json\nprint(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', "
        "'kind': 'ExecCredential', 'status': {'token': 'from-plugin'}}))\n"
    )
    exec_user = {"exec": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
        "args": [str(plugin)], "interactiveMode": "Never",
    }}  # fmt: skip
    config = _one(tmp_path / "config", exec_user, {"server": echo_server})
    api = build_api_client(KubernetesSettings(mode="kubeconfig", kubeconfig=str(config)))
    assert api is not None
    with api:
        said = api.get("/api/v1/namespaces/a/secrets/b", timeout=5)
    assert {"authorization": "Bearer from-plugin"} == said
