"""A stand-in kubelet for the mismatch watcher's scenarios: it writes container statuses the
way kubelet does, and serves the containers' previous logs the way kubelet does.

Statuses go through the real apiserver's pods/status subresource as a strategic-merge patch
of `status` (kubelet's status manager patches it so). The texts are the container runtimes'
own, built from their sources:
- containerd pull: `failed to pull and unpack image %q: %w` (containerd/containerd,
  internal/cri/server/images/image_pull.go) around `no match for platform in manifest: %w`
  (core/images/handlers.go) and errdefs.ErrNotFound (`not found`), as the gRPC status kubelet
  quotes (`rpc error: code = NotFound desc = ...`);
- containerd start: reason `StartError` (internal/cri/server/helpers.go errorStartReason, exit
  code 128), message `failed to create containerd task: %w` (container_start.go) around runc's
  error and ENOEXEC's text `exec format error` (golang.org/x/sys/unix zerrors_linux.go);
- CRI-O pull: `choosing image instance: %w` (containers/image internal/image/docker_list.go)
  around `no image found in manifest list for architecture %q, variant %q, OS %q`
  (internal/manifest/docker_schema2_list.go).

`kubectl logs --previous` reaches a kubelet through the apiserver: it dials the Node's
address (`status.addresses`) on `status.daemonEndpoints.kubeletEndpoint.Port` and GETs
`/containerLogs/<namespace>/<pod>/<container>?previous=true&limitBytes=N`. This helper
serves that path over HTTPS on loopback and registers itself on the Nodes, so the log the
watcher reads really comes through the apiserver's pods/log.
"""

from __future__ import annotations

import http.server
import threading
import urllib.parse
from pathlib import Path
from typing import Any

from kubernetes import client

from tests.e2e import cluster
from tests.support.tls import make_serving_cert

CONTAINERD_PULL = (
    'rpc error: code = NotFound desc = failed to pull and unpack image "{image}": '
    "no match for platform in manifest: not found"
)
CRIO_PULL = (
    'choosing image instance: no image found in manifest list for architecture "{arch}", '
    'variant "", OS "linux"'
)
CONTAINERD_START = (
    "failed to create containerd task: failed to create shim task: OCI runtime create failed: "
    'runc create failed: unable to start container process: exec: "/app": exec format error: '
    "unknown"
)
SCRIPT_LOG = (
    "starting app\n/entrypoint.sh: line 4: /usr/local/bin/app: cannot execute binary file: "
    "Exec format error\n"
)


class RuntimeKubelet:
    """Writes pods' container statuses; serves previous logs over HTTPS for the Nodes."""

    def __init__(self, core: client.CoreV1Api, workdir: Path) -> None:
        self._core = core
        self.logs: dict[tuple[str, str, str], str] = {}
        """(namespace, pod, container) → the previous run's log."""
        self.log_requests: list[tuple[str, str, str, dict[str, str]]] = []
        """Every log request the apiserver made: (namespace, pod, container, query)."""
        kubelet = self
        cert = make_serving_cert(workdir)

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                parts = url.path.strip("/").split("/")
                query = dict(urllib.parse.parse_qsl(url.query))
                if len(parts) != 4 or parts[0] != "containerLogs":
                    self.send_error(404)
                    return
                key = (parts[1], parts[2], parts[3])
                kubelet.log_requests.append((*key, query))
                text = kubelet.logs.get(key) if query.get("previous") == "true" else ""
                if text is None:
                    self.send_error(404, "previous terminated container not found")
                    return
                body = text.encode()
                limit = int(query.get("limitBytes") or len(body))
                body = body[:limit]
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = cert.server_context()
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self, nodes: list[str]) -> RuntimeKubelet:
        """Serve, and register this endpoint on each Node, as a kubelet reports itself."""
        self._thread.start()
        for name in nodes:
            self._core.patch_node_status(
                name,
                {
                    "status": {
                        "addresses": [
                            {"type": "InternalIP", "address": "127.0.0.1"},
                            {"type": "Hostname", "address": "127.0.0.1"},
                        ],
                        "daemonEndpoints": {"kubeletEndpoint": {"Port": self.port}},
                    }
                },
            )
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def write(
        self,
        namespace: str,
        pod: str,
        statuses: list[dict[str, Any]],
        *,
        ready: bool = False,
        phase: str = "Running",
    ) -> None:
        """PATCH pods/status with the conditions and container statuses kubelet reports."""
        now = cluster.timestamp()
        flag = "True" if ready else "False"
        conditions = [
            {"type": "Initialized", "status": "True", "lastTransitionTime": now},
            {"type": "Ready", "status": flag, "lastTransitionTime": now},
            {"type": "ContainersReady", "status": flag, "lastTransitionTime": now},
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
        ]
        body = {
            "status": {
                "phase": phase,
                "conditions": conditions,
                "hostIP": "127.0.0.1",
                "podIP": "10.0.0.9",
                "startTime": now,
                "containerStatuses": statuses,
            }
        }
        self._core.patch_namespaced_pod_status(pod, namespace, body)


def pull_failing(name: str, image: str, message: str) -> dict[str, Any]:
    """A container whose image cannot be pulled (kubelet: ErrImagePull, no imageID yet)."""
    return {
        "name": name,
        "image": image,
        "imageID": "",
        "ready": False,
        "started": False,
        "restartCount": 0,
        "state": {"waiting": {"reason": "ErrImagePull", "message": message}},
        "lastState": {},
    }


def start_failing(name: str, image: str, image_id: str, restarts: int = 1) -> dict[str, Any]:
    """A container whose task failed to start with exec format error (containerd)."""
    ended = {"exitCode": 128, "reason": "StartError", "message": CONTAINERD_START}
    return _looping(name, image, image_id, restarts, ended)


def crash_looping(name: str, image: str, image_id: str, restarts: int) -> dict[str, Any]:
    """A container that started and exited 126 (its log says why), then waits to restart."""
    return _looping(name, image, image_id, restarts, {"exitCode": 126, "reason": "Error"})


def _looping(
    name: str, image: str, image_id: str, restarts: int, ended: dict[str, Any]
) -> dict[str, Any]:
    """kubelet's status of a container in CrashLoopBackOff after its run `ended`."""
    return {
        "name": name,
        "image": image,
        "imageID": image_id,
        "ready": False,
        "started": False,
        "restartCount": restarts,
        "state": {
            "waiting": {
                "reason": "CrashLoopBackOff",
                "message": f"back-off 10s restarting failed container={name}",
            }
        },
        "lastState": {
            "terminated": {
                **ended,
                "startedAt": cluster.timestamp(),
                "finishedAt": cluster.timestamp(),
                "containerID": f"containerd://{name}{restarts:060d}",
            }
        },
    }


def running(name: str, image: str, image_id: str) -> dict[str, Any]:
    """A container that runs and is ready."""
    return {
        "name": name,
        "image": image,
        "imageID": image_id,
        "ready": True,
        "started": True,
        "restartCount": 0,
        "state": {"running": {"startedAt": cluster.timestamp()}},
        "lastState": {},
    }
