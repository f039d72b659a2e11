"""Cloud registries that only a credential provider plugin (or a pull secret) can read.

Pure. The globs are the default `matchImages` of each cloud's kubelet plugin
(docs/private-registries.md), matched with kubelet's dockerconfig key rules. With the
webhook on, archfit warns at start when nodes run images from one of these registries and
no configured credential source could serve them (deploy/README.md, "When the webhook does
nothing"): their platforms would stay unknown and the webhook would change nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

from extender.registry.pure.credentials import key_matches
from extender.registry.pure.reference import parse as parse_reference

CLOUD_REGISTRIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "ECR",
        (
            "*.dkr.ecr.*.amazonaws.com",
            "*.dkr-ecr.*.on.aws",
            "*.dkr.ecr.*.amazonaws.com.cn",
            "*.dkr-ecr.*.on.amazonwebservices.com.cn",
            "*.dkr.ecr-fips.*.amazonaws.com",
        ),
    ),
    ("Artifact Registry", ("*.pkg.dev", "*.gcr.io", "gcr.io")),
    ("ACR", ("*.azurecr.io", "*.azurecr.cn", "*.azurecr.de", "*.azurecr.us")),
)
"""Cloud → the registry hosts of that cloud which need its credentials."""


def unserved_cloud_registries(images: Iterable[str], served: Iterable[str]) -> dict[str, list[str]]:
    """Cloud → registry hosts among `images` (references as nodes list them) that none of the
    `served` keys (credential plugins' matchImages, docker config keys) matches."""
    keys = list(served)
    found: dict[str, set[str]] = {}
    for image in images:
        try:
            domain = parse_reference(image).domain
        except ValueError:
            continue  # a digest-only name or junk: says nothing about a registry
        for cloud, globs in CLOUD_REGISTRIES:
            if any(key_matches(g, domain) for g in globs):
                if not any(key_matches(k, domain) for k in keys):
                    found.setdefault(cloud, set()).add(domain)
                break
    return {cloud: sorted(hosts) for cloud, hosts in found.items()}
