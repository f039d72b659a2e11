"""The test registries themselves: what they store is what the other tests assume."""

from __future__ import annotations

import urllib.request

import pytest

from tests.support.fixtures import PublishedRegistry

pytestmark = pytest.mark.integration


def test_the_public_registry_serves_every_catalog_image_under_its_digest(
    public_registry: PublishedRegistry,
) -> None:
    """HEAD on each catalog reference returns the digest the pusher computed."""
    registry = public_registry.registry
    accept = ", ".join(sorted({image.media_type for image in public_registry.catalog.all()}))
    mark = registry.mark()
    for image in public_registry.catalog.all():
        repo_and_ref = image.reference.split("/", 1)[1]
        repo, ref = repo_and_ref.split("@") if "@" in repo_and_ref else repo_and_ref.rsplit(":", 1)
        url = f"{registry.url}/v2/{repo}/manifests/{ref}"
        request = urllib.request.Request(url, method="HEAD", headers={"Accept": accept})  # noqa: S310
        with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310
            assert image.digest == response.headers["Docker-Content-Digest"]
    expected = {("HEAD", "manifests"): len(public_registry.catalog.all())}
    assert expected == dict(registry.count_since(mark))
