"""The KubeSchedulerConfiguration that registers archfit, for `archfit scheduler-config`.

Pure: options in, commented YAML out. config/scheduler-config.yaml is this output for
the in-cluster Service URL, so the shipped file and the command never disagree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

SERVICE_URL = "http://archfit.archfit-system.svc:8888/scheduler"
KUBEADM_KUBECONFIG = "/etc/kubernetes/scheduler.conf"


@dataclass(frozen=True, slots=True)
class Registration:
    """Where archfit listens and how kube-scheduler should call it."""

    url: str = SERVICE_URL
    """The extender urlPrefix: scheme, host, port and archfit's server.prefix."""
    ca_file: str = ""
    """For https URLs: the CA bundle kube-scheduler trusts archfit's certificate with."""
    kubeconfig: str = KUBEADM_KUBECONFIG
    client_cert: str = ""
    """For archfit's server.clientCaFile (mutual TLS): the certificate kube-scheduler presents."""
    client_key: str = ""
    """The key of client_cert."""
    node_cache_capable: bool = True
    http_timeout: str = "2s"
    leader_elect: bool = True

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"--url {self.url!r} must be http(s)://host[:port]/prefix")
        try:
            port = parts.port
        except ValueError:
            port = 0
        if port == 0 or (port is None and re.search(r":[^/\]]*$", parts.netloc)):
            raise ValueError(f"--url {self.url!r}: the port must be a number in 1..65535")
        last = parts.path.rstrip("/").rpartition("/")[2]
        if last in _VERBS:
            raise ValueError(
                f"--url {self.url!r} ends in the verb /{last}: give the prefix "
                f"({self.url.rstrip('/').removesuffix('/' + last)}); kube-scheduler appends "
                "/filter and /prioritize itself"
            )
        if parts.scheme == "https" and not self.ca_file:
            # kube-scheduler's makeTransport (pkg/scheduler/extender.go) sets Insecure when
            # enableHTTPS has no CA: it would not check archfit's certificate at all.
            raise ValueError(
                "an https --url needs --ca-file: without a CA kube-scheduler skips certificate "
                "verification altogether. For a certificate from a public CA, give the system "
                "bundle: --ca-file /etc/ssl/certs/ca-certificates.crt"
            )
        if parts.scheme == "http" and self.ca_file:
            raise ValueError("--ca-file needs an https --url")
        if bool(self.client_cert) != bool(self.client_key):
            raise ValueError("--client-cert and --client-key: give both, or neither")
        if self.client_cert and parts.scheme != "https":
            raise ValueError("--client-cert needs an https --url")
        if _seconds(self.http_timeout) is None:
            raise ValueError(
                f"--http-timeout {self.http_timeout!r}: a duration such as 2s or 1500ms"
            )

    def timeout_warning(self, resolve_deadline_seconds: float) -> str:
        """What is wrong with httpTimeout against archfit's policy.resolveDeadlineSeconds,
        or "" when it leaves archfit time to answer."""
        timeout = _seconds(self.http_timeout) or 0.0
        if resolve_deadline_seconds < timeout:
            return ""
        return (
            f"httpTimeout {self.http_timeout} is not above archfit's "
            f"policy.resolveDeadlineSeconds ({resolve_deadline_seconds:g} s): a slow registry "
            "makes kube-scheduler give up on archfit instead of archfit answering unknown"
        )

    def port_warning(self, server_port: int, webhook_port: int) -> str:
        """What is wrong with the URL's port, or "": the webhook's port answers
        AdmissionReviews only (and over TLS the extender's calls fail the handshake or 404),
        so an ignorable extender would be skipped without a word."""
        parts = urlsplit(self.url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        if port != webhook_port or port == server_port:
            return ""
        return (
            f"--url's port {port} is archfit's webhook.port, which answers only the API "
            f"server's AdmissionReviews; the extender listens on server.port ({server_port}): "
            f"use :{server_port} (with https only when server.certFile is set)"
        )

    def prefix_warning(self, prefix: str) -> str:
        """What is wrong with the URL's path against archfit's server.prefix, or "" when
        kube-scheduler's `<urlPrefix>/filter` is a path archfit serves."""
        path = urlsplit(self.url).path.rstrip("/")
        if path == prefix.rstrip("/"):
            return ""
        return (
            f"--url's path {path or '(none)'!r} is not server.prefix {prefix!r}: archfit "
            f"answers 404 to {path}/filter, and with ignorable: true kube-scheduler then "
            f"skips archfit without a word; end --url in {prefix} (or give the --config of "
            "the archfit it calls)"
        )


_VERBS = ("filter", "prioritize")


def _seconds(duration: str) -> float | None:
    """A Go duration of one unit (`2s`, `1500ms`, `1m`) in seconds; None if it is not one."""
    found = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)", duration)
    if found is None:
        return None
    return float(found.group(1)) * {"ms": 0.001, "s": 1.0, "m": 60.0}[found.group(2)]


def render(registration: Registration) -> str:
    """The commented KubeSchedulerConfiguration for `registration`."""
    r = registration
    tls = ""
    if r.ca_file:
        tls = (
            "  # archfit serves HTTPS (server.certFile/keyFile); trust its CA.\n"
            "  enableHTTPS: true\n"
            "  tlsConfig:\n"
            f"    caFile: {_quote(r.ca_file)}\n"
        )
    if r.client_cert:
        tls += (
            "    # archfit requires a client certificate (server.clientCaFile): present this one.\n"
            f"    certFile: {_quote(r.client_cert)}\n"
            f"    keyFile: {_quote(r.client_key)}\n"
        )

    cache = (
        "  # archfit list-watches Nodes itself, so the scheduler sends only node names.\n"
        "  nodeCacheCapable: true\n"
        if r.node_cache_capable
        else "  # The scheduler sends whole Node objects; archfit needs no node index.\n"
        "  nodeCacheCapable: false\n"
    )
    return f"""\
# KubeSchedulerConfiguration that registers archfit as a scheduler extender.
# Made by `archfit scheduler-config --url {r.url}{" --ca-file " + r.ca_file if r.ca_file else ""}`.
# Give it to kube-scheduler with --config. The urlPrefix must be reachable from where
# kube-scheduler runs: a kubeadm scheduler uses the host network and cannot resolve
# cluster DNS, so give it the archfit Service's ClusterIP (deploy/README.md, "Which urlPrefix").
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: {_quote(r.kubeconfig)}
# Several scheduler replicas must elect one leader (kubeadm also passes --leader-elect).
leaderElection:
  leaderElect: {str(r.leader_elect).lower()}
# Above 100 nodes kube-scheduler only sends a sample of the feasible nodes to
# extenders. An arm64-only pod in a mostly-amd64 cluster can then miss every
# arm64 node in one cycle; scoring all nodes avoids that.
percentageOfNodesToScore: 100
extenders:
- urlPrefix: {_quote(r.url)}
  filterVerb: filter
  prioritizeVerb: prioritize
  # Score added = archfit score (0..10) x weight x 10.
  weight: 1
{cache}{tls}  # archfit answers within its own resolution deadline (1.5 s by default).
  httpTimeout: {r.http_timeout}
  # If archfit is down, schedule as if it were not installed.
  ignorable: true
"""


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
