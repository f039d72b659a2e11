"""Two `archfit serve` replicas on one control plane, as the shipped deployment runs them.

Its own control plane with the four nodes, the shipped ImagePlatforms CRD, admission policy
and binding, and two real replicas with the webhook on: A starts first and leads the
publisher, then B. What a test does to them (route the webhook, kill one, put a balancer in
front) is its own.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client

from tests.e2e import cluster
from tests.e2e.archfit import archfit_settings, merge
from tests.e2e.catalog import Images
from tests.e2e.controlplane import Binaries, ControlPlane
from tests.e2e.policy import AdmissionPolicy, refused
from tests.e2e.topology import control_plane_with_nodes
from tests.e2e.webhook import WebhookArchfit
from tests.support.waiting import wait_for

LEAD_SECONDS = 90
"""Bound on a replica's wait to lead the publisher: a killed leader's Lease runs out first."""


@dataclass
class Replicas:
    """Two replicas on one control plane, the shipped policy, and the admin's API."""

    control_plane: ControlPlane
    policy: AdmissionPolicy
    a: WebhookArchfit
    b: WebhookArchfit
    core: client.CoreV1Api
    images: Images

    def leads(self, replica: WebhookArchfit) -> bool:
        """Whether `replica` holds the publisher's Lease (its own gauge says so)."""
        return replica.archfit.metric("archfit_policy_publisher_leader") == 1.0

    def wait_leads(self, replica: WebhookArchfit, what: str) -> None:
        wait_for(lambda: self.leads(replica), what, seconds=LEAD_SECONDS)

    def kill(self, *replicas: WebhookArchfit) -> None:
        """SIGKILL: a crash, its Leases held until they expire."""
        for replica in replicas:
            process = replica.archfit.process
            if process.running():
                assert process.pid is not None
                os.killpg(process.pid, signal.SIGKILL)
            process.stop()
            assert refused(replica.webhook_port)


R = TypeVar("R", bound=Replicas)


def replica_settings(
    kubeconfig: Path, images: Images, policy: Mapping[str, Any], **more: Any
) -> dict[str, Any]:
    """The replicas' settings: the admission policy published every half second (with
    `policy` merged in), held pods retried every half second and held up to 300 s (so a
    release seen is a lookup's, not the cap's), and `more` merged last."""
    fixed = {
        "admissionPolicy": {"enabled": True, "publishSeconds": 0.5, **policy},
        "webhook": {"gate": {"retrySeconds": 0.5, "maxWaitSeconds": 300}},
    }
    return merge(merge(archfit_settings(kubeconfig, images), fixed), more)


@contextlib.contextmanager
def two_replicas(
    kind: type[R],
    binaries: Binaries,
    images: Images,
    workdir: Path,
    policy: Mapping[str, Any] | None = None,
    more: Mapping[str, Any] | None = None,
    front: int | None = None,
) -> Iterator[R]:
    """A control plane with the nodes and the shipped policy (failurePolicy Fail, so a CEL
    error shows as a refused CREATE), replica A leading the publisher and replica B started
    after it, both with `replica_settings(..., policy, **more)`; everything stopped on exit.
    `front` is a balancer's port the webhook configurations name instead of a replica's."""
    started: list[WebhookArchfit] = []
    with control_plane_with_nodes(binaries, workdir / "control-plane") as control_plane:
        core = cluster.core_api(control_plane.admin_kubeconfig)
        installed = AdmissionPolicy(control_plane.admin_kubeconfig).install(failure_policy="Fail")
        kubeconfig = control_plane.admin_kubeconfig
        chosen = replica_settings(kubeconfig, images, policy or {}, **(more or {}))
        a = WebhookArchfit(kubeconfig, chosen, workdir, name="replica-a", front=front)
        started.append(a)
        b = WebhookArchfit(kubeconfig, chosen, workdir, name="replica-b", front=front)
        started.append(b)
        found = kind(control_plane, installed, a, b, core, images)
        try:
            a.start()
            found.wait_leads(a, "replica A to lead the publisher")
            b.start()
            yield found
        finally:
            for replica in started:
                replica.stop()
