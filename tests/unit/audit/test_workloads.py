"""Workloads from their objects: images, credentials, replicas, requests, and pod owners."""

import pytest

from extender.audit.pure.workloads import (
    Owners,
    WorkloadError,
    WorkloadKey,
    from_object,
    node_architectures,
    running,
)
from extender.core.pods import PullSecretsRef
from tests.support.audit_objects import (
    arch_node,
    container,
    meta,
    pod_spec,
    running_pod,
    workload_object,
)


@pytest.mark.parametrize(
    ("kind", "fields", "replicas"),
    [
        ("Deployment", {"replicas": 3}, 3),
        ("Deployment", {}, 1),
        ("StatefulSet", {"replicas": 0}, 0),
        ("DaemonSet", {"status": {"desiredNumberScheduled": 4}}, 4),
        ("DaemonSet", {}, 0),
        ("Job", {"parallelism": 5}, 5),
        ("Job", {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}, 0),
        ("Job", {"status": {"conditions": [{"type": "Failed", "status": "True"}]}}, 0),
        ("Job", {"status": {"conditions": [{"type": "Suspended", "status": "True"}]}}, 1),
        ("CronJob", {"parallelism": 2}, 2),
        ("Pod", {}, 1),
    ],
)
def test_replicas_come_from_where_each_kind_keeps_them(kind, fields, replicas):
    """spec.replicas, a DaemonSet's desired count, a Job's parallelism, one bare pod."""
    obj = workload_object(kind, "w", pod_spec("app:1"), **fields)
    assert replicas == from_object(kind, obj).replicas


def test_a_cronjobs_images_come_from_its_job_template_init_containers_first():
    """The pod template sits under spec.jobTemplate.spec.template."""
    obj = workload_object("CronJob", "nightly", pod_spec("app:1", init=("migrate:1",)))
    assert ("migrate:1", "app:1") == from_object("CronJob", obj).images


def test_credentials_are_the_templates_pull_secrets_and_service_account():
    """What kubelet would use for the template's pods."""
    spec = pod_spec("app:1", imagePullSecrets=[{"name": "regcred"}], serviceAccountName="ci")
    workload = from_object("Deployment", workload_object("Deployment", "api", spec))
    assert PullSecretsRef("shop", ("regcred",), "ci") == workload.pull


def test_a_pods_cpu_is_its_containers_sum_or_its_largest_init_container():
    """Init containers run one at a time before the containers; sidecars run alongside."""
    spec = {
        "initContainers": [
            container("migrate", "m:1", cpu="3"),
            {**container("proxy", "p:1", cpu="250m"), "restartPolicy": "Always"},
        ],
        "containers": [container("a", "a:1", cpu="500m"), container("b", "b:1", cpu="1")],
    }
    assert 3000 == from_object("Pod", workload_object("Pod", "p", spec)).cpu_millis
    spec["initContainers"][0] = container("migrate", "m:1", cpu="1")
    assert 1750 == from_object("Pod", workload_object("Pod", "p", spec)).cpu_millis


def test_a_missing_request_falls_back_to_the_limit_and_then_to_zero():
    """API defaulting copies limits into unset requests; nothing set counts as none."""
    limited = {"name": "a", "image": "a:1", "resources": {"limits": {"cpu": "2"}}}
    spec = {"containers": [limited, container("b", "b:1", cpu=None)]}
    assert 2000 == from_object("Pod", workload_object("Pod", "p", spec)).cpu_millis


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda o: o["spec"].update(replicas="3"), "spec.replicas must be a non-negative"),
        (lambda o: o["spec"]["template"].update(spec=[]), "spec.template.spec must be an object"),
        (
            lambda o: o["spec"]["template"]["spec"]["containers"][0].update(
                resources={"requests": {"cpu": "lots"}}
            ),
            "'lots' is not a quantity",
        ),
        (lambda o: o["spec"]["template"]["spec"].update(containers={}), "containers must be"),
    ],
)
def test_a_malformed_workload_raises_an_error_naming_it_and_the_field(mutate, message):
    """The audit skips it with this reason instead of crashing."""
    obj = workload_object("Deployment", "api", pod_spec("app:1"))
    mutate(obj)
    with pytest.raises(WorkloadError, match=message) as caught:
        from_object("Deployment", obj)
    assert str(caught.value).startswith("shop/deployment/api: ")


def _owners():
    deployment = from_object("Deployment", workload_object("Deployment", "api", pod_spec("a:1")))
    cron = from_object("CronJob", workload_object("CronJob", "nightly", pod_spec("a:1")))
    job = from_object("Job", workload_object("Job", "once", pod_spec("a:1")))
    bare = from_object("Pod", workload_object("Pod", "debug", pod_spec("a:1")))
    intermediates = [
        {"metadata": meta("api-5d8f", owner="api", kind="Deployment")},
        {"metadata": meta("nightly-28000", owner="nightly", kind="CronJob")},
        {"metadata": meta("orphan-rs")},
    ]
    return Owners([deployment, cron, job, bare], intermediates)


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        (running_pod("api-5d8f-x", "n", "api-5d8f", "ReplicaSet"), ("Deployment", "api")),
        (running_pod("nightly-28000-x", "n", "nightly-28000", "Job"), ("CronJob", "nightly")),
        (running_pod("once-x", "n", "once", "Job"), ("Job", "once")),
        (running_pod("debug", "n", None), ("Pod", "debug")),
        (running_pod("orphan-rs-x", "n", "orphan-rs", "ReplicaSet"), None),
        (running_pod("stranger", "n", "other", "ReplicaSet"), None),
    ],
)
def test_pods_are_attributed_through_their_controller_chain(pod, expected):
    """Pod → ReplicaSet → Deployment and Pod → Job → CronJob, as kubectl walks them."""
    key = _owners().of(pod)
    assert expected == (None if key is None else (key.kind, key.name))


def test_running_pods_are_counted_per_node_architecture_and_finished_ones_are_not():
    """Bound pods count on their node's architecture; Succeeded pods and unbound ones do not."""
    pods = [
        running_pod("api-5d8f-a", "arm-1", "api-5d8f", "ReplicaSet"),
        running_pod("api-5d8f-b", "amd-1", "api-5d8f", "ReplicaSet"),
        running_pod("api-5d8f-c", "amd-1", "api-5d8f", "ReplicaSet"),
        running_pod("api-5d8f-d", "gone", "api-5d8f", "ReplicaSet"),
        running_pod("api-5d8f-e", "", "api-5d8f", "ReplicaSet"),
        running_pod("once-x", "arm-1", "once", "Job", phase="Succeeded"),
    ]
    arch = node_architectures([arch_node("arm-1", "aarch64"), arch_node("amd-1", "amd64")])
    expected = {WorkloadKey("Deployment", "shop", "api"): {"arm64": 1, "amd64": 2, "unknown": 1}}
    assert expected == running(pods, _owners(), arch)
