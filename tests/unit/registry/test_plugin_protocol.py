"""kubelet's CredentialProviderConfig and plugin answers, read and checked."""

from __future__ import annotations

import json

import pytest

from extender.registry.plugin_protocol import (
    PluginAnswerError,
    PluginConfigError,
    Provider,
    load_config,
    parse_answer,
    parse_duration,
)

V1 = "credentialprovider.kubelet.k8s.io/v1"
PROVIDER = Provider("ecr-credential-provider", ("*.dkr.ecr.*.amazonaws.com",), 43200.0, V1)
CONFIG = """
apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: ecr-credential-provider
  matchImages: ["*.dkr.ecr.*.amazonaws.com", "*.dkr.ecr.*.amazonaws.com.cn"]
  defaultCacheDuration: 12h
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  args: [get-credentials]
  env: [{name: AWS_PROFILE, value: archfit}]
"""


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("12h", 43200.0), ("1h30m", 5400.0), ("0", 0.0), ("0s", 0.0), ("1.5s", 1.5), ("500ms", 0.5)],
)
def test_go_durations_are_read_as_seconds(text: str, seconds: float) -> None:
    """metav1.Duration strings, as kubelet reads defaultCacheDuration and cacheDuration."""
    assert seconds == parse_duration(text)


@pytest.mark.parametrize("text", ["", "12", "h", "1d", "1h 30m", "ten minutes"])
def test_strings_that_are_not_go_durations_are_refused(text: str) -> None:
    """No unit, unknown units and spaces are errors, as in Go."""
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_a_kubelet_config_file_is_read_whole() -> None:
    """The shipped EKS config: name, globs, default cache, version, args and env."""
    (provider,) = load_config(CONFIG.encode(), "config.yaml")
    expected = (
        "ecr-credential-provider",
        ("*.dkr.ecr.*.amazonaws.com", "*.dkr.ecr.*.amazonaws.com.cn"),
        43200.0,
        V1,
        ("get-credentials",),
        (("AWS_PROFILE", "archfit"),),
    )
    actual = (
        provider.name,
        provider.match_images,
        provider.default_cache_seconds,
        provider.api_version,
        provider.args,
        provider.env,
    )
    assert expected == actual


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("name", "../bin/sh"), r"providers\[0\]\.name"),
        (("matchImages", []), r"providers\[0\]\.matchImages"),
        (("defaultCacheDuration", None), r"providers\[0\]\.defaultCacheDuration"),
        (("defaultCacheDuration", "-1h"), "must not be negative"),
        (("apiVersion", "credentialprovider.kubelet.k8s.io/v2"), r"providers\[0\]\.apiVersion"),
        (("env", [{"value": "x"}]), r"providers\[0\]\.env\[0\]"),
        (("tokenAttributes", {"serviceAccountTokenAudience": "x"}), "not supported"),
        (("env", [{"name": "A", "value": "x\u0000y"}]), r"providers\[0\]\.env\[0\]: a NUL"),
        (("args", ["--x\u0000"]), r"providers\[0\]\.args: a NUL"),
    ],
)
def test_a_bad_provider_entry_is_named_in_the_error(
    change: tuple[str, object], message: str
) -> None:
    """Each invalid field fails the whole file, naming the field (kubelet refuses to start)."""
    import yaml

    document = yaml.safe_load(CONFIG)
    key, value = change
    document["providers"][0][key] = value
    with pytest.raises(PluginConfigError, match=message):
        load_config(json.dumps(document).encode(), "config.yaml")


@pytest.mark.parametrize(
    ("image", "matches"),
    [
        ("123456789012.dkr.ecr.us-east-1.amazonaws.com/team/api", True),
        ("123456789012.dkr.ecr.us-east-1.amazonaws.com:443/team/api", False),  # ports differ
        ("dkr.ecr.us-east-1.amazonaws.com/team/api", False),  # one label short
        ("docker.io/library/nginx", False),
    ],
)
def test_match_images_globs_follow_the_docker_config_key_rules(image: str, matches: bool) -> None:
    """A `*` per domain label, same label count, equal ports."""
    assert matches == PROVIDER.matches(image)


def answer(**fields: object) -> bytes:
    document = {"apiVersion": V1, "kind": "CredentialProviderResponse", "cacheKeyType": "Image"}
    return json.dumps({**document, **fields}).encode()


def test_an_answer_gives_its_credentials_under_their_keys() -> None:
    """auth keys become keyring keys; the password is kept but never shown."""
    auth = {"https://*.dkr.ecr.*.amazonaws.com": {"username": "AWS", "password": "tok3n"}}
    decoded = parse_answer(answer(cacheDuration="6h", auth=auth), PROVIDER)
    ((key, credential),) = decoded.auth
    shown = (
        decoded.cache_key_type,
        decoded.cache_seconds,
        key,
        credential.username,
        repr(credential),
    )
    assert ("Image", 21600.0, "*.dkr.ecr.*.amazonaws.com", "AWS", False) == (
        *shown[:4],
        "tok3n" in shown[4],
    )


@pytest.mark.parametrize(
    "raw",
    [
        b"tok3n is not json",
        b"[]",
        answer(apiVersion="credentialprovider.kubelet.k8s.io/v1beta1"),
        answer(kind="CredentialProviderRequest"),
        answer(cacheKeyType="Pod"),
        answer(cacheDuration=5),
        answer(auth={"x": {"username": "u", "password": 7}}),
        answer(auth=["tok3n"]),
    ],
)
def test_an_unusable_answer_is_refused_without_quoting_it(raw: bytes) -> None:
    """kubelet's checks; the error text never carries what the plugin printed."""
    with pytest.raises(PluginAnswerError) as caught:
        parse_answer(raw, PROVIDER)
    assert "tok3n" not in str(caught.value)
