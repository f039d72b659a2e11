"""RBAC that grants `list` but not `watch` on Nodes, against a real kube-apiserver: the node
index backs off as client-go's reflector does, and the apiserver's audit log counts it.

The back-off's delays are taken from the index (and waited only a moment each), so the test
counts attempts instead of waiting minutes: each attempt is one list and one refused watch
in the audit log, and the delays grow from 0.8 s to 30 s whatever the lists between them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from kubernetes import client

from extender.kube.client.api import KubeApi, connect
from extender.kube.client.rest_config import RestConfig
from extender.kube.client.watching import (
    BACKOFF_CAP_SECONDS,
    BACKOFF_INITIAL_SECONDS,
    ReflectorBackoff,
)
from extender.kube.nodes import NodeIndex
from tests.e2e import cluster
from tests.e2e.controlplane import AUDITED_USER, ControlPlane
from tests.support.clock import FakeClock
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

ATTEMPTS = 8
"""Rounds watched: enough to reach the 30 s cap (0.8, 1.6, 3.2, 6.4, 12.8, 25.6, then 30)."""
NAMESPACE, ACCOUNT = "default", "list-without-watch"
assert f"system:serviceaccount:{NAMESPACE}:{ACCOUNT}" == AUDITED_USER


@pytest.fixture
def list_only_token(control_plane: ControlPlane) -> Iterator[str]:
    """A service account's token whose ClusterRole lists Nodes and nothing more."""
    api_client = cluster.core_api(control_plane.admin_kubeconfig).api_client
    core, rbac = client.CoreV1Api(api_client), client.RbacAuthorizationV1Api(api_client)
    core.create_namespaced_service_account(NAMESPACE, {"metadata": {"name": ACCOUNT}})
    rbac.create_cluster_role(
        {
            "metadata": {"name": ACCOUNT},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}],
        }
    )
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": ACCOUNT},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": ACCOUNT,
            },
            "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}],
        }
    )
    token = core.create_namespaced_service_account_token(
        ACCOUNT, NAMESPACE, {"spec": {"expirationSeconds": 3600}}
    )
    try:
        yield token.status.token
    finally:
        rbac.delete_cluster_role_binding(ACCOUNT)
        rbac.delete_cluster_role(ACCOUNT)
        core.delete_namespaced_service_account(ACCOUNT, NAMESPACE)


def _api(control_plane: ControlPlane, token: str) -> KubeApi:
    assert control_plane.certs is not None
    ca = Path(control_plane.certs.ca_cert).read_bytes()
    return connect(RestConfig(host=control_plane.server, ca_data=ca, bearer_token=token), {})


def _audited(log: Path, verb: str) -> int:
    """The audit log's requests by the list-only account for Nodes, with `verb` (a request
    may have an event per stage: counted once, by its audit ID)."""
    events = [orjson.loads(line) for line in log.read_bytes().splitlines() if line.strip()]
    return len(
        {
            event["auditID"]
            for event in events
            if event.get("verb") == verb
            and event.get("objectRef", {}).get("resource") == "nodes"
            and event.get("user", {}).get("username") == AUDITED_USER
        }
    )


async def test_a_refused_watch_backs_off_to_thirty_seconds_and_a_good_list_does_not_reset_it(
    control_plane: ControlPlane, list_only_token: str
) -> None:
    """ATTEMPTS rounds: ATTEMPTS lists and ATTEMPTS refused watches in the audit log, delays
    from 0.8 s doubling to the 30 s cap (jitter off here), and the index says why it cannot
    stay current."""
    delays: list[float] = []
    finished = threading.Event()

    def wait(seconds: float) -> None:
        delays.append(seconds)
        if len(delays) >= ATTEMPTS:
            finished.wait()  # parked: no round more until the test is done
        finished.wait(0.05)

    log = control_plane.audit_log
    lists_before, watches_before = _audited(log, "list"), _audited(log, "watch")
    no_jitter = ReflectorBackoff(clock=FakeClock(), jitter=lambda: 0.0)
    index = NodeIndex(_api(control_plane, list_only_token), backoff=no_jitter, wait=wait)
    index.start()
    try:
        wait_for(lambda: len(delays) >= ATTEMPTS, f"{ATTEMPTS} rounds of list and watch")
        # The apiserver writes an event once its response is done: wait for the last one.
        wait_for(
            lambda: _audited(log, "watch") - watches_before >= ATTEMPTS,
            f"{ATTEMPTS} watch events in the audit log",
        )
        counted = (_audited(log, "list") - lists_before, _audited(log, "watch") - watches_before)
        problem = index.problem
    finally:
        finished.set()
        await index.stop()
    expected = [min(BACKOFF_INITIAL_SECONDS * 2**n, BACKOFF_CAP_SECONDS) for n in range(ATTEMPTS)]
    assert (expected, (ATTEMPTS, ATTEMPTS)) == ([round(d, 6) for d in delays], counted)
    assert problem is not None
    assert 'cannot watch resource "nodes"' in problem
