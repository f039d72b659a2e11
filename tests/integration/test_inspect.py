"""`archfit inspect`: one line (or JSON object) per image, errors per image, exit status."""

from __future__ import annotations

import io
import json

import pytest

from extender.inspect import run_inspect
from extender.registry.settings import CacheSettings
from tests.integration.conftest import local_settings
from tests.support.fixtures import PublishedRegistry

pytestmark = pytest.mark.integration


async def test_json_output_lists_digest_and_platforms_and_errors_per_image(
    public_registry: PublishedRegistry,
) -> None:
    """A good image, an artifact and a bad name: JSON for each, exit status 1."""
    catalog = public_registry.catalog
    out = io.StringIO()
    images = [catalog.manifest_list.reference, catalog.artifact.reference, "Bad/Name:x"]
    status = await run_inspect(
        images, local_settings(public_registry.registry.host), CacheSettings(), True, out
    )
    documents = json.loads(out.getvalue())
    expected = (
        1,
        (catalog.manifest_list.digest, ["linux/amd64", "linux/arm64"], False),
        ([], True),
        "InvalidReference",
    )
    assert expected == (
        status,
        (documents[0]["digest"], documents[0]["platforms"], documents[0]["artifact"]),
        (documents[1]["platforms"], documents[1]["artifact"]),
        documents[2]["error"]["type"],
    )


async def test_the_table_has_one_row_per_image_and_exit_status_0_when_all_resolve(
    public_registry: PublishedRegistry,
) -> None:
    """Header plus a row per image; the platforms column is comma-separated."""
    catalog = public_registry.catalog
    out = io.StringIO()
    images = [catalog.armv7_only.reference, catalog.with_attestations.reference]
    status = await run_inspect(
        images, local_settings(public_registry.registry.host), CacheSettings(), False, out
    )
    lines = out.getvalue().splitlines()
    expected = (0, 3, True, "linux/amd64, linux/arm64")
    assert expected == (
        status,
        len(lines),
        lines[1].endswith("linux/arm/v7"),
        lines[2].split("  ")[-1],
    )


async def test_an_unprintable_image_name_stays_on_one_row(
    public_registry: PublishedRegistry,
) -> None:
    """A hostile name with a newline cannot forge extra rows."""
    out = io.StringIO()
    status = await run_inspect(
        ["evil\nFAKE ROW"], local_settings(public_registry.registry.host), CacheSettings(),
        False, out,
    )  # fmt: skip
    assert (1, 2) == (status, len(out.getvalue().splitlines()))
