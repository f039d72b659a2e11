"""The mismatch watcher's memory and CPU at 30,000 pods on 5,000 nodes (issue 18).

A stand-in apiserver, in a process of its own, serves realistic pods (a Deployment's pod as
kube-apiserver returns it: managedFields, probes, env, volumes, tolerations, conditions and
container statuses, about 5 KB of JSON each; 2% of them failing on their platform: a pull
failure, a StartError with exec format error, or a crash-loop) as a paged list (`limit` /
`continue`, 500 a page, as the watcher asks) and then a watch of status updates (one per
pod: kubelet's status writes are most of a real cluster's pod events). The measured process
runs the real path: archfit's API client, extender.kube.pod_watch's paged list and watch
decoding, and extender.controllers.watcher on the event loop, with 5,000 nodes in its node view; API
writes (Events) go to a recorder. Sampled: CPU seconds (process_time) and wall time of the
list and the watch, VmRSS before and after, VmHWM.

    .venv/bin/python -m bench.pod_watch [--pods 30000] [--nodes 5000] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import http.server
import json
import multiprocessing
import sys
import threading
import time
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

PAGE = 500
BROKEN_EVERY = 50
"""One pod in 50 fails on its platform (2%)."""
MB = 1024 * 1024


def pod(index: int, nodes: int, version: int) -> dict[str, Any]:
    """One realistic pod, as kube-apiserver returns it; every BROKEN_EVERY-th fails."""
    app = f"app-{index % 300}"
    name = f"{app}-7d9f8c6b5-{index:06d}"
    image = f"registry.example.com/team-{index % 40}/{app}:1.{index % 7}.0"
    image_id = f"{image.rsplit(':', 1)[0]}@sha256:{index % 300:064x}"
    now = "2026-11-24T10:00:00Z"
    status: dict[str, Any] = {"running": {"startedAt": now}}
    last: dict[str, Any] = {}
    ready, restarts = "True", 0
    if index % BROKEN_EVERY == 0:
        ready, kind = "False", (index // BROKEN_EVERY) % 3
        if kind == 0:
            message = (
                f'failed to pull and unpack image "{image}": '
                "no match for platform in manifest: not found"
            )
            status, image_id = {"waiting": {"reason": "ErrImagePull", "message": message}}, ""
        elif kind == 1:
            restarts = 3
            status = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}}
            last = {
                "terminated": {
                    "reason": "StartError",
                    "exitCode": 128,
                    "message": (
                        "failed to create containerd task: failed to create shim task: OCI runtime "
                        "create failed: runc create failed: unable to start container process: "
                        'exec: "/app": exec format error: unknown'
                    ),
                }
            }
        else:
            restarts = 3
            status = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}}
            last = {"terminated": {"reason": "Error", "exitCode": 1}}
    managed = {
        "manager": "kube-controller-manager",
        "operation": "Update",
        "apiVersion": "v1",
        "time": now,
        "fieldsType": "FieldsV1",
        "fieldsV1": {
            "f:metadata": {
                "f:generateName": {},
                "f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}},
                "f:ownerReferences": {".": {}, 'k:{"uid":"x"}': {}},
            },
            "f:spec": {
                "f:containers": {
                    'k:{"name":"app"}': {
                        ".": {},
                        "f:env": {},
                        "f:image": {},
                        "f:livenessProbe": {},
                        "f:name": {},
                        "f:ports": {},
                        "f:readinessProbe": {},
                        "f:resources": {},
                        "f:volumeMounts": {},
                    }
                }
            },
        },
    }
    return {
        "metadata": {
            "name": name,
            "generateName": f"{app}-7d9f8c6b5-",
            "namespace": f"ns-{index % 200}",
            "uid": f"{index:08d}-0000-4000-8000-{index:012d}",
            "resourceVersion": str(version),
            "creationTimestamp": now,
            "labels": {"app": app, "pod-template-hash": "7d9f8c6b5", "team": f"team-{index % 40}"},
            "annotations": {
                "kubectl.kubernetes.io/restartedAt": now,
                "prometheus.io/scrape": "true",
                "prometheus.io/port": "9090",
            },
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"{app}-7d9f8c6b5",
                    "uid": "x",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": [managed, {**managed, "manager": "kubelet", "subresource": "status"}],
        },
        "spec": {
            "nodeName": f"node-{index % nodes}",
            "serviceAccountName": "default",
            "containers": [
                {
                    "name": "app",
                    "image": image,
                    "imagePullPolicy": "IfNotPresent",
                    "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                    "env": [{"name": f"SETTING_{k}", "value": f"value-{k}"} for k in range(8)],
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "128Mi"},
                        "limits": {"memory": "256Mi"},
                    },
                    "livenessProbe": {
                        "httpGet": {"path": "/healthz", "port": 8080},
                        "periodSeconds": 10,
                    },
                    "readinessProbe": {
                        "httpGet": {"path": "/readyz", "port": 8080},
                        "periodSeconds": 5,
                    },
                    "volumeMounts": [
                        {"name": "config", "mountPath": "/etc/app"},
                        {
                            "name": "kube-api-access",
                            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                            "readOnly": True,
                        },
                    ],
                    "terminationMessagePath": "/dev/termination-log",
                }
            ],
            "volumes": [
                {"name": "config", "configMap": {"name": f"{app}-config"}},
                {
                    "name": "kube-api-access",
                    "projected": {
                        "sources": [
                            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                            {"configMap": {"name": "kube-root-ca.crt"}},
                        ]
                    },
                },
            ],
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
            ],
            "restartPolicy": "Always",
            "dnsPolicy": "ClusterFirst",
            "schedulerName": "default-scheduler",
            "priority": 0,
            "enableServiceLinks": True,
        },
        "status": {
            "phase": "Running",
            "hostIP": "10.0.0.1",
            "podIP": f"10.1.{index // 250 % 250}.{index % 250}",
            "startTime": now,
            "qosClass": "Burstable",
            "conditions": [
                {
                    "type": t,
                    "status": ready if t in ("Ready", "ContainersReady") else "True",
                    "lastTransitionTime": now,
                }
                for t in (
                    "PodReadyToStartContainers",
                    "Initialized",
                    "Ready",
                    "ContainersReady",
                    "PodScheduled",
                )
            ],
            "containerStatuses": [
                {
                    "name": "app",
                    "image": image,
                    "imageID": image_id,
                    "ready": ready == "True",
                    "started": ready == "True",
                    "restartCount": restarts,
                    "state": status,
                    "lastState": last,
                    "containerID": f"containerd://{index:064x}",
                }
            ],
        },
    }


def serve(port_out: Any, pods: int, nodes: int) -> None:
    """The stand-in apiserver: a paged list, then one watch of a status update per pod."""

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
            if query.get("watch") in ("true", "1", "True"):
                self._watch()
                return
            start = int(query.get("continue") or 0)
            limit = int(query.get("limit") or pods)
            end = min(start + limit, pods)
            meta: dict[str, Any] = {"resourceVersion": "1"}
            if end < pods:
                meta["continue"] = str(end)
            body = json.dumps(
                {
                    "kind": "PodList",
                    "apiVersion": "v1",
                    "metadata": meta,
                    "items": [pod(i, nodes, 1) for i in range(start, end)],
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _watch(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            batch: list[bytes] = []
            for i in range(pods):
                event = {"type": "MODIFIED", "object": pod(i, nodes, 2 + i)}
                batch.append(json.dumps(event).encode() + b"\n")
                if len(batch) == 100 or i == pods - 1:
                    data = b"".join(batch)
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    batch.clear()
            self.wfile.write(b"0\r\n\r\n")

        def log_message(self, *args: Any) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port_out.put(server.server_address[1])
    server.serve_forever()


def _proc(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024 / MB
    return 0.0


class _Recorder:
    """The watcher's API calls, recorded (no network: the bench measures the watch)."""

    def __init__(self) -> None:
        self.events = 0

    async def previous_log(self, pod: Any, container: str, limit_bytes: int) -> str:
        return "exec /app: exec format error\n"

    async def controller(self, namespace: str, kind: str, name: str) -> tuple[str, str, str]:
        return "apps/v1", "Deployment", name.rsplit("-", 1)[0]

    async def event(self, namespace: str, regarding: Any, reason: str, message: str) -> None:
        self.events += 1

    async def evict(self, pod: Any) -> str:
        return "evicted"


class _Nodes:
    def __init__(self, facts: Mapping[str, Any]) -> None:
        self._facts = facts

    @property
    def synced(self) -> bool:
        return True

    def snapshot(self) -> Mapping[str, Any]:
        return self._facts

    def known_platforms(self) -> frozenset[Any]:
        return frozenset()

    async def wait_synced(self, seconds: float) -> bool:
        return True


class _NoResolver:
    async def platforms(self, image: str, pull: Any) -> frozenset[Any]:
        raise RuntimeError("the bench resolves nothing")


async def measure(port: int, pods: int, nodes: int) -> dict[str, float]:
    from extender.config.settings import WatcherSettings
    from extender.controllers.watcher import Watcher
    from extender.core.platforms import Rule, normalize
    from extender.kube.client.api import connect
    from extender.kube.client.rest_config import RestConfig
    from extender.kube.pod_watch import BOUND, Handoff, pod_list_watch
    from extender.metrics import Metrics
    from extender.resolution.within_deadline import Resolution

    api = connect(RestConfig(host=f"http://127.0.0.1:{port}"))
    arm64, amd64 = normalize("linux", "arm64"), normalize("linux", "amd64")
    view = {f"node-{i}": ((arm64 if i % 2 else amd64), Rule.STRICT, False) for i in range(nodes)}
    recorder = _Recorder()
    watcher = Watcher(
        WatcherSettings(logs_per_second=1e6, events_per_second=1e6),
        Metrics(),
        recorder,
        Resolution(_NoResolver()),
        _Nodes(view),
        None,
    )
    watch = pod_list_watch(api, BOUND, PAGE)
    loop = asyncio.get_running_loop()
    told = 0
    all_told = asyncio.Event()

    def on_pod(kind: str, pod: Any) -> None:
        nonlocal told
        watcher.on_pod(kind, pod)
        told += 1
        if told >= expected:
            all_told.set()

    watch._handoff = Handoff(loop, on_pod)  # as start() sets it, without the thread
    rss_before = _proc("VmRSS")
    expected = pods + 1  # every pod, then SYNCED
    cpu, wall = time.process_time(), time.perf_counter()
    version = await asyncio.to_thread(watch.list_all)
    await all_told.wait()
    await watcher.drain()
    list_cpu, list_wall = time.process_time() - cpu, time.perf_counter() - wall
    rss_listed = _proc("VmRSS")
    told, expected = 0, pods
    all_told.clear()
    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.to_thread(watch.watch_from, version)
    await all_told.wait()
    await watcher.drain()
    watch_cpu, watch_wall = time.process_time() - cpu, time.perf_counter() - wall
    api.close()
    return {
        "pods": pods,
        "nodes": nodes,
        "findings": watcher.findings,
        "events_written": recorder.events,
        "list_cpu_s": round(list_cpu, 2),
        "list_wall_s": round(list_wall, 2),
        "watch_cpu_us_per_event": round(watch_cpu / pods * 1e6, 1),
        "watch_wall_s": round(watch_wall, 2),
        "rss_before_mb": round(rss_before, 1),
        "rss_after_list_mb": round(rss_listed, 1),
        "rss_after_watch_mb": round(_proc("VmRSS"), 1),
        "peak_mb": round(_proc("VmHWM"), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=30000)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--quick", action="store_true", help="3,000 pods on 500 nodes")
    parser.add_argument("--output", choices=("text", "json"), default="text")
    args = parser.parse_args(argv)
    pods, nodes = (3000, 500) if args.quick else (args.pods, args.nodes)
    from extender.logs import configure

    configure("error", "json", sys.stderr)  # one warning line per finding is not measured
    ports: Any = multiprocessing.Queue()
    server = multiprocessing.Process(target=serve, args=(ports, pods, nodes), daemon=True)
    server.start()
    try:
        result = asyncio.run(measure(ports.get(timeout=30), pods, nodes))
    finally:
        server.terminate()
        server.join(5)
    if args.output == "json":
        print(json.dumps(result))
        return 0
    print(
        f"{result['pods']} pods on {result['nodes']} nodes, 2% failing on their platform, "
        f"through the real client and decode path"
    )
    print(
        f"list (pages of {PAGE}): cpu {result['list_cpu_s']} s, wall {result['list_wall_s']} s;"
        f" findings {result['findings']}, events written {result['events_written']}"
    )
    print(
        f"watch, one status update per pod: {result['watch_cpu_us_per_event']} us cpu per "
        f"event, wall {result['watch_wall_s']} s"
    )
    print(
        f"RSS: {result['rss_before_mb']} MiB before, {result['rss_after_list_mb']} after the "
        f"list, {result['rss_after_watch_mb']} after the watch; peak {result['peak_mb']} MiB"
    )
    return 0


if __name__ == "__main__":
    threading.excepthook = lambda args: None  # the server's connection may outlive the run
    sys.exit(main())
