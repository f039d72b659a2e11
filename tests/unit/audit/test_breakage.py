"""Pods broken now by an architecture mismatch, from statuses and events."""

import pytest

from extender.audit.pure.breakage import EXEC_FORMAT_ERROR, NO_MATCHING_MANIFEST, find
from extender.audit.pure.workloads import Owners, WorkloadKey, from_object
from tests.support.audit_objects import pod_spec, running_pod, workload_object

DOCKER_PULL = (
    'Failed to pull image "acme/api:1": no matching manifest for linux/arm64/v8 '
    "in the manifest list entries"
)
CONTAINERD_PULL = (
    'Failed to pull image "acme/api:1": rpc error: code = NotFound desc = failed to pull and '
    'unpack image "docker.io/acme/api:1": no match for platform in manifest: not found'
)
EXEC = (
    "failed to create containerd task: failed to create shim task: OCI runtime create failed: "
    'runc create failed: unable to start container process: exec: "/app": exec format error'
)


def _owners():
    api = from_object("Deployment", workload_object("Deployment", "api", pod_spec("acme/api:1")))
    return Owners([api], [{"metadata": {"uid": "uid-api-1", "ownerReferences": [
        {"kind": "Deployment", "uid": "uid-api", "controller": True}]}}])  # fmt: skip


def _pod(**status):
    return running_pod("api-1-x", "arm-1", "api-1", "ReplicaSet", **status)


def _waiting(reason, message):
    waiting = {"reason": reason, "message": message}
    return {
        "containerStatuses": [{"name": "c0", "image": "acme/api:1", "state": {"waiting": waiting}}]
    }


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (_waiting("ErrImagePull", DOCKER_PULL), [NO_MATCHING_MANIFEST]),
        (_waiting("ImagePullBackOff", f"Back-off pulling image: {CONTAINERD_PULL}"),
         [NO_MATCHING_MANIFEST]),
        (_waiting("ErrImagePull", "pull access denied, repository does not exist"), []),
        (_waiting("RunContainerError", EXEC), [EXEC_FORMAT_ERROR]),
        ({"containerStatuses": [{"name": "c0", "image": "acme/api:1", "state": {"running": {}},
          "lastState": {"terminated": {"reason": "StartError", "message": EXEC}}}]},
         [EXEC_FORMAT_ERROR]),
        ({"initContainerStatuses": [{"name": "i", "image": "acme/api:1",
          "state": {"terminated": {"reason": "Error", "message": EXEC}}}]}, [EXEC_FORMAT_ERROR]),
    ],
)  # fmt: skip
def test_pod_statuses_that_show_an_architecture_mismatch_are_broken(status, expected):
    """Docker's and containerd's pull errors, and exec format error, in any container status."""
    broken = find([_pod(**status)], [], _owners(), {"arm-1": "arm64"})
    assert expected == [item.problem for item in broken]


def test_an_event_names_the_image_of_its_container_and_the_node_architecture():
    """The event's fieldPath points at the container whose image failed."""
    event = {
        "involvedObject": {"kind": "Pod", "namespace": "shop", "name": "api-1-x",
                           "uid": "uid-api-1-x", "fieldPath": "spec.containers{c0}"},
        "reason": "Failed",
        "message": DOCKER_PULL,
    }  # fmt: skip
    [item] = find([_pod()], [event], _owners(), {"arm-1": "arm64"})
    expected = (WorkloadKey("Deployment", "shop", "api"), "app:1", "arm-1", "arm64")
    assert expected == (item.workload, item.image, item.node, item.node_arch)


def test_a_status_and_an_event_about_the_same_failure_count_once():
    """One broken image per pod, however many times kubelet said so."""
    event = {"involvedObject": {"kind": "Pod", "namespace": "shop", "name": "api-1-x",
                                "uid": "uid-api-1-x"}, "message": DOCKER_PULL}  # fmt: skip
    pod = _pod(**_waiting("ErrImagePull", DOCKER_PULL))
    pod["spec"]["containers"][0]["image"] = "acme/api:1"
    assert 1 == len(find([pod], [event, event], _owners(), {}))


def test_events_about_pods_that_are_gone_or_about_other_objects_are_ignored():
    """Broken now means a pod that exists; a Node event is not a pod's."""
    events = [
        {"involvedObject": {"kind": "Pod", "namespace": "shop", "name": "gone", "uid": "uid-gone"},
         "message": DOCKER_PULL},
        {"involvedObject": {"kind": "Node", "name": "arm-1"}, "message": EXEC},
    ]  # fmt: skip
    assert [] == find([_pod()], events, _owners(), {})


def test_an_event_about_an_earlier_pod_of_the_same_name_is_not_about_this_one():
    """A StatefulSet pod recreated after the fix: its predecessor's event names another uid."""
    stale = {
        "involvedObject": {
            "kind": "Pod",
            "namespace": "shop",
            "name": "api-1-x",
            "uid": "uid-of-the-pod-before",
        },
        "message": DOCKER_PULL,
    }
    current = {"involvedObject": {"kind": "Pod", "namespace": "shop", "name": "api-1-x",
                                  "uid": "uid-api-1-x"}, "message": EXEC}  # fmt: skip
    assert [] == find([_pod()], [stale], _owners(), {})
    assert [EXEC_FORMAT_ERROR] == [
        b.problem for b in find([_pod()], [stale, current], _owners(), {})
    ]
