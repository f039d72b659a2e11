"""kubelet credential provider plugins: a real executable speaking the v1 exec protocol.

The plugin (tests/support/credential_plugin.py) hands out the htpasswd registry's user,
so a private image with no pull secret resolves only through it.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
import structlog

from extender.config.loading import from_mapping
from extender.config.registry_settings import CredentialProviderSettings
from extender.metrics import Metrics
from extender.registry.errors import NoCredentials
from extender.registry.plugins import CredentialPlugins
from extender.server import create_app
from tests.app.conftest import post
from tests.integration.conftest import ResolverFactory, local_settings, pod
from tests.objects import args_full, node
from tests.objects import pod as make_pod
from tests.support.clock import FakeClock
from tests.support.credential_plugin import API_VERSION, NAME, ProviderPlugin
from tests.support.fixtures import PublishedRegistry
from tests.support.pull_secrets import auth_field
from tests.support.waiting import wait_for_async

pytestmark = pytest.mark.integration

PASSWORD_FOR_LOG_SCAN = "plugin-secret-7f3a"


def installed(tmp_path: Path, registry: PublishedRegistry, **behaviour: object) -> ProviderPlugin:
    """The test plugin, serving the registry's host and answering with its credentials."""
    plugin = ProviderPlugin.install(tmp_path, [registry.registry.host])
    user, password = registry.credentials or ("", "")
    fields: dict[str, object] = {"key": registry.registry.host, "username": user}
    fields.update({"password": password, **behaviour})
    plugin.behave(str(fields.pop("mode", "ok")), **fields)
    return plugin


def plugin_settings(plugin: ProviderPlugin, host: str, **overrides: object):
    """Registry settings for the local registry with the plugin configured."""
    section = CredentialProviderSettings(
        config_path=str(plugin.config_path), bin_dir=str(plugin.bin_dir), **overrides
    )
    return local_settings(host, credential_providers=section)


async def test_a_private_image_without_pull_secret_resolves_through_the_plugin(
    basic_registry: PublishedRegistry, make_resolver: ResolverFactory, tmp_path: Path
) -> None:
    """No imagePullSecret: the plugin's credential opens the htpasswd registry."""
    plugin = installed(tmp_path, basic_registry)
    host = basic_registry.registry.host
    resolver = await make_resolver(plugin_settings(plugin, host))
    image = basic_registry.catalog.multiarch_oci
    mark = basic_registry.registry.mark()
    platforms = await resolver.platforms(image.reference, pod())
    authorized = basic_registry.registry.authorized_since(mark)
    assert image.platforms == {str(p) for p in platforms}
    assert {"GET"} == {method for method, _ in authorized}


async def test_the_plugin_reads_a_v1_request_and_only_the_allowed_environment(
    basic_registry: PublishedRegistry, tmp_path: Path
) -> None:
    """stdin carries the image's repository; archfit's own secrets stay out of the env."""
    plugin = installed(tmp_path, basic_registry)
    environ = {
        "PATH": os.environ.get("PATH", ""),
        "AWS_ROLE_ARN": "arn:aws:iam::1:role/archfit",
        "AZURE_CLIENT_ID": "00000000",
        "ARCHFIT_CACHE__URL": "redis://:hunter2@redis:6379/0",
        "KUBECONFIG": "/root/.kube/config",
    }
    plugins = CredentialPlugins.from_settings(
        CredentialProviderSettings(str(plugin.config_path), str(plugin.bin_dir)), environ=environ
    )
    assert plugins is not None
    image = f"{basic_registry.registry.host}/private/app"
    await plugins.entries(image)
    (call,) = plugin.calls()
    expected_request = {
        "apiVersion": API_VERSION,
        "kind": "CredentialProviderRequest",
        "image": image,
    }
    assert expected_request == call["request"]
    # Python itself sets LC_CTYPE in a C-locale child (PEP 538); archfit did not pass it.
    seen = set(call["env"]) - {"LC_CTYPE"}
    assert {"AWS_ROLE_ARN", "AZURE_CLIENT_ID", "PATH", "PLUGIN_STATE_DIR"} == seen


@pytest.mark.parametrize(
    ("answer", "steps", "expected_runs"),
    [
        # cacheKeyType Image: another repository of the same registry needs its own run.
        ({"cacheKeyType": "Image", "cacheDuration": "60s"}, [("a", 0), ("a", 30), ("b", 0)], 2),
        ({"cacheKeyType": "Image", "cacheDuration": "60s"}, [("a", 0), ("a", 61)], 2),
        # Registry: one run serves every repository of the registry until it expires.
        ({"cacheKeyType": "Registry", "cacheDuration": "1m"}, [("a", 0), ("b", 59)], 1),
        ({"cacheKeyType": "Registry", "cacheDuration": "1m"}, [("a", 0), ("b", 61)], 2),
        # Global: one run serves every registry the plugin matches.
        ({"cacheKeyType": "Global", "cacheDuration": "1h"}, [("a", 0), ("other", 3000)], 1),
        # cacheDuration 0 means do not cache (kubelet).
        ({"cacheKeyType": "Global", "cacheDuration": "0s"}, [("a", 0), ("a", 0)], 2),
        # No cacheDuration: the provider's defaultCacheDuration (5m) applies.
        ({"cacheKeyType": "Image"}, [("a", 0), ("a", 299)], 1),
        ({"cacheKeyType": "Image"}, [("a", 0), ("a", 301)], 2),
    ],
)
async def test_answers_are_cached_by_cache_key_type_and_duration(
    basic_registry: PublishedRegistry,
    tmp_path: Path,
    answer: dict[str, str],
    steps: list[tuple[str, float]],
    expected_runs: int,
) -> None:
    """kubelet's cache rules, counted by the plugin's own invocation log."""
    host = basic_registry.registry.host
    other = "localhost:" + host.rsplit(":", 1)[1]
    plugin = ProviderPlugin.install(tmp_path, [host, other])
    plugin.behave("ok", key=host, username="u", password="p", **answer)
    clock = FakeClock()
    plugins = CredentialPlugins.from_settings(
        CredentialProviderSettings(str(plugin.config_path), str(plugin.bin_dir)), clock=clock
    )
    assert plugins is not None
    images = {"a": f"{host}/private/a", "b": f"{host}/private/b", "other": f"{other}/x/y"}
    for name, advance in steps:
        clock.now += advance
        await plugins.entries(images[name])
    assert expected_runs == len(plugin.calls())


async def test_concurrent_lookups_of_one_image_share_one_plugin_run(
    basic_registry: PublishedRegistry, tmp_path: Path
) -> None:
    """Single flight: twenty callers, one process."""
    plugin = installed(tmp_path, basic_registry)
    metrics = Metrics()
    plugins = CredentialPlugins.from_settings(
        CredentialProviderSettings(str(plugin.config_path), str(plugin.bin_dir)), metrics=metrics
    )
    assert plugins is not None
    image = f"{basic_registry.registry.host}/private/app"
    answers = await asyncio.gather(*(plugins.entries(image) for _ in range(20)))
    counted = metrics.registry.get_sample_value(
        "archfit_credential_provider_runs_total", {"provider": NAME, "outcome": "ok"}
    )
    assert (1, 1, 1.0) == (len(plugin.calls()), len({a[0] for a in answers}), counted)


@pytest.mark.parametrize(
    ("mode", "extra"),
    [
        ("hang", {}),
        ("crash", {}),
        ("garbage", {}),
        ("oversized", {"padding": 300_000}),
        ("ok", {"apiVersion": "credentialprovider.kubelet.k8s.io/v9"}),
    ],
)
async def test_a_broken_plugin_leaves_the_image_unknown_within_the_deadline(
    basic_registry: PublishedRegistry, aiohttp_client, tmp_path: Path, mode: str, extra: dict
) -> None:
    """Hang, crash, garbage, too much output or a wrong apiVersion: unknown, and the app lives."""
    plugin = installed(tmp_path, basic_registry, mode=mode, **extra)
    host = basic_registry.registry.host
    settings = from_mapping(
        {
            "kubernetes": {"mode": "off"},
            "policy": {"resolveDeadlineSeconds": 0.5},
            "registry": {
                "hosts": {host: {"plainHttp": True}},
                "allowedNetworks": ["127.0.0.1/32"],
                "credentialProviders": plugin.settings(timeoutSeconds=5, maxOutputBytes=65536),
            },
        }
    )
    client = await aiohttp_client(create_app(settings))
    nodes = (node("amd-1", "amd64"), node("arm-1", "arm64"))
    image = basic_registry.catalog.amd64_only.reference
    started = time.monotonic()
    with structlog.testing.capture_logs() as logs:
        body = await post(client, "filter", args_full(make_pod(image), *nodes))
        took = time.monotonic() - started
        # The captured log list has no event to await; the plugin's failure lands in it.
        await wait_for_async(
            lambda: any(e["event"] == "credential_provider_failed" for e in logs),
            "credential_provider_failed in the logs",
            seconds=15,
        )
    unknown = [e["image"] for e in logs if e["event"] == "image_platforms_unknown"]
    failed = [e["provider"] for e in logs if e["event"] == "credential_provider_failed"]
    healthy = await client.get("/healthz")
    passed = [n["metadata"]["name"] for n in body["Nodes"]["items"]]
    # The request's deadline is 0.5 s and the plugin's timeout 5 s: waiting for the plugin
    # cannot take less than its timeout, so an answer before it did not wait.
    expected = (True, ["amd-1", "arm-1"], [image], [NAME], 200)
    assert expected == (took < 5, passed, unknown, failed, healthy.status)
    if mode == "hang":
        assert not plugin.child_alive()  # the whole process group was killed


async def test_a_failed_plugin_is_named_in_the_unknown_reason(
    basic_registry: PublishedRegistry, make_resolver: ResolverFactory, tmp_path: Path
) -> None:
    """The refusal says which plugin let the image down, and where to look."""
    plugin = installed(tmp_path, basic_registry, mode="crash")
    resolver = await make_resolver(plugin_settings(plugin, basic_registry.registry.host))
    with pytest.raises(NoCredentials) as caught:
        await resolver.platforms(basic_registry.catalog.single.reference, pod())
    assert str(caught.value).startswith(f"credential provider {NAME} failed")


async def test_a_refusal_with_no_credential_source_names_the_settings_to_use(
    basic_registry: PublishedRegistry, make_resolver: ResolverFactory
) -> None:
    """401 and nothing matched: the reason says it is about credentials, and what to set."""
    resolver = await make_resolver(local_settings(basic_registry.registry.host))
    with pytest.raises(NoCredentials) as caught:
        await resolver.platforms(basic_registry.catalog.single.reference, pod())
    assert "registry.credentialProviders.configPath" in str(caught.value)[:200]


async def test_no_log_line_carries_a_credential_the_plugin_returned_or_printed(
    basic_registry: PublishedRegistry, make_resolver: ResolverFactory, tmp_path: Path, capfd
) -> None:
    """The password in answers, garbage and stderr appears in no captured log or output."""
    user, password = basic_registry.credentials or ("", "")
    host = basic_registry.registry.host
    texts = []
    for mode in ("ok", "crash", "garbage"):
        plugin = ProviderPlugin.install(tmp_path / mode, [host])
        secret = password if mode == "ok" else PASSWORD_FOR_LOG_SCAN
        plugin.behave(mode, key=host, username=user, password=secret)
        resolver = await make_resolver(plugin_settings(plugin, host))
        with structlog.testing.capture_logs() as logs:
            try:
                await resolver.platforms(basic_registry.catalog.single.reference, pod())
            except NoCredentials as error:
                texts.append(str(error))
        texts.append(repr(logs))
    out, err = capfd.readouterr()
    text = " ".join([*texts, out, err])
    encoded = auth_field(user, password)
    found = [s for s in (password, PASSWORD_FOR_LOG_SCAN, encoded) if s in text]
    assert [] == found


async def test_the_unknown_log_line_says_the_refusal_is_about_credentials(
    basic_registry: PublishedRegistry, aiohttp_client
) -> None:
    """image_platforms_unknown names the settings that would give archfit a credential."""
    host = basic_registry.registry.host
    settings = from_mapping(
        {
            "kubernetes": {"mode": "off"},
            "registry": {"hosts": {host: {"plainHttp": True}}, "allowedNetworks": ["127.0.0.1/32"]},
        }
    )
    client = await aiohttp_client(create_app(settings))
    image = basic_registry.catalog.armv7_only.reference
    with structlog.testing.capture_logs() as logs:
        await post(client, "filter", args_full(make_pod(image), node("amd-1", "amd64")))
    (line,) = [e for e in logs if e["event"] == "image_platforms_unknown"]
    assert line["error"].startswith("no credentials for this image: set an imagePullSecret")


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("mode", ["group_child", "setsid_child"])
async def test_a_child_left_holding_stdout_neither_spoils_the_answer_nor_leaks(
    basic_registry: PublishedRegistry, tmp_path: Path, mode: str
) -> None:
    """The plugin answers and exits, its child keeps stdout open (in the plugin's process
    group, or in a session of its own): five runs all answer at once, leave no child alive
    and no file descriptor open."""
    plugin = installed(tmp_path, basic_registry, mode=mode)
    host = basic_registry.registry.host
    settings = CredentialProviderSettings(
        config_path=str(plugin.config_path), bin_dir=str(plugin.bin_dir), timeout_seconds=5
    )
    plugins = CredentialPlugins.from_settings(settings)
    assert plugins is not None
    before = _open_fds()
    answered, children, took = [], [], []
    try:
        for index in range(5):
            started = time.monotonic()
            # Image cache keys: each image is a run of its own.
            found, failed = await plugins.entries(f"{host}/private/app:{index}")
            took.append(time.monotonic() - started)
            answered.append((len(found), failed))
            children.append(int((plugin.state_dir / "child.pid").read_text()))
    finally:
        await plugins.aclose()
    # SIGKILL is delivered asynchronously: give the kernel a moment to end them.
    await wait_for_async(
        lambda: not any(_alive(pid) for pid in children), "the children killed", seconds=5
    )
    assert ([(1, [])] * 5, before) == (answered, _open_fds())
    # Waiting for the child's end of stdout would last the plugin's whole timeout.
    assert max(took) < settings.timeout_seconds, took


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for init."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False
