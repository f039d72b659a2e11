"""kubeconfig files and the pod's service account read as client-go reads them
(extender.kube.client): the rules that decide where credentials go, each as one table row or
one case. tests/clientgo/test_differential.py checks the whole against client-go itself."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from extender.config.settings import KubernetesSettings
from extender.kube.client import yaml_values
from extender.kube.client.errors import CredentialUnavailable, KubeConfigError
from extender.kube.client.kubeconfig import ClientConfig, LoadingRules, load_rules, read_files
from extender.kube.client.rest_config import in_cluster, in_cluster_namespace
from extender.kube.client.transport import TOKEN_FILE_SECONDS, TokenFile
from extender.kube.connect import build_api_client, context_names, current_namespace, namespace
from tests.support.clock import FakeClock
from tests.support.json_server import json_server


def _write(path: Path, **config: Any) -> Path:
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", **config}))
    return path


def _one(path: Path, user: dict[str, Any], cluster: dict[str, Any] | None = None) -> Path:
    return _write(
        path,
        clusters=[{"name": "c", "cluster": cluster or {"server": "https://10.0.0.1:6443/"}}],
        users=[{"name": "u", "user": user}],
        contexts=[{"name": "ctx", "context": {"cluster": "c", "user": "u", "namespace": "shop"}}],
        **{"current-context": "ctx"},
    )


def _config(path: Path, context: str = "") -> ClientConfig:
    return ClientConfig(read_files(LoadingRules(explicit=str(path))), context)


def test_a_token_file_is_read_again_once_client_gos_minute_is_up(tmp_path):
    """client-go's cached file token source: a token is kept 60 s less 10 s of leeway."""
    token = tmp_path / "token"
    token.write_text("first\n")
    clock = FakeClock()
    source = TokenFile(str(token), clock=clock)
    said = [source.token()]
    token.write_text("second")
    said.append(source.token())
    clock.advance(TOKEN_FILE_SECONDS)
    said.append(source.token())
    assert ["first", "first", "second"] == said


def test_a_token_file_that_cannot_be_read_again_keeps_the_last_token(tmp_path):
    """The old token may still be valid; the API server says so if it is not."""
    token = tmp_path / "token"
    token.write_text("kept")
    clock = FakeClock()
    source = TokenFile(str(token), clock=clock)
    source.token()
    token.unlink()
    clock.advance(TOKEN_FILE_SECONDS)
    assert "kept" == source.token()


def test_a_token_file_never_read_is_an_error_saying_which_file(tmp_path):
    """No token at all: the request is not sent, and the error names the file."""
    with pytest.raises(CredentialUnavailable, match="nothing-here"):
        TokenFile(str(tmp_path / "nothing-here")).token()


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("y", True), ("off", False), ("'yes'", "yes"), ("~", None), ("017", 15), ("08", 8.0),
        ("0x1f", 31), ("1_000", 1000), ("2024-01-02", "2024-01-02"), ("!!str 12", "12"),
        ("!custom 5", "5"), (".5", 0.5), ("1e3", 1000.0), ("+12", 12), ("0b101", 5),
    ],
)  # fmt: skip
def test_a_scalar_means_what_go_yaml_v2_makes_of_it(text, value):
    """go-yaml v2's resolve table, not PyYAML's: `y` is true, `017` octal, a date a string."""
    assert {"k": value} == yaml_values.first_document(f"k: {text}\n".encode())


def test_an_alias_bomb_is_refused_as_go_yaml_refuses_it():
    """Nine levels of nine aliases: refused after a few thousand decodes, never expanded."""
    bomb = 'a: &a ["x","x","x","x","x","x","x","x","x"]\n'
    for level in "bcdefghij":
        previous = "*" + chr(ord(level) - 1)
        bomb += f"{level}: &{level} [{','.join([previous] * 9)}]\n"
    with pytest.raises(yaml_values.YAMLError, match="excessive aliasing"):
        yaml_values.first_document(bomb.encode())


def test_only_the_first_yaml_document_is_read_and_merge_keys_merge():
    """sigs.k8s.io/yaml reads one document; `<<` merges a map, later keys winning."""
    text = b"base: &b {x: 1, z: 1}\nm: {<<: *b, z: 2}\n---\nignored: true\n"
    assert {"base": {"x": 1, "z": 1}, "m": {"x": 1, "z": 2}} == yaml_values.first_document(text)


@pytest.mark.parametrize(
    ("value", "refused"),
    [("true", False), ("false", False), ('"false"', True), ("yes", False), ("1", True)],
)
def test_a_bool_field_takes_a_yaml_bool_and_refuses_a_string(tmp_path, value, refused):
    """`insecure-skip-tls-verify: "false"` is an error, as in client-go, never "verify off"."""
    path = _one(tmp_path / "config", {"token": "t"})
    path.write_text(
        path.read_text().replace("server:", f"insecure-skip-tls-verify: {value}\n    server:")
    )
    if refused:
        with pytest.raises(KubeConfigError, match="cannot unmarshal"):
            read_files(LoadingRules(explicit=str(path)))
    else:
        read_files(LoadingRules(explicit=str(path)))


def test_merged_files_keep_the_first_of_each_name_and_resolve_paths_against_their_own_file(
    tmp_path,
):
    """kubectl's rules for a $KUBECONFIG list: the first file to name an entry wins it whole;
    a relative path is relative to the file that wrote it; `~` in a file is not expanded."""
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    first = _write(
        tmp_path / "one" / "config",
        users=[{"name": "u", "user": {"tokenFile": "~/token", "as": "alice"}}],
        contexts=[{"name": "a", "context": {"cluster": "c", "user": "u"}}],
        **{"current-context": "a"},
    )
    second = _write(
        tmp_path / "two" / "config",
        clusters=[{"name": "c", "cluster": {"server": "https://h", "certificate-authority": "ca"}}],
        users=[{"name": "u", "user": {"token": "second"}}],
        **{"current-context": "b"},
    )
    environ = {"KUBECONFIG": f"{first}{os.pathsep}{tmp_path / 'absent'}{os.pathsep}{second}"}
    merged = read_files(load_rules("", environ))
    assert (
        "a",
        str(tmp_path / "one" / "~" / "token"),
        "alice",
        str(tmp_path / "two" / "ca"),
    ) == (
        merged.current_context,
        merged.users["u"].token_file,
        merged.users["u"].impersonate,
        merged.clusters["c"].certificate_authority,
    )


@pytest.mark.parametrize("server", ["http://10.0.0.1:8080", "10.0.0.1:6443", "localhost"])
def test_no_credential_goes_to_a_server_that_is_not_tls(tmp_path, server):
    """client-go merges the user's credentials only when the transport is TLS."""
    config = _config(_one(tmp_path / "config", {"token": "t", "username": ""}, {"server": server}))
    found = config.rest_config()
    assert ("", None) == (found.bearer_token, found.exec)


def test_a_plain_http_server_is_sent_no_token_on_the_wire(tmp_path):
    """The request reaches the server without an Authorization header."""
    with json_server(lambda _path, headers: {"sent": headers.get("Authorization")}) as url:
        config = _one(tmp_path / "config", {"token": "secret"}, {"server": url})
        api = build_api_client(
            KubernetesSettings(mode="kubeconfig", kubeconfig=str(config)), environ={}
        )
        assert api is not None
        with api:
            assert {"sent": None} == api.get("/api/v1/nodes", timeout=5)


def test_impersonation_fields_become_impersonate_headers(tmp_path):
    """`as`, `as-uid`, `as-groups` and `as-user-extra` act as someone else, as kubectl does."""
    user = {"token": "t", "as": "alice", "as-uid": "7", "as-groups": ["a", "b"]}
    user["as-user-extra"] = {"team/x y": ["z"]}
    config = _config(_one(tmp_path / "config", user))
    api = build_api_client(
        KubernetesSettings(mode="kubeconfig", kubeconfig=str(tmp_path / "config")), environ={}
    )
    assert api is not None
    assert config.rest_config().impersonation is not None
    headers, _ = api.transport.headers()
    assert [
        ("Impersonate-User", "alice"),
        ("Impersonate-Uid", "7"),
        ("Impersonate-Group", "a"),
        ("Impersonate-Group", "b"),
        ("Impersonate-Extra-team%2Fx%20y", "z"),
    ] == [(name, value) for name, value in headers if name.startswith("Impersonate")]


def test_a_ca_with_verification_off_is_refused(tmp_path):
    """client-go: "specifying a root certificates file with the insecure flag is not allowed"."""
    (tmp_path / "ca.crt").write_text("x")
    cluster = {
        "server": "https://h",
        "insecure-skip-tls-verify": True,
        "certificate-authority": "ca.crt",
    }
    _one(tmp_path / "config", {"token": "t"}, cluster)
    settings = KubernetesSettings(mode="kubeconfig", kubeconfig=str(tmp_path / "config"))
    with pytest.raises(KubeConfigError, match="insecure flag is not allowed"):
        build_api_client(settings, environ={})


def test_a_context_the_files_lack_is_named(tmp_path):
    """As clientcmd says it."""
    with pytest.raises(KubeConfigError, match='context "prod" does not exist'):
        _config(_one(tmp_path / "config", {"token": "t"}), "prod").rest_config()


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


@pytest.fixture
def account(tmp_path: Path) -> Path:
    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "ca.crt").write_text("PEM")
    (tmp_path / "namespace").write_text("archfit\n")
    return tmp_path


def test_in_cluster_reads_the_service_account_and_brackets_an_ipv6_host(account):
    """The token file is read as it rotates; the CA is the account's."""
    environ = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    config = in_cluster(environ, account)
    assert ("https://[fd00::1]:443", str(account / "ca.crt"), str(account / "token")) == (
        config.host,
        config.ca_file,
        config.bearer_token_file,
    )


def test_in_cluster_the_namespace_is_pod_namespace_first(account):
    """clientcmd in a pod: POD_NAMESPACE, then the account's namespace file."""
    settings = KubernetesSettings(mode="in-cluster")
    environ = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    assert ("from-env", "archfit") == (
        in_cluster_namespace({"POD_NAMESPACE": "from-env"}, account),
        namespace(settings, environ, account),
    )


def test_in_cluster_without_the_service_variables_says_which(account):
    """client-go's words."""
    with pytest.raises(
        KubeConfigError, match="KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT"
    ):
        in_cluster({}, account)
