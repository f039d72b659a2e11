"""Checking an index entry's claimed platform against its image config (manifests.config_check)."""

from __future__ import annotations

import json

import pytest

from extender.core.platforms import parse
from extender.registry.manifests import config_check, index_entries

_NO_PLATFORM = "index says linux/arm64; its config names no os/architecture"


@pytest.mark.parametrize(
    ("claimed", "config", "expected"),
    [
        ("linux/arm64", {"os": "linux", "architecture": "arm64"}, ("linux/arm64", "")),
        ("linux/arm64", {"os": "linux", "architecture": "aarch64", "variant": "v8"},
         ("linux/arm64", "")),
        ("linux/arm/v6", {"os": "linux", "architecture": "arm"}, ("linux/arm/v6", "")),
        ("linux/arm/v6", {"os": "linux", "architecture": "arm", "variant": "v7"},
         ("linux/arm/v7", "index says linux/arm/v6; its config says linux/arm/v7")),
        ("linux/arm64", {"os": "linux", "architecture": "amd64"},
         ("linux/amd64", "index says linux/arm64; its config says linux/amd64")),
        ("linux/arm64", {"os": "linux", "architecture": ""}, ("linux/arm64", _NO_PLATFORM)),
        ("linux/amd64", {"os": "windows", "architecture": "amd64"},
         ("windows/amd64", "index says linux/amd64; its config says windows/amd64")),
    ],
)  # fmt: skip
def test_the_config_is_believed_over_the_index_claim(
    claimed: str, config: dict[str, str], expected: tuple[str, str]
) -> None:
    """The config's platform wins; an unstated variant or an empty config keeps the claim."""
    believed, problem = config_check(parse(claimed), json.dumps(config).encode())
    assert expected == (str(believed), problem)


def test_index_entries_skip_attestations_and_keep_the_order() -> None:
    """Only runnable entries, each with its digest, as parse_manifest counts them."""
    body = json.dumps(
        {
            "manifests": [
                {
                    "digest": "sha256:" + "b" * 64,
                    "platform": {"os": "linux", "architecture": "arm64"},
                },
                {
                    "digest": "sha256:" + "c" * 64,
                    "platform": {"os": "unknown", "architecture": "unknown"},
                    "annotations": {"vnd.docker.reference.type": "attestation-manifest"},
                },
                {
                    "digest": "sha256:" + "a" * 64,
                    "platform": {"os": "linux", "architecture": "amd64"},
                },
            ]
        }
    ).encode()
    expected = [("b", "linux/arm64"), ("a", "linux/amd64")]
    assert expected == [(e.digest[7], str(e.platform)) for e in index_entries(body)]
