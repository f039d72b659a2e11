"""An autoscaled cluster: its own etcd and kube-apiserver with no nodes, a real Karpenter
(kwok provider) with the `graviton` and `general` NodePools, and a stand-in kubelet.

Scenarios start the kube-scheduler they need (and kube-controller-manager, when they want
real Deployments), create pods, and read which Nodes Karpenter launched; reset() takes the
cluster back to zero nodes and no workloads for the next variant.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kubernetes import client, config

from tests.e2e import cluster
from tests.e2e.controllers import WORKLOAD_CONTROLLERS, ControllerManager
from tests.e2e.controlplane import Binaries, ControlPlane
from tests.e2e.karpenter import (
    KARPENTER_GROUP,
    NODE_POOLS,
    Karpenter,
    KarpenterBuild,
    create_node_class,
    create_node_pools,
    install_crds,
)
from tests.e2e.kubelet import Launch, StandInKubelet
from tests.e2e.processes import MAX_WAIT_SECONDS
from tests.e2e.scheduler import Scheduler
from tests.e2e.webhook import WebhookArchfit
from tests.support.waiting import wait_for

#: From a pending pod to a bound one: the scheduler marks it unschedulable, Karpenter
#: waits out its 1 s idle batch window, launches, registers and initialises the node,
#: and the scheduler retries. A few seconds when idle; the shared 2-core machine gets
#: the same 60 s every other wait gets, the launch being one wait among many.
LAUNCH_WAIT_SECONDS = MAX_WAIT_SECONDS


class AutoscaledCluster:
    """The running autoscaled cluster; start() it, stop() it (safe after any failure).

    Every process logs under `workdir`: controlplane/, karpenter.log, scheduler-N/.
    """

    def __init__(self, binaries: Binaries, build: KarpenterBuild, workdir: Path) -> None:
        self._binaries = binaries
        self._build = build
        self.workdir = workdir
        self.control_plane = ControlPlane(binaries, workdir / "controlplane")
        self._api_client: client.ApiClient | None = None
        self._kubelet: StandInKubelet | None = None
        self._karpenter: Karpenter | None = None
        self._scheduler: Scheduler | None = None
        self._schedulers_started = 0
        self._controllers: ControllerManager | None = None

    def start(self) -> AutoscaledCluster:
        """Start the control plane, install Karpenter's CRDs, NodeClass and NodePools, then
        the stand-in kubelet and Karpenter."""
        try:
            self.control_plane.start()
            api_client = self._api_client = self._new_api_client()
            install_crds(api_client, self._build.crds)
            create_node_class(api_client)
            create_node_pools(api_client, NODE_POOLS)
            self._kubelet = StandInKubelet(self._new_api_client()).start()
            self._karpenter = Karpenter(
                self._build, self.control_plane.admin_kubeconfig, self.workdir
            ).start()
        except BaseException:
            self.stop()
            raise
        return self

    def _new_api_client(self) -> client.ApiClient:
        return config.new_client_from_config(config_file=str(self.control_plane.admin_kubeconfig))

    @property
    def api_client(self) -> client.ApiClient:
        """An admin ApiClient (for CustomObjectsApi, AdmissionregistrationV1Api, ...)."""
        assert self._api_client is not None, "AutoscaledCluster.start() first"
        return self._api_client

    @property
    def core(self) -> client.CoreV1Api:
        """A CoreV1Api with admin rights."""
        return client.CoreV1Api(self.api_client)

    def create_namespace(self, name: str) -> str:
        """Create a namespace with its default ServiceAccount and return its name."""
        cluster.create_namespace(self.core, name)
        return name

    @contextlib.contextmanager
    def serving_webhook(
        self, settings: dict[str, Any], namespace: str, image: str, workdir: Path, *, extender: bool
    ) -> Iterator[WebhookArchfit]:
        """archfit with its webhook registered and seen called for a pod of `image`, then
        kube-scheduler started calling archfit's extender (or none); stopped on exit."""
        hook = WebhookArchfit(self.control_plane.admin_kubeconfig, settings, workdir).start()
        try:
            hook.wait_called(namespace, image)
            self.start_scheduler(hook.url_prefix if extender else None)
            yield hook
        finally:
            hook.stop()

    def start_scheduler(self, url_prefix: str | None, node_cache_capable: bool = True) -> Scheduler:
        """Start kube-scheduler from the shipped config, calling archfit at url_prefix, or
        with no extender when it is None; a scheduler already running is stopped first."""
        self.stop_scheduler()
        self._schedulers_started += 1
        self._scheduler = Scheduler(
            self._binaries,
            self.workdir / f"scheduler-{self._schedulers_started}",
            self.control_plane.scheduler_kubeconfig,
            url_prefix,
            node_cache_capable=node_cache_capable,
        ).start()
        return self._scheduler

    def stop_scheduler(self) -> None:
        """Stop the scheduler if one runs."""
        if self._scheduler is not None:
            self._scheduler.stop()
            self._scheduler = None

    def start_controllers(
        self, controllers: tuple[str, ...] = WORKLOAD_CONTROLLERS
    ) -> ControllerManager:
        """Start kube-controller-manager with `controllers` (a running one is stopped first)."""
        self.stop_controllers()
        self._controllers = ControllerManager(
            self._binaries,
            self.workdir / "controller-manager",
            self.control_plane.admin_kubeconfig,
            controllers,
        ).start()
        return self._controllers

    def stop_controllers(self) -> None:
        """Stop kube-controller-manager if one runs."""
        if self._controllers is not None:
            self._controllers.stop()
            self._controllers = None

    def launches(self) -> list[Launch]:
        """Every Node Karpenter launched since start() or the last reset(), in order."""
        assert self._kubelet is not None, "AutoscaledCluster.start() first"
        return self._kubelet.launches()

    def wait_scheduled(self, namespace: str, pod: str) -> str:
        """Wait until the pod is bound, through a launch if need be, and return its node."""
        try:
            return cluster.wait_scheduled(self.core, namespace, pod, timeout=LAUNCH_WAIT_SECONDS)
        except TimeoutError as error:
            raise TimeoutError(f"{error}; {self.diagnosis()}") from None

    def diagnosis(self) -> str:
        """What a failing scenario should print: launches, NodeClaims and where the logs are."""
        conditions = {
            item["metadata"]["name"]: [
                f"{c['type']}={c['status']}" for c in item.get("status", {}).get("conditions", [])
            ]
            for item in self._node_claims()
        }
        running = (self._karpenter, self._scheduler, self._controllers)
        logs = [p.process.log_path for p in running if p is not None]
        kubelet_error = self._kubelet.last_error if self._kubelet else None
        return (
            f"launches: {[str(launch) for launch in self.launches()]}; nodeclaims: {conditions}; "
            f"stand-in kubelet's last error: {kubelet_error!r}; logs: {[str(p) for p in logs]}"
        )

    def _custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api_client)

    def _node_claims(self) -> list[dict[str, Any]]:
        listed = self._custom().list_cluster_custom_object(KARPENTER_GROUP, "v1", "nodeclaims")
        return list(listed["items"])

    def reset(self) -> None:
        """Stop the scheduler and the controllers and delete every webhook configuration,
        Deployment, ReplicaSet, pod, NodeClaim and Node, so the next variant starts from zero
        nodes, no workloads and no archfit; Karpenter's own termination removes the Nodes."""
        self.stop_scheduler()
        self.stop_controllers()
        admission = client.AdmissionregistrationV1Api(self.api_client)
        admission.delete_collection_mutating_webhook_configuration()
        admission.delete_collection_validating_webhook_configuration()
        core, apps = self.core, client.AppsV1Api(self.api_client)
        for namespace in core.list_namespace().items:
            name = namespace.metadata.name
            apps.delete_collection_namespaced_deployment(name)
            apps.delete_collection_namespaced_replica_set(name)
            core.delete_collection_namespaced_pod(name, grace_period_seconds=0)
        custom = self._custom()
        custom.delete_collection_cluster_custom_object(KARPENTER_GROUP, "v1", "nodeclaims")
        wait_for(
            lambda: not core.list_node().items and not self._node_claims(),
            "Karpenter to terminate every NodeClaim and Node",
        )
        wait_for(lambda: not core.list_pod_for_all_namespaces().items, "every pod to be deleted")
        assert self._kubelet is not None
        self._kubelet.forget()

    def stop(self) -> None:
        """Stop the scheduler, the controllers, Karpenter, the stand-in kubelet, then the
        control plane."""
        self.stop_scheduler()
        self.stop_controllers()
        if self._karpenter is not None:
            self._karpenter.stop()
        if self._kubelet is not None:
            self._kubelet.stop()
        self.control_plane.stop()
