"""`archfit inspect`: one line (or JSON object) per image, errors per image, exit status."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from extender.cli.inspect_images import run_inspect
from extender.config.registry_settings import CacheSettings, CredentialProviderSettings
from extender.registry.resolver import build_resolver
from tests.integration.conftest import local_settings
from tests.support.credential_plugin import ProviderPlugin
from tests.support.fixtures import PublishedRegistry
from tests.support.images import Image, Pusher

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


async def test_inspect_reads_a_private_image_through_the_credential_provider_plugin(
    basic_registry: PublishedRegistry, tmp_path: Path
) -> None:
    """The operator's check uses the service's chain: the plugin's credential gets through."""
    host = basic_registry.registry.host
    user, password = basic_registry.credentials or ("", "")
    plugin = ProviderPlugin.install(tmp_path, [host])
    plugin.behave("ok", key=host, username=user, password=password)
    section = CredentialProviderSettings(str(plugin.config_path), str(plugin.bin_dir))
    settings = local_settings(host, credential_providers=section)
    out = io.StringIO()
    image = basic_registry.catalog.amd64_only
    status = await run_inspect([image.reference], settings, CacheSettings(), True, out)
    (document,) = json.loads(out.getvalue())
    assert (0, sorted(image.platforms)) == (status, document["platforms"])


async def test_inspect_says_when_a_refusal_is_about_missing_credentials(
    basic_registry: PublishedRegistry,
) -> None:
    """No credential source matched: the error type and message say what to set."""
    out = io.StringIO()
    image = basic_registry.catalog.amd64_only.reference
    settings = local_settings(basic_registry.registry.host)
    status = await run_inspect([image], settings, CacheSettings(), True, out)
    (document,) = json.loads(out.getvalue())
    error = document["error"]
    expected = (1, "NoCredentials", True)
    assert expected == (status, error["type"], "registry.credentialProviders" in error["message"])


def test_inspect_stops_with_status_2_naming_a_missing_plugin_config(tmp_path: Path) -> None:
    """A credential provider config that cannot be read is a config error, not a traceback."""
    missing = tmp_path / "absent.yaml"
    empty = tmp_path / "archfit.yaml"
    empty.write_text("{}\n")
    # A process of its own: the CLI configures logging for the whole interpreter.
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "extender",
            "inspect",
            "--config",
            str(empty),
            "docker.io/library/x",
        ],
        env={**os.environ, "ARCHFIT_REGISTRY__CREDENTIAL_PROVIDERS__CONFIG_PATH": str(missing)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (2, True) == (done.returncode, "registry.credentialProviders.configPath" in done.stderr)
    assert "Traceback" not in done.stderr


@pytest.fixture(scope="module")
def lying_image(public_registry: PublishedRegistry) -> Image:
    """An index that lists its amd64 build (config: amd64) as linux/arm64."""
    pusher = Pusher(public_registry.registry.url)
    image, _ = pusher.index(
        "archfit/liar", "1.0", ["linux/amd64"], claims={"linux/amd64": "linux/arm64"}
    )
    return image


async def test_verify_reports_an_index_entry_whose_config_names_another_platform(
    public_registry: PublishedRegistry, lying_image: Image
) -> None:
    """JSON: the entry's claim and its config differ, the config is believed, status 1."""
    out = io.StringIO()
    settings = local_settings(public_registry.registry.host)
    status = await run_inspect(
        [lying_image.reference], settings, CacheSettings(), True, out, verify=True
    )
    (document,) = json.loads(out.getvalue())
    (entry,) = document["verified"]["entries"]
    expected = (1, ["linux/amd64"], 1, ("linux/arm64", "linux/amd64", False))
    assert expected == (
        status,
        document["platforms"],
        document["verified"]["disagreements"],
        (entry["index"], entry["config"], entry["agrees"]),
    )


async def test_verify_says_the_disagreement_in_the_table(
    public_registry: PublishedRegistry, lying_image: Image
) -> None:
    """The table's INDEX CHECK column says what the index and the config each claim."""
    out = io.StringIO()
    settings = local_settings(public_registry.registry.host)
    await run_inspect([lying_image.reference], settings, CacheSettings(), False, out, verify=True)
    text = " ".join(out.getvalue().split())
    assert "DISAGREES: index says linux/arm64; its config says linux/amd64" in text


async def test_verify_finds_an_honest_index_agrees_and_checks_it_once_per_digest(
    public_registry: PublishedRegistry,
) -> None:
    """Three entries agree; a second check of the same digest sends no manifest or blob GET."""
    registry = public_registry.registry
    image = public_registry.catalog.multiarch_oci.reference
    resolver = await build_resolver(local_settings(registry.host), CacheSettings())
    try:
        _, first = await resolver.verify(image)
        mark = registry.mark()
        _, again = await resolver.verify(image)
        later = registry.count_since(mark)
    finally:
        await resolver.aclose()
    expected = (3, 0, first, 0)
    assert expected == (
        len(first.checks),
        len(first.disagreements),
        again,
        later[("GET", "manifests")] + later[("GET", "blobs")],
    )


def test_the_cli_verify_flag_reports_the_lie_and_exits_1(
    public_registry: PublishedRegistry, lying_image: Image, tmp_path: Path
) -> None:
    """`archfit inspect --verify -o table` as an operator runs it: the table says it."""
    config = tmp_path / "archfit.yaml"
    host = public_registry.registry.host
    config.write_text(
        json.dumps(
            {
                "registry": {
                    "hosts": {host: {"plainHttp": True}},
                    "allowedNetworks": ["127.0.0.1/32"],
                }
            }
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "extender", "inspect", "--config", str(config), "--verify",
         "-o", "table", lying_image.reference],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )  # fmt: skip
    text = " ".join(done.stdout.split())
    expected = (1, True)
    assert expected == (
        done.returncode,
        "DISAGREES: index says linux/arm64; its config says linux/amd64" in text,
    )
