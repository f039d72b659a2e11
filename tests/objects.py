"""Full v1.Pod and v1.Node JSON, shaped as kube-scheduler serialises them to extenders."""

from __future__ import annotations

import copy
import uuid
from typing import Any

_ARCH_INSTANCE = {"arm64": "m7g.large", "amd64": "m7i.large", "arm": "a1.medium"}


def node(
    name: str,
    arch: str = "amd64",
    os: str = "linux",
    *,
    labels: bool = True,
    node_info: bool = True,
    runtime: str = "containerd://2.1.4",
) -> dict[str, Any]:
    """A v1.Node of a kubelet on a cloud VM, with the labels kubelet sets itself.

    `runtime` is status.nodeInfo.containerRuntimeVersion; containerd 2.1 matches strictly.
    """
    meta_labels = {
        "beta.kubernetes.io/arch": arch,
        "beta.kubernetes.io/instance-type": _ARCH_INSTANCE.get(arch, "m5.large"),
        "beta.kubernetes.io/os": os,
        "failure-domain.beta.kubernetes.io/region": "eu-west-1",
        "failure-domain.beta.kubernetes.io/zone": "eu-west-1a",
        "kubernetes.io/arch": arch,
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": os,
        "node.kubernetes.io/instance-type": _ARCH_INSTANCE.get(arch, "m5.large"),
        "topology.kubernetes.io/region": "eu-west-1",
        "topology.kubernetes.io/zone": "eu-west-1a",
    }
    if not labels:
        meta_labels = {"kubernetes.io/hostname": name}
    info = {
        "machineID": uuid.uuid5(uuid.NAMESPACE_DNS, name).hex,
        "systemUUID": str(uuid.uuid5(uuid.NAMESPACE_URL, name)),
        "bootID": str(uuid.uuid5(uuid.NAMESPACE_OID, name)),
        "kernelVersion": "6.1.112-124.190.amzn2023." + ("aarch64" if arch == "arm64" else "x86_64"),
        "osImage": "Amazon Linux 2023.6.20241031",
        "containerRuntimeVersion": runtime,
        "kubeletVersion": "v1.31.2-eks-94953ac",
        "kubeProxyVersion": "v1.31.2-eks-94953ac",
        "operatingSystem": os,
        "architecture": arch,
    }
    return {
        "metadata": {
            "name": name,
            "uid": str(uuid.uuid5(uuid.NAMESPACE_X500, name)),
            "resourceVersion": "123456",
            "creationTimestamp": "2026-11-01T10:00:00Z",
            "labels": meta_labels,
            "annotations": {
                "alpha.kubernetes.io/provided-node-ip": "10.0.1.17",
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
            "managedFields": [
                {
                    "manager": "kubelet",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": "2026-11-01T10:00:00Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:labels": {".": {}}}},
                }
            ],
        },
        "spec": {
            "podCIDR": "10.244.1.0/24",
            "podCIDRs": ["10.244.1.0/24"],
            "providerID": f"aws:///eu-west-1a/i-{uuid.uuid5(uuid.NAMESPACE_DNS, name).hex[:17]}",
        },
        "status": {
            "capacity": {
                "cpu": "2",
                "ephemeral-storage": "83873772Ki",
                "memory": "7941568Ki",
                "pods": "29",
            },
            "allocatable": {
                "cpu": "1930m",
                "ephemeral-storage": "76224326324",
                "memory": "7251392Ki",
                "pods": "29",
            },
            "conditions": [
                {
                    "type": "MemoryPressure",
                    "status": "False",
                    "lastHeartbeatTime": "2026-11-22T01:58:00Z",
                    "lastTransitionTime": "2026-11-01T10:00:00Z",
                    "reason": "KubeletHasSufficientMemory",
                    "message": "kubelet has sufficient memory available",
                },
                {
                    "type": "Ready",
                    "status": "True",
                    "lastHeartbeatTime": "2026-11-22T01:58:00Z",
                    "lastTransitionTime": "2026-11-01T10:00:30Z",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                },
            ],
            "addresses": [
                {"type": "InternalIP", "address": "10.0.1.17"},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": info if node_info else {},
            "images": [
                {
                    "names": [
                        "registry.k8s.io/pause@sha256:" + "ee" * 32,
                        "registry.k8s.io/pause:3.10",
                    ],
                    "sizeBytes": 320368,
                }
            ],
        },
    }


def node_list(*nodes: dict[str, Any]) -> dict[str, Any]:
    """A v1.NodeList as the scheduler sends it (no apiVersion/kind on the list)."""
    return {"metadata": {}, "items": list(nodes)}


def pod(
    *images: str,
    init_images: tuple[str, ...] = (),
    name: str = "api-7d9c6b5f4-x2x7q",
    namespace: str = "shop",
    annotations: dict[str, str] | None = None,
    pull_secrets: tuple[str, ...] = (),
    service_account: str = "default",
) -> dict[str, Any]:
    """A v1.Pod from a Deployment's ReplicaSet, as it is before binding."""
    containers = [_container(f"c{i}", image) for i, image in enumerate(images or ("nginx:1.27",))]
    spec: dict[str, Any] = {
        "volumes": [
            {
                "name": "kube-api-access-abcde",
                "projected": {
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}
                    ],
                    "defaultMode": 420,
                },
            }
        ],
        "containers": containers,
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": service_account,
        "serviceAccount": service_account,
        "securityContext": {},
        "schedulerName": "default-scheduler",
        "tolerations": [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
        ],
        "priority": 0,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    if init_images:
        spec["initContainers"] = [_container(f"init{i}", im) for i, im in enumerate(init_images)]
    if pull_secrets:
        spec["imagePullSecrets"] = [{"name": s} for s in pull_secrets]
    return {
        "metadata": {
            "name": name,
            "generateName": name.rsplit("-", 1)[0] + "-",
            "namespace": namespace,
            "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, namespace + "/" + name)),
            "resourceVersion": "987654",
            "creationTimestamp": "2026-11-22T02:00:00Z",
            "labels": {"app": "api", "pod-template-hash": "7d9c6b5f4"},
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "api-7d9c6b5f4",
                    "uid": "0b6f0e1c-8a59-4d53-a1f0-8c1d2b3a4e5f",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }


def _container(name: str, image: str) -> dict[str, Any]:
    return {
        "name": name,
        "image": image,
        "ports": [{"containerPort": 8080, "protocol": "TCP"}],
        "resources": {
            "limits": {"memory": "256Mi"},
            "requests": {"cpu": "100m", "memory": "128Mi"},
        },
        "volumeMounts": [
            {
                "name": "kube-api-access-abcde",
                "readOnly": True,
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            }
        ],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    }


def args_full(pod_obj: dict[str, Any], *nodes: dict[str, Any]) -> dict[str, Any]:
    """ExtenderArgs for nodeCacheCapable: false."""
    return {"Pod": pod_obj, "Nodes": node_list(*copy.deepcopy(nodes)), "NodeNames": None}


def args_names(pod_obj: dict[str, Any], *names: str) -> dict[str, Any]:
    """ExtenderArgs for nodeCacheCapable: true."""
    return {"Pod": pod_obj, "Nodes": None, "NodeNames": list(names)}
