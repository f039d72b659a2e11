"""Pull secrets and kubelet's key matching, tabled from kubelet's keyring test vectors."""

from __future__ import annotations

import json

import pytest

from extender.registry.pure.credentials import (
    DOCKER_CONFIG_JSON,
    DOCKERCFG,
    Credential,
    CredentialChain,
    CredentialError,
    Keyring,
    PullSecret,
    config_file_entries,
    key_matches,
    keyring,
    secret_entries,
)
from extender.registry.pure.reference import parse
from tests.support.pull_secrets import auth_field, b64, docker_config, pull_secret_of

# (config key, image domain/path, match?) from kubelet's TestUrlsMatch,
# TestDockerKeyringForGlob (lookups append /foo/bar) and TestKeyringMiss.
MATCHES = [
    ("*.kubernetes.io", "prefix.kubernetes.io", True),
    ("prefix.*.io", "prefix.kubernetes.io", True),
    ("prefix.kubernetes.*", "prefix.kubernetes.io", True),
    ("*-good.kubernetes.io", "prefix-good.kubernetes.io", True),
    ("*.kubernetes.io/blah", "prefix.kubernetes.io/blah", True),
    ("prefix.*.io/foo", "prefix.kubernetes.io/foo/bar", True),
    ("*.kubernetes.io:1111/blah", "prefix.kubernetes.io:1111/blah", True),
    ("prefix.*.io:1111/foo", "prefix.kubernetes.io:1111/foo/bar", True),
    ("*.kubernetes.io", "kubernetes.io", False),
    ("*.*.kubernetes.io", "prefix.kubernetes.io", False),
    ("*.*.kubernetes.io", "kubernetes.io", False),
    ("kubernetes.io", "kubernetes.com", False),
    ("k*.io", "quay.io", False),
    ("*.kubernetes.io:1234/blah", "prefix.kubernetes.io:1111/blah", False),
    ("prefix.*.io/foo", "prefix.kubernetes.io:1111/foo/bar", False),
    ("https://hello.kubernetes.io", "hello.kubernetes.io/foo/bar", True),
    ("https://*.docker.io", "prefix.docker.io/foo/bar", True),
    ("https://prefix.docker.*/path", "prefix.docker.io/path/foo/bar", True),
    ("https://*.docker.io:8888", "prefix.docker.io:8888/foo/bar", True),
    ("https://*.docker.io/path:1111", "prefix.docker.io/path:1111/foo/bar", True),
    ("https://*.docker.io/v1/", "prefix.docker.io/path:1111/foo/bar", True),
    ("https://*.docker.io/v2/", "prefix.docker.io/path:1111/foo/bar", True),
    ("prefix.docker.io:1111", "prefix.docker.io:1111/path/foo/bar", True),
    ("*.docker.io:1111", "prefix.docker.io:1111/path/foo/bar", True),
    ("https://hello.kubernetes.io", "world.mesos.org/foo/bar", False),
    ("https://*.docker.com", "prefix.docker.io/foo/bar", False),
    ("https://suffix.*.io", "prefix.docker.io/foo/bar", False),
    ("https://prefix.docker.c*", "prefix.docker.io/foo/bar", False),
    ("https://prefix.*.io/path:1111", "prefix.docker.io/path/subpath:1111/foo/bar", False),
    ("suffix.*.io", "prefix.docker.io/foo/bar", False),
    ("https://quay.io/v1/", "quay.io/foo/bar", True),
    ("http://registry.local:5000/v2/team", "registry.local:5000/team/app", True),
    ("registry.local:5000", "registry.local/team/app", False),
]


@pytest.mark.parametrize(("key", "target", "expected"), MATCHES)
def test_a_config_key_matches_an_image_by_kubelets_rules(
    key: str, target: str, expected: bool
) -> None:
    """Scheme and /v1/ stripped; labels globbed one by one; ports equal; paths prefix."""
    assert expected == key_matches(key, target)


def test_more_specific_keys_come_first_as_in_kubelet() -> None:
    """bar.example.com/pong before bar.example.com (reverse-sorted keys)."""
    secret = pull_secret_of(
        DOCKERCFG,
        {
            "bar.example.com": {"username": "ada", "password": "smash"},
            "bar.example.com/pong": {"username": "grace", "password": "squash"},
        },
    )
    ring, _ = keyring([secret])
    found = ring.lookup(parse("bar.example.com/pongz"))
    assert ["grace", "ada"] == [c.username for c in found]


def test_a_host_without_a_key_finds_nothing() -> None:
    """foo.example.com does not match bar.example.com."""
    ring, _ = keyring(
        [pull_secret_of(DOCKERCFG, {"bar.example.com": {"auth": auth_field("a", "b")}})]
    )
    assert [] == ring.lookup(parse("foo.example.com/app"))


def test_docker_hub_credentials_under_the_legacy_key_serve_docker_io_images() -> None:
    """`https://index.docker.io/v1/` serves `nginx` and `google/app`, never other hosts."""
    payload = {"auths": {"https://index.docker.io/v1/": {"auth": auth_field("hub", "pw")}}}
    ring, _ = keyring([pull_secret_of(DOCKER_CONFIG_JSON, payload)])
    found = [
        len(ring.lookup(parse(image)))
        for image in ("nginx", "google/docker-registry", "world.mesos.org/foo/bar")
    ]
    assert [1, 1, 0] == found


def test_the_auth_field_overrides_username_and_password() -> None:
    """`auth` (base64 user:pass) wins over username/password, as docker and kubelet do."""
    payload = {
        "auths": {"r.io": {"username": "x", "password": "y", "auth": auth_field("u", "p:q")}}
    }
    entries = secret_entries(pull_secret_of(DOCKER_CONFIG_JSON, payload))
    expected = [("r.io", "u", "p:q")]
    assert expected == [(k, c.username, c.password) for k, c in entries]


def test_a_dockercfg_secret_has_no_auths_wrapper() -> None:
    """kubernetes.io/dockercfg keys are registries at the top level."""
    entries = secret_entries(pull_secret_of(DOCKERCFG, {"r.io": {"auth": auth_field("u", "p")}}))
    assert ["r.io"] == [key for key, _ in entries]


def test_a_docker_config_file_accepts_both_layouts() -> None:
    """config.json with `auths`, and a legacy .dockercfg file."""
    wrapped = docker_config("a.io", "u", "p")
    legacy = json.dumps({"b.io": {"auth": auth_field("u", "p")}}).encode()
    found = [k for raw in (wrapped, legacy) for k, _ in config_file_entries(raw, "file")]
    assert ["a.io", "b.io"] == found


def test_secrets_of_other_types_are_ignored() -> None:
    """An Opaque secret among imagePullSecrets contributes nothing, as in kubelet."""
    secret = PullSecret("team-a", "opaque", "Opaque", {".dockerconfigjson": b"{}"})
    assert [] == secret_entries(secret)


@pytest.mark.parametrize(
    "raw",
    [
        b"not json with hunter2 inside",
        b"[]",
        json.dumps({"auths": ["hunter2"]}).encode(),
        json.dumps({"auths": {"r.io": {"auth": "hunter2!!"}}}).encode(),
        json.dumps({"auths": {"r.io": {"auth": b64(b"hunter2")}}}).encode(),
    ],
)
def test_an_unreadable_secret_is_named_without_its_content(raw: bytes) -> None:
    """The problem names the Secret and never echoes what is in it."""
    secret = PullSecret("team-a", "broken", DOCKER_CONFIG_JSON, {".dockerconfigjson": raw})
    ring, problems = keyring([secret])
    expected = (0, 1, True, False)
    assert expected == (
        len(ring.entries),
        len(problems),
        "team-a/broken" in problems[0],
        "hunter2" in problems[0],
    )


def test_a_credential_shows_only_its_source_and_identity() -> None:
    """repr() carries no user name or password; identity is a stable one-way hash."""
    cred = Credential("alice", "s3cret-pass", "secret team-a/regcred")
    text = repr(cred) + str(cred) + repr(PullSecret("a", "b", DOCKERCFG, {"x": b"s3cret-pass"}))
    same = Credential("alice", "s3cret-pass", "elsewhere").identity
    other = Credential("alice", "other-pass", "secret team-a/regcred").identity
    expected = (False, False, True, False, 20)
    assert expected == (
        "s3cret" in text,
        "alice" in text,
        same == cred.identity,
        other == cred.identity,
        len(cred.identity),
    )


def test_a_chain_identity_depends_on_its_credentials_and_their_order() -> None:
    """Cache keys differ for different credential chains; an empty chain is anonymous."""
    a, b = Credential("a", "1"), Credential("b", "2")
    identities = {CredentialChain((a, b)).identity, CredentialChain((b, a)).identity}
    assert (2, "anonymous") == (len(identities), CredentialChain().identity)


def test_an_empty_keyring_finds_nothing_for_docker_hub() -> None:
    """No entries, no fallback."""
    assert [] == Keyring().lookup(parse("nginx"))


def test_a_credential_error_is_a_value_error() -> None:
    """Callers may treat a bad secret as bad input."""
    assert issubclass(CredentialError, ValueError)


def test_an_unpadded_auth_field_is_read_as_kubelet_reads_it() -> None:
    """kubelet decodes `auth` without `=` padding (RawStdEncoding); so must we."""
    unpadded = auth_field("user", "password").rstrip("=")
    payload = {"auths": {"r.io": {"auth": unpadded}}}
    entries = secret_entries(pull_secret_of(DOCKER_CONFIG_JSON, payload))
    assert [("user", "password")] == [(c.username, c.password) for _, c in entries]
