"""WWW-Authenticate parsing: several challenges, quoted strings with commas and escapes."""

from __future__ import annotations

import pytest

from extender.registry.auth import Challenge, parse_challenges, pull_scope

CASES = [
    (
        ['Bearer realm="https://auth.docker.io/token",service="registry.docker.io"'],
        [Challenge("bearer", {"realm": "https://auth.docker.io/token",
                              "service": "registry.docker.io"})],
    ),
    (
        ['Basic realm="Registry Realm"'],
        [Challenge("basic", {"realm": "Registry Realm"})],
    ),
    (
        ['Basic realm="a, b", Bearer realm="https://t/x",scope="repository:a/b:pull,push"'],
        [
            Challenge("basic", {"realm": "a, b"}),
            Challenge("bearer", {"realm": "https://t/x", "scope": "repository:a/b:pull,push"}),
        ],
    ),
    (
        ["Basic realm=x", 'Bearer realm="https://t",error="invalid_token"'],
        [
            Challenge("basic", {"realm": "x"}),
            Challenge("bearer", {"realm": "https://t", "error": "invalid_token"}),
        ],
    ),
    (
        ['BEARER Realm="https://t" , Service = "s"'],
        [Challenge("bearer", {"realm": "https://t", "service": "s"})],
    ),
    (
        ['Bearer realm="say \\"hi\\", please"'],
        [Challenge("bearer", {"realm": 'say "hi", please'})],
    ),
    (["Negotiate"], [Challenge("negotiate", {})]),
    ([""], []),
    (['"just a quoted string"'], [Challenge("just", {}), Challenge("a", {}),
                                  Challenge("quoted", {}), Challenge("string", {})]),
]  # fmt: skip


@pytest.mark.parametrize(("values", "expected"), CASES)
def test_challenges_are_parsed_with_their_parameters(
    values: list[str], expected: list[Challenge]
) -> None:
    """Schemes are lowercased, parameter names too, values unquoted."""
    assert expected == parse_challenges(values)


def test_a_huge_header_is_parsed_in_bounded_time() -> None:
    """A hostile 1 MB header is cut before parsing and does not hang."""
    challenges = parse_challenges(["Bearer " + 'a="' + "x" * 1_000_000])
    assert ["bearer"] == [c.scheme for c in challenges]


def test_the_error_parameter_is_exposed() -> None:
    """invalid_token and insufficient_scope drive retries."""
    assert "insufficient_scope" == parse_challenges(['Bearer error="insufficient_scope"'])[0].error


def test_the_pull_scope_names_the_repository() -> None:
    """distribution's scope syntax."""
    expected = "repository:library/nginx:pull"
    assert expected == pull_scope("library/nginx")
