"""archfit's MutatingAdmissionPolicy on a real control plane, installed as operators install it.

The CRD, the policy and the binding are the shipped ones
(deploy/kustomize/components/admission-policy); archfit's leader publishes the parameter.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from extender.core.parameter import table_key
from tests.e2e import cluster
from tests.e2e.catalog import Images
from tests.support.images import Pusher
from tests.support.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
COMPONENT = REPO / "deploy" / "kustomize" / "components" / "admission-policy"
GROUP, VERSION, PLURAL = "archfit.io", "v1alpha1", "imageplatforms"
PARAMETER = "archfit"
GATE = "archfit.io/platforms-unknown"
POLICY_REASON = "platforms unknown to the admission policy"
NOWHERE = "nowhere"
"""The node a pod is bound to when only the publisher's leader should look at it: no webhook,
policy, releaser or scheduler reads a bound pod, yet it exists and names its images."""


def shipped(name: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((COMPONENT / name).read_text())
    return document


class AdmissionPolicy:
    """The shipped CRD, policy and binding on one control plane."""

    def __init__(self, kubeconfig: Path) -> None:
        api = config.new_client_from_config(config_file=str(kubeconfig))
        self.extensions = client.ApiextensionsV1Api(api)
        self.admission = client.AdmissionregistrationV1Api(api)
        self.objects = client.CustomObjectsApi(api)

    def install(self, failure_policy: str | None = None) -> AdmissionPolicy:
        """The CRD (until Established), the policy (with `failure_policy` instead of the
        shipped Ignore, to see CEL errors), and the binding."""
        with contextlib.suppress(ApiException):  # 409: there already
            self.extensions.create_custom_resource_definition(shipped("crd.yaml"))

        def established() -> bool:
            crd = self.extensions.read_custom_resource_definition(f"{PLURAL}.{GROUP}")
            return any(
                c.type == "Established" and c.status == "True" for c in crd.status.conditions or ()
            )

        wait_for(established, "the ImagePlatforms CRD to be established")
        policy = shipped("policy.yaml")
        if failure_policy is not None:
            policy["spec"]["failurePolicy"] = failure_policy
        with contextlib.suppress(ApiException):
            self.admission.delete_mutating_admission_policy(policy["metadata"]["name"])
        self.admission.create_mutating_admission_policy(policy)
        self.bind()
        return self

    def bind(self) -> None:
        with contextlib.suppress(ApiException):  # 409: bound already
            self.admission.create_mutating_admission_policy_binding(shipped("binding.yaml"))

    def unbind(self) -> None:
        with contextlib.suppress(ApiException):  # 404: not bound
            self.admission.delete_mutating_admission_policy_binding("archfit")

    def parameter(self) -> dict[str, Any]:
        """The published spec ({} when there is none)."""
        try:
            found = self.objects.get_cluster_custom_object(GROUP, VERSION, PLURAL, PARAMETER)
        except ApiException as error:
            if error.status == 404:
                return {}
            raise
        spec: dict[str, Any] = found.get("spec") or {}
        return spec

    def wait_published(self, *images: str) -> dict[str, Any]:
        """Wait until the parameter lists every one of `images` (a digest-pinned one by its
        digest); its spec."""

        def listed() -> dict[str, Any] | None:
            spec = self.parameter()
            keys = spec.get("images") or {}
            return spec if all(table_key(i) in keys for i in images) else None

        found: dict[str, Any] = wait_for(listed, f"archfit to publish {images}")  # type: ignore[assignment]
        return found

    def patch_parameter(self, spec: dict[str, Any]) -> None:
        """Merge `spec` into the parameter's spec (a hand edit, a broken publisher)."""
        self.objects.patch_cluster_custom_object(GROUP, VERSION, PLURAL, PARAMETER, {"spec": spec})

    def delete_parameter(self) -> None:
        with contextlib.suppress(ApiException):
            self.objects.delete_cluster_custom_object(GROUP, VERSION, PLURAL, PARAMETER)


def bound_pod(name: str, images: list[str], **metadata: Any) -> dict[str, Any]:
    """A pod of `images` bound to NOWHERE (with `metadata` merged into its metadata)."""
    manifest = cluster.pod_manifest(name, images)
    manifest["spec"]["nodeName"] = NOWHERE
    manifest["metadata"].update(metadata)
    return manifest


def fresh_image(images: Images, platform: str = "linux/amd64", name: str = "policy") -> str:
    """A new image of `platform` that archfit has never seen, in the public registry."""
    tag = uuid.uuid4().hex[:10]
    repo = f"e2e/{name}-{tag}"
    Pusher(images.public.url).single(repo, tag, platform)
    return f"{images.public.host}/{repo}:{tag}"


def is_gated(pod: Any) -> bool:
    """Whether archfit's scheduling gate is on the pod (a V1Pod)."""
    return any(g.name == GATE for g in pod.spec.scheduling_gates or ())


def required_arch(pod: Any) -> list[list[str]]:
    """The `kubernetes.io/arch In` values of each required term (a V1Pod)."""
    affinity = pod.spec.affinity
    node = affinity.node_affinity if affinity else None
    required = node.required_during_scheduling_ignored_during_execution if node else None
    return [
        [v for e in term.match_expressions or () if e.key == "kubernetes.io/arch" for v in e.values]
        for term in (required.node_selector_terms if required else ())
    ]


class Accepted:
    """How many connections a hanging listener has accepted so far."""

    def __init__(self) -> None:
        self.count = 0


@contextlib.contextmanager
def hanging(port: int) -> Iterator[Accepted]:
    """A listener on 127.0.0.1:`port` that accepts TCP connections and never answers; it
    counts them, so a test can tell whether kube-apiserver called the webhook at all."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(256)
    listener.settimeout(0.2)  # so the accepting thread sees `done`
    accepted = Accepted()
    kept: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        while not done.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            kept.append(connection)  # held open, never answered
            accepted.count += 1

    thread = threading.Thread(target=accept, name=f"hanging-{port}", daemon=True)
    thread.start()
    try:
        yield accepted
    finally:
        done.set()
        thread.join()
        for connection in kept:
            connection.close()
        listener.close()


def refused(port: int) -> bool:
    """Whether a connection to 127.0.0.1:`port` is refused (nothing listens)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0
