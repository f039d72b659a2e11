"""The start-up check of the cloud registries the nodes pull from: a warning for each cloud
whose registries no credential source of archfit's own serves (the globs: registry/pure/cloud.py).

With the webhook on, those pods' images would stay unknown and the webhook would leave them
unchanged (deploy/README.md, "When the webhook does nothing").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import structlog

from extender.config.registry_settings import RegistrySettings
from extender.core.text import MAX_LOGGED_ERROR, cut
from extender.registry.plugin_protocol import PluginConfigError, load_config
from extender.registry.pure.cloud import unserved_cloud_registries
from extender.registry.pure.credentials import CredentialError, config_file_entries

# The logger these lines were always logged under, before the check moved here.
log = structlog.get_logger("archfit")


def warn_unserved_registries(
    node_images: Callable[[], Iterable[str]], registry: RegistrySettings
) -> list[str]:
    """Warn (`webhook_cloud_registry_without_credentials`) when the images `node_images`
    reads (what the nodes run) come from a cloud registry (ECR, Artifact Registry, ACR) that
    no configured credential source serves. Returns the clouds warned about."""
    try:
        images = list(node_images())
    except Exception as error:  # a warning's check must never stop serving
        problem = cut(f"{type(error).__name__}: {error}", MAX_LOGGED_ERROR)
        log.info("cloud_registry_check_skipped", error=problem)
        return []
    unserved = unserved_cloud_registries(images, _served_keys(registry))
    for cloud, hosts in unserved.items():
        log.warning(
            "webhook_cloud_registry_without_credentials",
            cloud=cloud,
            registries=hosts[:5],
            hint="pods' images there stay unknown unless a pull secret serves them: configure "
            "registry.credentialProviders (Helm: credentialProvider.enabled=true) or "
            "registry.dockerConfigPath (docs/private-registries.md)",
        )
    return list(unserved)


def _served_keys(registry: RegistrySettings) -> list[str]:
    """The registry keys archfit's own credential sources cover: the credential plugins'
    matchImages and the docker config's keys (unreadable files count as none: the resolver
    reports those)."""
    keys: list[str] = []
    plugins = registry.credential_providers.config_path
    try:
        if plugins:
            for provider in load_config(Path(plugins).read_bytes(), plugins):
                keys.extend(provider.match_images)
        if registry.docker_config_path:
            raw = Path(registry.docker_config_path).read_bytes()
            keys.extend(key for key, _ in config_file_entries(raw, registry.docker_config_path))
    except (OSError, PluginConfigError, CredentialError):
        pass
    return keys
