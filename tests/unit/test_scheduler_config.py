"""`archfit scheduler-config`: the KubeSchedulerConfiguration operators register archfit with."""

from pathlib import Path

import pytest
import yaml

from extender.scheduler_config import SERVICE_URL, Registration, render

ROOT = Path(__file__).resolve().parents[2]


def test_the_shipped_scheduler_config_is_the_commands_output_for_the_service_url():
    """config/scheduler-config.yaml cannot drift from `archfit scheduler-config`."""
    assert render(Registration()) == (ROOT / "config" / "scheduler-config.yaml").read_text()


def test_the_default_url_is_the_service_not_a_loopback_address_nobody_listens_on():
    """Copied as-is, 127.0.0.1 reached nothing and ignorable: true hid it."""
    (extender,) = yaml.safe_load(render(Registration()))["extenders"]
    assert (
        "http://archfit.archfit-system.svc:8888/scheduler" == extender["urlPrefix"] == SERVICE_URL
    )


def test_an_https_url_with_a_ca_file_turns_on_https_and_trusts_that_ca():
    """enableHTTPS plus tlsConfig.caFile, the stanza kube-scheduler's extender client reads."""
    document = yaml.safe_load(
        render(Registration(url="https://10.96.0.20:8888/scheduler", ca_file="/etc/archfit/ca.crt"))
    )
    (extender,) = document["extenders"]
    assert (True, {"caFile": "/etc/archfit/ca.crt"}) == (
        extender["enableHTTPS"],
        extender["tlsConfig"],
    )


def test_full_nodes_mode_is_written_when_asked():
    """--full-nodes: nodeCacheCapable false, for clusters that give archfit no node access."""
    (extender,) = yaml.safe_load(render(Registration(node_cache_capable=False)))["extenders"]
    assert False is extender["nodeCacheCapable"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"url": "archfit:8888"}, "must be http"),
        ({"url": "https://a:1/scheduler"}, "needs --ca-file"),
        ({"url": "http://a:1/scheduler", "ca_file": "/ca.pem"}, "needs an https --url"),
    ],
)
def test_inconsistent_options_are_refused_with_the_reason(kwargs, message):
    """A config that would silently not work is refused before it is printed."""
    with pytest.raises(ValueError, match=message):
        Registration(**kwargs)
