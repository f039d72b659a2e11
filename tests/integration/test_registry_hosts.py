"""Registry requests go only to hosts that the image reference names."""

from __future__ import annotations

import pytest

from extender.config.registry_settings import HostSettings, MirrorSettings
from extender.metrics import Metrics
from extender.registry.errors import InvalidReference
from tests.integration.conftest import POD, ResolverFactory, RunningFaults, local_settings

pytestmark = pytest.mark.integration

SHA = "sha256:" + "f" * 64
#: First components that look like domains (a dot or a port) but are none: distribution's
#: reference.go Parse reads them as path components and leaves Domain() empty.
NO_DOMAIN = ["reg_istry.io/x", "reg_istry.io/x:1", f"foo__bar.com/team/app@{SHA}"]


def _hosts_asked(metrics: Metrics) -> set[str]:
    """Every host a registry request was sent to (or attempted), from the request counter."""
    return {
        sample.labels["host"]
        for family in metrics.registry_requests.collect()
        for sample in family.samples
        if sample.name.endswith("_total")
    }


async def test_no_registry_request_goes_to_a_host_the_reference_did_not_name(
    faults: RunningFaults, make_resolver: ResolverFactory
) -> None:
    """References without a registry contact nobody, not even a Docker Hub mirror."""
    faults.registry.image("acme/app", "1", "linux/arm64")
    # Docker Hub is mirrored to the local server, so a reference misread as Docker Hub's
    # would show up among the paths it saw.
    hub = HostSettings(mirrors=(MirrorSettings(url=faults.url, capabilities=("pull", "resolve")),))
    hosts = {faults.host: HostSettings(plain_http=True), "docker.io": hub}
    settings = local_settings(faults.host, hosts=hosts)
    metrics = Metrics()
    resolver = await make_resolver(settings, metrics=metrics)
    refused = []
    for text in NO_DOMAIN:
        with pytest.raises(InvalidReference) as caught:
            await resolver.platforms(text, POD)
        refused.append("has no registry" in str(caught.value))
    await resolver.platforms(f"{faults.host}/acme/app:1", POD)
    assert [True] * len(NO_DOMAIN) == refused
    assert {faults.host} == _hosts_asked(metrics)
    assert all(seen.path.startswith("/v2/acme/app/") for seen in faults.registry.seen)
