"""`archfit scheduler-config`: the KubeSchedulerConfiguration operators register archfit with."""

from pathlib import Path

import pytest
import yaml

from extender.cli.main import main
from extender.cli.scheduler_config import SERVICE_URL, Registration, render

ROOT = Path(__file__).resolve().parents[3]


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


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"url": "http://archfit:99999/scheduler"}, "port must be a number in 1..65535"),
        ({"url": "http://archfit:0/scheduler"}, "port must be a number in 1..65535"),
        ({"url": "http://archfit:8888/scheduler/filter"}, "give the prefix"),
        ({"url": "http://archfit:8888/scheduler/prioritize/"}, "ends in the verb /prioritize"),
        ({"http_timeout": "2 seconds"}, "a duration such as 2s"),
        ({"url": "https://a:1/scheduler"}, "/etc/ssl/certs/ca-certificates.crt"),
    ],
)
def test_urls_kube_scheduler_could_not_use_are_refused_with_the_fix(kwargs, message):
    """A port out of range or a URL with the verb on it would fail at every call; an https URL
    without a CA would make kube-scheduler skip certificate verification (makeTransport)."""
    with pytest.raises(ValueError, match=message):
        Registration(**kwargs)


@pytest.mark.parametrize(
    ("timeout", "deadline", "warned"),
    [("2s", 1.5, False), ("1500ms", 1.5, True), ("1s", 1.5, True), ("3s", 2.5, False)],
)
def test_an_http_timeout_not_above_the_resolve_deadline_is_warned_about(timeout, deadline, warned):
    """kube-scheduler would give up on archfit before archfit gives up on a slow registry."""
    warning = Registration(http_timeout=timeout).timeout_warning(deadline)
    assert warned == ("policy.resolveDeadlineSeconds" in warning)


def test_scheduler_config_reads_the_deadline_from_archfits_settings(tmp_path, capsys):
    """The warning compares --http-timeout with the config's policy.resolveDeadlineSeconds."""
    settings = tmp_path / "archfit.yaml"
    settings.write_text("policy: {resolveDeadlineSeconds: 2.5}\n")
    status = main(["scheduler-config", "--config", str(settings), "--http-timeout", "2s"])
    out, err = capsys.readouterr()
    assert (0, "  httpTimeout: 2s", True) == (
        status,
        next(line for line in out.splitlines() if "httpTimeout" in line),
        "httpTimeout 2s is not above archfit's policy.resolveDeadlineSeconds (2.5 s)" in err,
    )


def test_client_certificate_options_write_the_mutual_tls_stanza():
    """--client-cert/--client-key: tlsConfig.certFile/keyFile beside caFile, for clientCaFile."""
    registration = Registration(
        url="https://10.96.0.20:8888/scheduler",
        ca_file="/etc/archfit/ca.crt",
        client_cert="/etc/archfit/scheduler.crt",
        client_key="/etc/archfit/scheduler.key",
    )
    (extender,) = yaml.safe_load(render(registration))["extenders"]
    assert {
        "caFile": "/etc/archfit/ca.crt",
        "certFile": "/etc/archfit/scheduler.crt",
        "keyFile": "/etc/archfit/scheduler.key",
    } == extender["tlsConfig"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"client_cert": "/c.pem"}, "give both, or neither"),
        ({"client_cert": "/c.pem", "client_key": "/k.pem"}, "needs an https --url"),
    ],
)
def test_half_a_client_certificate_is_refused(kwargs, message):
    """A certificate without its key, or over plain HTTP, would never be presented."""
    with pytest.raises(ValueError, match=message):
        Registration(**kwargs)
