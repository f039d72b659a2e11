"""Which cloud registries the nodes use that no configured credential source serves."""

import pytest

from extender.registry.pure.cloud import unserved_cloud_registries

IMAGES = [
    "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/pause:3.10",
    "docker.io/library/nginx:1.27",
    "us-docker.pkg.dev/proj/repo/app:1",
    "acme.azurecr.io/api@sha256:" + "a" * 64,
    "quay.io/prometheus/node-exporter:v1.8.2",
    "sha256:" + "b" * 64,  # status.images also lists bare digests
]


@pytest.mark.parametrize(
    ("served", "expected"),
    [
        (
            [],
            {
                "ECR": ["602401143452.dkr.ecr.us-west-2.amazonaws.com"],
                "Artifact Registry": ["us-docker.pkg.dev"],
                "ACR": ["acme.azurecr.io"],
            },
        ),
        (
            ["*.dkr.ecr.*.amazonaws.com", "https://acme.azurecr.io"],
            {"Artifact Registry": ["us-docker.pkg.dev"]},
        ),
        (["*.dkr.ecr.*.amazonaws.com", "*.pkg.dev", "*.azurecr.io"], {}),
    ],
)
def test_cloud_registries_are_unserved_until_a_key_covers_them(served, expected):
    """Public registries never count; a plugin glob or a docker config key serves a cloud's."""
    assert expected == unserved_cloud_registries(IMAGES, served)
