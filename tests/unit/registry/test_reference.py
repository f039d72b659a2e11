"""Reference parsing, tabled from distribution/reference's normalisation test vectors."""

from __future__ import annotations

import pytest

from extender.config.registry_settings import RegistrySettings
from extender.registry import hosts
from extender.registry.errors import InvalidReference
from extender.registry.hosts import HostTable
from extender.registry.pure import reference
from extender.registry.pure.reference import parse, parse_digest

SHA = "sha256:" + "f" * 64
SHA2 = "sha256:dbcc1c35ac38df41fd2f5e4130b32ffdb93ebae8b3dbe638c23575912276fc9c"
SHA512 = "sha512:" + "f" * 128
ECR = "123456789012.dkr.ecr.ap-southeast-2.amazonaws.com"

# input, then the normalised (domain, path, tag, digest)
VALID: list[tuple[str, tuple[str, str, str, str]]] = [
    # TestParseRepositoryInfo: familiar, full and ambiguous spellings of one name
    ("fooo/bar", ("docker.io", "fooo/bar", "latest", "")),
    ("docker.io/fooo/bar", ("docker.io", "fooo/bar", "latest", "")),
    ("index.docker.io/fooo/bar", ("docker.io", "fooo/bar", "latest", "")),
    ("ubuntu", ("docker.io", "library/ubuntu", "latest", "")),
    ("library/ubuntu", ("docker.io", "library/ubuntu", "latest", "")),
    ("docker.io/library/ubuntu", ("docker.io", "library/ubuntu", "latest", "")),
    ("nonlibrary/ubuntu", ("docker.io", "nonlibrary/ubuntu", "latest", "")),
    ("other/library", ("docker.io", "other/library", "latest", "")),
    ("127.0.0.1:8000/private/moonbase", ("127.0.0.1:8000", "private/moonbase", "latest", "")),
    ("127.0.0.1:8000/privatebase", ("127.0.0.1:8000", "privatebase", "latest", "")),
    ("example.com/private/moonbase", ("example.com", "private/moonbase", "latest", "")),
    ("example.com:8000/privatebasee", ("example.com:8000", "privatebasee", "latest", "")),
    ("ubuntu-12.04-base", ("docker.io", "library/ubuntu-12.04-base", "latest", "")),
    (
        "index.docker.io/library/ubuntu-12.04-base",
        ("docker.io", "library/ubuntu-12.04-base", "latest", ""),
    ),
    ("docker.io/foo", ("docker.io", "library/foo", "latest", "")),
    ("library/foo/bar", ("docker.io", "library/foo/bar", "latest", "")),
    ("store/foo/bar", ("docker.io", "store/foo/bar", "latest", "")),
    ("Foo/bar", ("Foo", "bar", "latest", "")),  # an uppercase first component is a domain
    ("FOO/bar", ("FOO", "bar", "latest", "")),
    # TestNormalizedSplitHostname
    ("test.com/foo", ("test.com", "foo", "latest", "")),
    ("test_com/foo", ("docker.io", "test_com/foo", "latest", "")),
    ("docker/migrator", ("docker.io", "docker/migrator", "latest", "")),
    ("test.com:8080/foo", ("test.com:8080", "foo", "latest", "")),
    ("test-com:8080/foo", ("test-com:8080", "foo", "latest", "")),
    ("xn--n3h.com:18080/foo", ("xn--n3h.com:18080", "foo", "latest", "")),
    ("docker.io/library/foo/bar", ("docker.io", "library/foo/bar", "latest", "")),
    ("localhost/foo", ("localhost", "foo", "latest", "")),
    ("localhost:5000/foo/bar", ("localhost:5000", "foo/bar", "latest", "")),
    # TestParseAnyReference
    ("redis:latest", ("docker.io", "library/redis", "latest", "")),
    (f"redis@{SHA2}", ("docker.io", "library/redis", "", SHA2)),
    (f"dmcgowan/myapp@{SHA2}", ("docker.io", "dmcgowan/myapp", "", SHA2)),
    (SHA2[7:-1], ("docker.io", "library/" + SHA2[7:-1], "latest", "")),  # 63 hex: a name
    ("dbcc1", ("docker.io", "library/dbcc1", "latest", "")),
    # TestParseReferenceWithTagAndDigest: both kept, the digest is fetched
    (f"busybox:latest@{SHA}", ("docker.io", "library/busybox", "latest", SHA)),
    # TestReferenceParse, normalised
    ("test_com", ("docker.io", "library/test_com", "latest", "")),
    ("test.com:tag", ("docker.io", "library/test.com", "tag", "")),
    ("test.com:5000", ("docker.io", "library/test.com", "5000", "")),
    ("test.com/repo:tag", ("test.com", "repo", "tag", "")),
    ("test:5000/repo", ("test:5000", "repo", "latest", "")),
    ("test:5000/repo:tag", ("test:5000", "repo", "tag", "")),
    (f"test:5000/repo@{SHA}", ("test:5000", "repo", "", SHA)),
    (f"test:5000/repo:tag@{SHA}", ("test:5000", "repo", "tag", SHA)),
    ("lowercase:Uppercase", ("docker.io", "library/lowercase", "Uppercase", "")),
    ("sub-dom1.foo.com/bar/baz/quux", ("sub-dom1.foo.com", "bar/baz/quux", "latest", "")),
    (
        "b.gcr.io/test.example.com/my-app:test.example.com",
        ("b.gcr.io", "test.example.com/my-app", "test.example.com", ""),
    ),
    (
        f"xn--7o8h.com/myimage:xn--7o8h.com@{SHA512}",
        ("xn--7o8h.com", "myimage", "xn--7o8h.com", SHA512),
    ),
    ("foo_bar.com:8080", ("docker.io", "library/foo_bar.com", "8080", "")),
    ("foo/foo_bar.com:8080", ("docker.io", "foo/foo_bar.com", "8080", "")),
    ("192.168.1.1", ("docker.io", "library/192.168.1.1", "latest", "")),
    ("192.168.1.1:5000", ("docker.io", "library/192.168.1.1", "5000", "")),
    ("192.168.1.1/repo", ("192.168.1.1", "repo", "latest", "")),
    ("192.168.1.1:5000/repo:5050", ("192.168.1.1:5000", "repo", "5050", "")),
    ("[2001:db8::1]/repo", ("[2001:db8::1]", "repo", "latest", "")),
    ("[2001:db8:1:2:3:4:5:6]/repo:tag", ("[2001:db8:1:2:3:4:5:6]", "repo", "tag", "")),
    (f"[2001:db8::1]:5000/repo:tag@{SHA}", ("[2001:db8::1]:5000", "repo", "tag", SHA)),
    ("[::1]:5000/repo", ("[::1]:5000", "repo", "latest", "")),
    # reference_test.go TestReferenceParse, v0.6.0: the 255 limit is on the path alone
    # (reference.go Parse, RepositoryNameTotalLengthMax), so a long domain does not count.
    ("a/" * 127 + "a:tag-puts-this-over-max",
     ("docker.io", "a/" * 127 + "a", "tag-puts-this-over-max", "")),
    ("example.com/" + "a" * 255 + ":tag", ("example.com", "a" * 255, "tag", "")),
    (ECR + "/team/" + "p" * 250 + ":v1", (ECR, "team/" + "p" * 250, "v1", "")),
    # TestValidateRemoteName
    ("docker---rules/docker", ("docker.io", "docker---rules/docker", "latest", "")),
    ("d/docker", ("docker.io", "d/docker", "latest", "")),
    ("jess/t", ("docker.io", "jess/t", "latest", "")),
    ("dock__er/docker", ("docker.io", "dock__er/docker", "latest", "")),
    ("docker.io/" + "1a3f5e7d9c1b3a5f7e9d1c3b5a7f9e1d3c5b7a9f1e3d5d7c9b1a3f5e7d9c1b3a",
     ("docker.io", "library/1a3f5e7d9c1b3a5f7e9d1c3b5a7f9e1d3c5b7a9f1e3d5d7c9b1a3f5e7d9c1b3a",
      "latest", "")),
]  # fmt: skip

INVALID: list[str] = [
    # TestReferenceParse
    "",
    ":justtag",
    f"@{SHA}",
    "repo@sha256:" + "f" * 34,
    "validname@invaliddigest:" + "f" * 64,
    "Uppercase:tag",
    "test:5000/Uppercase/lowercase:tag",
    "a/" * 128 + "a:tag",
    "aa/asdf$$^/aa",
    "example.com/" + "a" * 256,
    "domain/" + "a" * 256 + ":tag",
    ECR + "/team/" + "p" * 251 + ":v1",
    "[2001:db8::1]",
    "[2001:db8::1]:5000",
    "[2001:db8::1]:tag",
    "[fe80::1%eth0]:5000/repo",
    "[fe80::1%@invalidzone]:5000/repo",
    # TestValidateReferenceName and TestValidateRemoteName
    "https://github.com/docker/docker",
    "docker/Docker",
    "-docker",
    "-docker/docker",
    "-docker.io/docker/docker",
    "docker///docker",
    "docker.io/docker/Docker",
    "[fc00::1]:5000",
    "fc00::1:5000/debian",
    "[2001:db8:3:4::192.0.2.33]:5000/debian",
    "1a3f5e7d9c1b3a5f7e9d1c3b5a7f9e1d3c5b7a9f1e3d5d7c9b1a3f5e7d9c1b3a",
    "docker-/docker",
    "____/____",
    "_docker/_docker",
    "dock..er/docker",
    "dock_.er/docker",
    "docker/",
    ("this_is_not_a_valid_namespace_because_its_lenth_is_greater_than_255_" * 4) + "/docker",
    # hostile names
    "x" * 100_000,
    "nginx\n",
    "ng\x00inx",
    "nginx:1.2\r\nX-Injected: yes",
    " nginx",
    "foo/../bar",
    "ghcr.io/../etc/passwd",
    "ghcr.io/acme/API:1",
    "ngïnx",
    "ghcr.io/acme/app:" + "t" * 129,
    "ghcr.io/acme/app@SHA256:" + "f" * 64,
    "ghcr.io/acme/app@sha256:" + "F" * 64,
]


@pytest.mark.parametrize(("text", "expected"), VALID, ids=[v[0][:60] for v in VALID])
def test_a_valid_reference_normalises_like_distribution(
    text: str, expected: tuple[str, str, str, str]
) -> None:
    """Domain, path, tag and digest match distribution/reference's normalised answer."""
    ref = parse(text)
    assert expected == (ref.domain, ref.path, ref.tag, ref.digest)


@pytest.mark.parametrize("text", INVALID, ids=[repr(t[:40]) for t in INVALID])
def test_an_invalid_reference_is_rejected_with_a_clean_message(text: str) -> None:
    """Invalid and hostile names raise InvalidReference with a short, printable message."""
    with pytest.raises(InvalidReference) as caught:
        parse(text)
    message = str(caught.value)
    assert message.isprintable()
    assert len(message) < 250


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("reg_istry.io/x", "reg_istry.io/x"),
        ("reg_istry.io/x:1", "reg_istry.io/x"),
        (f"foo__bar.com/team/app@{SHA}", "foo__bar.com/team/app"),
    ],
)
def test_a_first_component_that_is_no_domain_leaves_the_reference_without_a_registry(
    text: str, path: str
) -> None:
    """normalize.go splitDockerDomain, then reference.go Parse: Domain() is "", so no host."""
    with pytest.raises(InvalidReference) as caught:
        parse(text)
    assert f"has no registry (distribution reads {path!r} as its path)" in str(caught.value)


def test_the_canonical_string_names_domain_path_tag_and_digest() -> None:
    """str() gives the fully-qualified reference, digest after tag."""
    assert f"docker.io/library/busybox:latest@{SHA}" == str(parse(f"busybox:latest@{SHA}"))


def test_docker_hub_is_served_by_registry_1() -> None:
    """docker.io names are fetched from registry-1.docker.io; others from their own domain."""
    expected = ("registry-1.docker.io", "ghcr.io")
    assert expected == (parse("nginx").api_host, parse("ghcr.io/a/b").api_host)


def test_the_digest_wins_over_the_tag_when_both_are_given() -> None:
    """The object fetched for `name:tag@digest` is the digest."""
    expected = SHA
    assert expected == parse(f"ghcr.io/acme/app:1.0@{SHA}").object


@pytest.mark.parametrize(
    "digest", ["sha256:abc", "md5:" + "f" * 32, "sha256:" + "g" * 64, "sha256:" + "f" * 65]
)
def test_a_malformed_digest_from_a_registry_is_rejected(digest: str) -> None:
    """parse_digest refuses digests we cannot verify."""
    with pytest.raises(InvalidReference):
        parse_digest(digest)


def test_a_sha512_digest_is_split_into_algorithm_and_hex() -> None:
    """parse_digest returns the algorithm and the hex part."""
    expected = ("sha512", "f" * 128)
    assert expected == parse_digest(SHA512)


@pytest.mark.parametrize("text", [v[0] for v in VALID], ids=[v[0][:60] for v in VALID])
def test_every_endpoint_of_a_reference_is_a_host_the_reference_names(text: str) -> None:
    """Without mirrors, the only host asked is the domain as written (registry-1 for docker.io)."""
    ref = parse(text)
    first = text.split("/", 1)[0]
    named = {"registry-1.docker.io"} if ref.domain == "docker.io" else {first}
    endpoints = HostTable(RegistrySettings()).endpoints(ref, resolve=True)
    hosts = {endpoint.host for endpoint in endpoints}
    assert named == hosts


def test_a_valid_reference_or_digest_is_parsed_without_making_an_error_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The refused text's snippet (redacted, made printable) is made only for an error: it cost
    more than the parse itself, on every never-seen tag (issue 32)."""

    def refuse(*_: object) -> str:
        raise AssertionError("snippet made for a valid name")

    monkeypatch.setattr(reference, "snippet", refuse)
    parsed = [parse(text) for text, _ in VALID]
    digests = [parse_digest(digest) for digest in (SHA, SHA2, SHA512)]
    assert (len(VALID), 3) == (len(parsed), len(digests))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (f"ghcr.io/a/b@md5:{'f' * 32}", "unsupported digest algorithm"),
        (f"ghcr.io/a/b@sha256:{'f' * 40}", "sha256 digest needs 64 lowercase hex"),
        ("ghcr.io/A/b", "repository must be lowercase"),
    ],
)
def test_an_error_still_shows_the_refused_reference(text: str, message: str) -> None:
    """Made only when raised, the snippet is still the reference as it was written."""
    with pytest.raises(InvalidReference) as caught:
        parse(text)
    assert f"invalid image reference {text!r}: {message}" == str(caught.value)


def test_a_registrys_endpoints_are_built_once_and_a_flood_of_names_stays_bounded() -> None:
    """A lookup asks for its endpoints up to three times: the second ask reuses the first's.
    Names are user input, so distinct registries past the bound start the table afresh."""
    table = HostTable(RegistrySettings())
    ref = parse("ghcr.io/acme/app:1")
    first = table.endpoints(ref, resolve=True)
    same = table.endpoints(ref, resolve=True)
    for index in range(hosts.MAX_BUILT_REGISTRIES):
        table.endpoints(parse(f"r{index}.example.com/app:1"), resolve=False)
    again = table.endpoints(ref, resolve=True)
    assert (True, False, first) == (same is first, again is first, again)
