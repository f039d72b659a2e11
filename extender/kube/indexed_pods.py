"""Every pod of the cluster, list-watched for the admission policy's publisher: what it names,
where, with whose credentials, for which workload (extender.core.image_uses).

The pod watch's shape (extender.kube.pod_watch) with a lighter Struct and no field selector:
a pending pod names its images as much as a running one. msgspec decodes only the fields
below; a pod's other bytes never become Python objects.
"""

from __future__ import annotations

import msgspec

from extender.core.image_uses import PodUse
from extender.core.pods import PullSecretsRef, workload_of
from extender.kube.client.api import KubeApi
from extender.kube.client.watching import ListPage
from extender.kube.pod_watch import NameRef, PodListWatch, PodMeta

_FINISHED = ("Succeeded", "Failed")


class _Image(msgspec.Struct, frozen=True):
    image: str = ""


class _Spec(msgspec.Struct, rename="camel", frozen=True):
    service_account_name: str = "default"
    image_pull_secrets: list[NameRef] | None = None
    containers: list[_Image] | None = None
    init_containers: list[_Image] | None = None


class _Status(msgspec.Struct, frozen=True):
    phase: str = ""


class IndexedPod(msgspec.Struct, frozen=True):
    """What the publisher reads of a v1.Pod."""

    metadata: PodMeta = PodMeta()
    spec: _Spec = _Spec()
    status: _Status = _Status()

    @property
    def uid(self) -> str:
        return self.metadata.uid

    def use(self) -> PodUse | None:
        """What the pod names, or None when it names nothing the policy would read again:
        it has finished, or a DaemonSet controls it (the policy leaves such pods alone)."""
        if self.status.phase in _FINISHED:
            return None
        meta, spec = self.metadata, self.spec
        controller = None
        for owner in meta.owner_references or ():
            if owner.controller:
                controller = (owner.kind, owner.name)
                break
        if controller is not None and controller[0] == "DaemonSet":
            return None
        found = [c.image for c in (*(spec.init_containers or ()), *(spec.containers or ()))]
        images = tuple(dict.fromkeys(i for i in found if i))
        if not images:
            return None
        names = tuple(s.name for s in spec.image_pull_secrets or () if s.name)
        pull = PullSecretsRef(meta.namespace, names, spec.service_account_name)
        workload = workload_of(meta.namespace, meta.name, controller).name
        return PodUse(meta.namespace, images, pull, workload)


decode_indexed_page = msgspec.json.Decoder(ListPage[IndexedPod]).decode
decode_indexed = msgspec.json.Decoder(IndexedPod).decode


def every_pod(api: KubeApi, page_size: int = 500) -> PodListWatch[IndexedPod]:
    """The list-watch of every pod (no field selector), in pages of `page_size`."""
    return PodListWatch(
        api,
        "",
        (decode_indexed_page, decode_indexed, IndexedPod()),
        page_size,
        "archfit-policy-pods",
        ("policy_pods_expired", "policy_pods_error"),
    )
