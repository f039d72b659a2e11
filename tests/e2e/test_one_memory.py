"""One memory for the cluster (docs/webhook.md, "When archfit is down"): what any replica
learned, every replica and the admission policy know.

Its own control plane with the shipped CRD, policy and binding, and two real `archfit serve`
processes: replica A holds the publisher's Lease, and kube-apiserver's webhook calls go to
replica B alone (as its kept connection can), unless a test routes them elsewhere. No
kube-scheduler: what matters here is what is written into each pod at CREATE.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config

from extender.core.parameter import PublishedTable, read_spec
from extender.core.text import utc_text
from tests.e2e import cluster
from tests.e2e.archfit import archfit_command
from tests.e2e.catalog import Images
from tests.e2e.controlplane import Binaries
from tests.e2e.policy import (
    bound_pod,
    fresh_image,
    is_gated,
    required_arch,
)
from tests.e2e.replicas import Replicas, two_replicas
from tests.e2e.topology import ARCH_OF, NODES
from tests.e2e.webhook import PROBES, WebhookArchfit
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

UNUSED_SECONDS = 3.0
"""admissionPolicy.unusedSeconds here: short, so an image's leaving is seen in a test."""
"""The namespace of the dry-run pods that find out which replica kube-apiserver calls."""
MAX_BYTES = 100_000
"""admissionPolicy.maxBytes here: what 23 pods of 100 long spellings each would overflow."""


class Pair(Replicas):
    """The two replicas, with kube-apiserver's webhook calls routed to one of them."""

    def start_a_then_b(self) -> None:
        """A first, leading the publisher, then B, and the webhook routed to B."""
        self.a.archfit.start()
        self.wait_leads(self.a, "replica A to lead the publisher")
        self.b.archfit.start()
        self.webhook_to(self.b)

    def webhook_to(self, replica: WebhookArchfit) -> None:
        """Every pod CREATE goes to `replica`'s webhook from now on."""
        replica.unregister()
        replica.register()

        def routed() -> bool:
            name = f"route-probe-{uuid.uuid4().hex[:8]}"
            probe = cluster.pod_manifest(name, [self.images.multi.reference])
            self.core.create_namespaced_pod(PROBES, probe, dry_run="All")
            return f'"{name}"' in replica.log_path.read_text()

        wait_for(routed, "kube-apiserver to call the chosen replica")

    @contextlib.contextmanager
    def webhook_at(self, replica: WebhookArchfit) -> Iterator[None]:
        """Within the block, every pod CREATE goes to `replica`; then to B again."""
        self.webhook_to(replica)
        try:
            yield
        finally:
            self.webhook_to(self.b)

    def spec(self) -> dict[str, Any]:
        return self.policy.parameter()

    def table(self) -> PublishedTable:
        return PublishedTable.of(read_spec(self.spec()))

    def status(self) -> dict[str, Any]:
        found = self.policy.objects.get_cluster_custom_object(
            "archfit.io", "v1alpha1", "imageplatforms", "archfit"
        )
        status: dict[str, Any] = found.get("status") or {}
        return status


@pytest.fixture(scope="module")
def pair(
    e2e_binaries: Binaries, images: Images, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Pair]:
    workdir = tmp_path_factory.mktemp("one-memory")
    policy = {"unusedSeconds": UNUSED_SECONDS, "refreshSeconds": 10, "maxBytes": MAX_BYTES}
    with two_replicas(Pair, e2e_binaries, images, workdir, policy) as found:
        cluster.create_namespace(found.core, PROBES)
        found.webhook_to(found.b)
        yield found


@pytest.fixture
def space(pair: Pair) -> Iterator[str]:
    with cluster.scratch_namespace(pair.core, "mem") as name:
        yield name


def registry_requests(images: Images, mark: int, reference: str) -> list[tuple[str, str]]:
    """What the public registry answered for `reference`'s repository since `mark`."""
    repo = reference.split("/", 1)[1].rsplit(":", 1)[0]
    return [
        (r.method, r.path)
        for r in images.public.requests_since(mark)
        if r.path.startswith(f"/v2/{repo}/")
    ]


def filter_call(replica: WebhookArchfit, namespace: str, image: str) -> dict[str, Any]:
    """kube-scheduler's filter call to `replica` for a pod of `image` over every node."""
    pod = cluster.pod_manifest("filtered", [image])
    pod["metadata"].update({"namespace": namespace, "uid": str(uuid.uuid4())})
    body = json.dumps({"Pod": pod, "NodeNames": [node.name for node in NODES]}).encode()
    request = urllib.request.Request(  # noqa: S310 - an http URL of ours
        f"{replica.url_prefix}/filter", body, {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
        found: dict[str, Any] = json.loads(answer.read())
    return found


# --- the cache tier ----------------------------------------------------------------------


def test_a_replica_answers_an_image_only_the_leader_looked_up_with_no_registry_request(
    pair: Pair, space: str, images: Images
) -> None:
    """Replica A (the leader) admitted and resolved an image's pod; replica B, which never
    looked it up, answers kube-scheduler's filter for it from the published table: arm64
    nodes rejected, and not one registry request from B."""
    image = fresh_image(images, name="tier")
    with pair.webhook_at(pair.a):
        cluster.create_pod(pair.core, space, cluster.pod_manifest("seen-by-a", [image]))
        pair.policy.wait_published(image)
    mark = images.public.mark()
    answer = filter_call(pair.b, space, image)
    kept = sorted(answer.get("NodeNames") or [])
    assert ([n for n, arch in ARCH_OF.items() if arch == "amd64"], []) == (
        kept,
        registry_requests(images, mark, image),
    )
    answered = 'archfit_policy_table_lookups_total{answered_by="table"}'
    assert (pair.b.archfit.metric(answered) or 0) >= 1


# --- only pods count as use ----------------------------------------------------------------


def test_a_running_pods_image_stays_past_unused_seconds_after_its_create(
    pair: Pair, space: str, images: Images
) -> None:
    """A pod that stays keeps its image listed however long ago it was created: another
    image, whose pod was created later and deleted, leaves first (unusedSeconds after its
    pod went), and the running pod's image is still there. Webhook calls go to the leader,
    as when one replica does everything."""
    with pair.webhook_at(pair.a):
        running = fresh_image(images, name="running")
        cluster.create_pod(pair.core, space, cluster.pod_manifest("running", [running]))
        pair.policy.wait_published(running)
        gone = fresh_image(images, name="gone")
        cluster.create_pod(pair.core, space, cluster.pod_manifest("gone", [gone]))
        pair.policy.wait_published(gone)
        pair.core.delete_namespaced_pod("gone", space, grace_period_seconds=0)
        wait_for(lambda: gone not in pair.spec()["images"], "the deleted pod's image to leave")
        assert running in pair.spec()["images"]


# --- fairness ------------------------------------------------------------------------------


def tenant_api(pair: Pair, namespace: str, user: str) -> client.CoreV1Api:
    """A client acting as `user`, who may do in `namespace` what the `edit` role lets one do
    with pods, and nothing elsewhere. (`edit` is aggregated by kube-controller-manager, which
    does not run here: the Role holds its pod rules.)"""
    rbac = client.RbacAuthorizationV1Api(pair.core.api_client)
    verbs = ["create", "delete", "deletecollection", "patch", "update", "get", "list", "watch"]
    rbac.create_namespaced_role(
        namespace,
        {"metadata": {"name": "edit-pods"},
         "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": verbs}]},
    )  # fmt: skip
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": f"{user}-edit"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                        "name": "edit-pods"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        },
    )  # fmt: skip
    api = config.new_client_from_config(config_file=str(pair.control_plane.admin_kubeconfig))
    api.set_default_header("Impersonate-User", user)
    return client.CoreV1Api(api)


def spellings(images: Images, pod: int, count: int) -> list[str]:
    """`count` references of the amd64-only image's one digest, each with its own 128-char
    tag (`repo:<tag>@<digest>`)."""
    repo = images.amd64_only.reference.rsplit(":", 1)[0]
    return [
        f"{repo}:{f'p{pod}-s{n}-'.ljust(128, 'x')}@{images.amd64_only.digest}" for n in range(count)
    ]


def victims(pair: Pair, namespace: str, images: Images, count: int) -> list[str]:
    """`count` images of one tenant, each in a running pod, all listed."""
    found = [fresh_image(images, name=f"victim{n}") for n in range(count)]
    for n in range(0, count, 10):
        cluster.create_pod(
            pair.core, namespace, cluster.pod_manifest(f"victim-{n}", found[n : n + 10])
        )
    pair.policy.wait_published(*found)
    return found


def test_dry_run_creates_of_many_spellings_of_one_digest_cannot_push_out_another_tenants_images(
    pair: Pair, space: str, images: Images
) -> None:
    """A tenant with only `edit` in its namespace sends 23 server-side dry-run CREATEs of 100
    spellings each of one digest, through the publishing replica's webhook: the other
    tenant's 40 images all stay listed, and none of the spellings is."""
    attacker = f"mallory-{uuid.uuid4().hex[:6]}"
    cluster.create_namespace(pair.core, attacker)
    mallory = tenant_api(pair, attacker, "mallory")
    with pair.webhook_at(pair.a):
        listed = victims(pair, space, images, 40)
        for n in range(23):
            pod = cluster.pod_manifest(f"spam-{n}", spellings(images, n, 100))
            mallory.create_namespaced_pod(attacker, pod, dry_run="All")
        # A pod created after every dry run: once it is listed, a publish has seen them all.
        marker = fresh_image(images, name="marker")
        cluster.create_pod(pair.core, space, cluster.pod_manifest("marker", [marker]))
        spec = pair.policy.wait_published(marker)
    keys = spec["images"]
    assert (set(listed), []) == (
        set(listed) & set(keys),
        [key for key in keys if "-s0-" in key or "-s1-" in key],
    )


def test_a_tenants_pods_naming_one_digest_a_hundred_ways_cost_one_entry(
    pair: Pair, space: str, images: Images
) -> None:
    """Real pods (they use quota) of 100 spellings each of one digest are one entry, keyed
    by the digest; the other tenant's images stay listed."""
    with pair.webhook_at(pair.a):
        listed = victims(pair, space, images, 20)
    attacker = f"trudy-{uuid.uuid4().hex[:6]}"
    cluster.create_namespace(pair.core, attacker)
    trudy = tenant_api(pair, attacker, "trudy")
    try:
        for n in range(5):
            pod = bound_pod(f"spell-{n}", spellings(images, n, 100))
            trudy.create_namespaced_pod(attacker, pod)
        key = f"@{images.amd64_only.digest}"
        spec = pair.policy.wait_published(key)
        ours = [k for k in spec["images"] if images.amd64_only.reference.rsplit(":", 1)[0] in k]
        assert ([], set(listed)) == (ours, set(listed) & set(spec["images"]))
        assert pair.table().platforms_of(key) is not None
    finally:
        cluster.delete_namespace_pods(pair.core, attacker)


def test_archfit_policy_status_shows_the_published_object(
    pair: Pair, space: str, images: Images
) -> None:
    """`archfit policy status -o json`, with the operator's kubeconfig, reads what the
    leader published: every entry with its exact platforms, oldest first."""
    image = fresh_image(images, "linux/arm64", name="status")
    cluster.create_pod(pair.core, space, bound_pod("status", [image]))
    pair.policy.wait_published(image)
    done = subprocess.run(
        [*archfit_command(), "policy", "status", "-o", "json",
         "--kubeconfig", str(pair.control_plane.admin_kubeconfig)],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    report = json.loads(done.stdout)
    listed = pair.spec()["images"]
    assert (len(listed), sorted(listed)) == (
        report["images"],
        sorted(entry["image"] for entry in report["entries"]),
    )
    times = [entry["resolvedAt"] for entry in report["entries"]]
    mine = next(entry for entry in report["entries"] if entry["image"] == image)
    assert (times, ["linux/arm64"], True) == (sorted(times), mine["platforms"], mine["exact"])


# --- coverage, whichever replica saw it; then both replicas down -------------------------


def test_an_image_only_the_other_replica_admitted_is_published_and_constrains_with_both_down(
    pair: Pair, space: str, images: Images
) -> None:
    """The webhook's calls go to B; A publishes. A new image's pod, admitted by B, is in the
    parameter within publishSeconds plus one lookup; with both replicas SIGKILLed, a
    replacement pod is constrained by the policy alone (not held)."""
    image = fresh_image(images, name="coverage")
    cluster.create_pod(pair.core, space, cluster.pod_manifest("first", [image]))
    assert [["amd64"]] == required_arch(pair.core.read_namespaced_pod("first", space))
    pair.policy.wait_published(image)
    pair.kill(pair.a, pair.b)
    try:
        cluster.create_pod(pair.core, space, cluster.pod_manifest("replacement", [image]))
        pod = pair.core.read_namespaced_pod("replacement", space)
        assert ([["amd64"]], False) == (required_arch(pod), is_gated(pod))
    finally:
        pair.start_a_then_b()


# --- freshness at a takeover ---------------------------------------------------------------


def test_after_a_takeover_carried_entries_keep_their_time_and_the_oldest_are_resolved_first(
    pair: Pair, space: str, images: Images
) -> None:
    """Two images the leader resolved a second or more apart (their pods admitted by A, so
    B's cache never held them); A is SIGKILLed and B takes over: B's first publish keeps each
    entry's resolved-at, and B's first refresh (refreshSeconds has passed for both) starts
    with the older one, then asks the registry for both."""
    older = fresh_image(images, name="zz-older")  # sorts last: not first by name
    newer = fresh_image(images, name="aa-newer")
    with pair.webhook_at(pair.a):
        cluster.create_pod(pair.core, space, cluster.pod_manifest("older", [older]))
        pair.policy.wait_published(older)
        first = pair.table().unpacked(older)
        assert first is not None
        wait_for(lambda: time.time() >= first.resolved_at + 1.5, "a second to pass")
        cluster.create_pod(pair.core, space, cluster.pod_manifest("newer", [newer]))
        pair.policy.wait_published(newer)
    leader = pair.status()["publisher"]
    pair.kill(pair.a)
    mark = images.public.mark()
    try:
        before = pair.table()
        times = {i: before.unpacked(i).resolved_at for i in (older, newer)}  # type: ignore[union-attr]
        assert times[older] < times[newer]
        wait_for(lambda: pair.status()["publisher"] != leader, "replica B to publish", seconds=90)
        after = pair.table()
        assert times == {i: after.unpacked(i).resolved_at for i in (older, newer)}  # type: ignore[union-attr]

        def refresh_started() -> dict[str, Any] | None:
            for line in pair.b.log_path.read_text().splitlines():
                if '"policy_refresh_started"' in line:
                    found: dict[str, Any] = json.loads(line)
                    return found
            return None

        started = wait_for(refresh_started, "B to start resolving its carried entries again")
        # Oldest first: the line names the first keys due (other tests' entries may be older
        # than these two and come first), each resolved no later than the next, starting
        # with the oldest entry the predecessor published.
        assert started is not None
        carried = {k: before.unpacked(k) for k in before.images}
        first_times = [carried[k].resolved_at for k in started["first"] if carried.get(k)]  # type: ignore[union-attr]
        oldest = min(e.resolved_at for e in carried.values() if e is not None)
        assert (sorted(first_times), utc_text(oldest) if oldest else None) == (
            first_times,
            started["oldest_resolved_at"],
        )
        named = [k for k in started["first"] if k in (older, newer)]
        assert named in ([], [older], [older, newer])

        def resolved_again() -> bool:
            seen = {r.path for r in images.public.requests_since(mark) if "/manifests/" in r.path}
            repos = [i.split("/", 1)[1].rsplit(":", 1)[0] for i in (older, newer)]
            return all(any(p.startswith(f"/v2/{repo}/") for p in seen) for repo in repos)

        wait_for(resolved_again, "B to ask the registry for both again")
    finally:
        pair.b.archfit.stop()
        pair.start_a_then_b()
