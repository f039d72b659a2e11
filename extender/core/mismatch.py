"""Which container failures mean "this image does not run on this node's platform", and the
learned evidence that follows from one. Pure: plain data in, plain data out.

The texts are the container runtimes' own (each constant cites its source); kubelet copies
them into the pod's container statuses (`state.waiting` and `lastState.terminated`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from extender.core.platforms import Platform

Reason = Literal["pull", "start", "run"]
"""pull: no manifest for the node's platform; start: the entrypoint is for another
architecture; run: a binary started later (or a script's interpreter) is, per its log."""

PULL_REASONS = frozenset({"ErrImagePull", "ImagePullBackOff"})
"""kubelet's waiting reasons while an image cannot be pulled (pkg/kubelet/images/types.go)."""
START_REASONS = frozenset({"StartError", "RunContainerError", "ContainerCannotRun"})
"""StartError: containerd's `errorStartReason` (containerd/containerd,
internal/cri/server/helpers.go), the terminated reason of a container whose task failed to
start; RunContainerError: kubelet's waiting reason when the runtime's StartContainer failed
(CRI-O's `failed to start container %s: %w`, cri-o/cri-o server/container_start.go);
ContainerCannotRun: dockershim and cri-dockerd's terminated reason."""
CRASH_LOOP = "CrashLoopBackOff"

PULL_TEXTS = (
    "no match for platform in manifest",
    "no matching manifest for ",
    "no image found in manifest list for architecture",
    "no image found in image index for architecture",
)
"""What a runtime says when the image has no entry for the node's platform:
- containerd: `no match for platform in manifest: %w` (containerd/containerd,
  core/images/handlers.go) and `no match for platform in manifest %v: %w`
  (core/images/image.go), wrapped by CRI as `failed to pull and unpack image %q: %w`
  (internal/cri/server/images/image_pull.go);
- Docker / cri-dockerd: `no matching manifest for %s in the manifest list entries`
  (moby/moby, daemon/internal/distribution/pull_v2.go and daemon/containerd/image_pull.go);
- CRI-O, through containers/image: `no image found in manifest list for architecture %q,
  variant %q, OS %q` and `no image found in image index for architecture ...`
  (containers/image, internal/manifest/docker_schema2_list.go and oci_index.go), wrapped as
  `choosing image instance: %w` (internal/image/docker_list.go)."""
EXEC_FORMAT = "exec format error"
"""ENOEXEC's text in Go (golang.org/x/sys/unix zerrors_linux.go, vendored by containerd and
CRI-O), which runc, crun and a shell print when the kernel refuses a binary's format."""

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class ContainerState:
    """What the classifier reads of one container status (pods' containerStatuses)."""

    name: str
    image: str
    image_id: str = ""
    waiting_reason: str = ""
    waiting_message: str = ""
    terminated_reason: str = ""
    """state.terminated, else lastState.terminated: the last end of the container."""
    terminated_message: str = ""
    restart_count: int = 0


@dataclass(frozen=True, slots=True)
class Finding:
    """A container that fails because of its platform."""

    container: str
    image: str
    digest: str
    """The image's digest from imageID ("" when never pulled, as after a pull failure)."""
    reason: Reason
    message: str
    """The runtime's text (or the log's line) that says so, cut short."""
    restart: int
    """The restart the finding was made at: a finding is new once per (container, restart)."""


def classify(state: ContainerState) -> Finding | None:
    """The platform failure this status shows, or None (no failure, or another kind; a
    crash-loop with no such message needs its log: `wants_log`)."""
    if state.waiting_reason in PULL_REASONS and _pull_text(state.waiting_message):
        return _finding(state, "pull", state.waiting_message)
    for reason, message in (
        (state.waiting_reason, state.waiting_message),
        (state.terminated_reason, state.terminated_message),
    ):
        if reason in START_REASONS and EXEC_FORMAT in message.lower():
            return _finding(state, "start", message)
    return None


def wants_log(state: ContainerState) -> bool:
    """Whether only the previous run's log can tell: a container that restarted, now waits
    in CrashLoopBackOff, and whose status names no platform failure."""
    return (
        state.waiting_reason == CRASH_LOOP and state.restart_count > 0 and classify(state) is None
    )


def from_log(state: ContainerState, tail: str) -> Finding | None:
    """A run finding when the end of the previous run's log says exec format error."""
    for line in reversed(tail.splitlines()):
        if EXEC_FORMAT in line.lower():
            return _finding(state, "run", line.strip())
    return None


def digest_in_image_id(image_id: str) -> str:
    """The sha256 digest in a container status's imageID (`docker.io/x@sha256:…`,
    `sha256:…`, `docker-pullable://x@sha256:…`), or ""."""
    found = _DIGEST.search(image_id)
    return found.group(0) if found else ""


def _pull_text(message: str) -> bool:
    lowered = message.lower()
    return any(text in lowered for text in PULL_TEXTS)


def _finding(state: ContainerState, reason: Reason, message: str) -> Finding:
    return Finding(
        state.name,
        state.image,
        digest_in_image_id(state.image_id),
        reason,
        message[:300],
        state.restart_count,
    )


def advice(finding: Finding, platform: Platform | None, learned: Evidence | None = None) -> str:
    """One Event message: image, digest, node platform, what to do, and what archfit now
    believes (and for whom) when the finding taught it something (`learned`)."""
    where = str(platform) if platform is not None else "this node's platform"
    what = {
        "pull": f"has no {where} entry, so it cannot be pulled here",
        "start": f"does not start on {where} (exec format error)",
        "run": f"fails on {where}: its log says exec format error",
    }[finding.reason]
    digest = f" ({finding.digest})" if finding.digest else ""
    todo = (
        f"build and push a {where} image, or keep this workload off {where} with nodeAffinity"
        " kubernetes.io/arch"
    )
    if learned is not None:
        todo += (
            f"; archfit now treats {learned.digest[:19]}… as not running on {learned.platform}"
            f" {learned.applies_to}"
        )
    return f"archfit: container {finding.container} image {finding.image}{digest} {what}; {todo}"


# --- learned evidence --------------------------------------------------------------------

EvidenceScope = Literal["workload", "cluster"]
"""workload: the failing pod's own controller in its namespace; cluster: every pod, which
takes corroboration no tenant can forge (docs/operations.md, "Learned evidence")."""

SERVICE_ACCOUNT_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
"""Where the ServiceAccount admission plugin mounts the API token: the one volume that
cannot hold the file a container executes."""


@dataclass(frozen=True, slots=True)
class Launch:
    """What a pod's spec says about how one container starts: everything in it that can make
    the runtime execute a file other than the image's own entrypoint."""

    overrides_command: bool = False
    """`command` or `args` set: the pod, not the image, names what runs."""
    working_dir: bool = False
    """`workingDir` set: a relative entrypoint is looked up elsewhere."""
    sets_path: bool = False
    """`PATH` in `env`, or any `envFrom` (which can carry PATH): the entrypoint is looked up
    elsewhere."""
    mounts: tuple[str, ...] = ()
    """Every volume mount's path: a file the runtime executes can come from a volume."""


def provenance(reason: Reason, launch: Launch | None) -> str:
    """Why a finding says nothing about the image itself, or "" when it does.

    It does when the runtime itself (not a log line) failed to start the image's own
    entrypoint from the image's own files: nothing in the pod chose what was executed. A
    tenant controls logs, `command`, `args`, `workingDir`, env and volumes (an init container
    can write a non-ELF file into an emptyDir and have the main container run it, a genuine
    StartError), so a finding that any of those could have caused teaches about the pod's
    own workload only.
    """
    if reason != "start":
        return "only the container's log says so"
    if launch is None:
        return "the container is not in the pod's spec"
    if launch.overrides_command:
        return "the pod sets the container's command or args"
    if launch.working_dir:
        return "the pod sets the container's workingDir"
    if launch.sets_path:
        return "the pod can set the container's PATH"
    mounted = [path for path in launch.mounts if path != SERVICE_ACCOUNT_MOUNT]
    if mounted:
        return f"the container mounts a volume at {mounted[0]}"
    return ""


@dataclass(frozen=True, slots=True)
class Evidence:
    """ "Digest D does not run on platform P", learned from a finding, until `expires`; for the
    failing pod's own workload, or for every pod once `corroboration` says why."""

    digest: str
    platform: Platform
    image: str
    reason: Reason
    learned: float
    """Wall-clock seconds when it was learned."""
    expires: float
    """Wall-clock seconds after which it no longer counts."""
    namespace: str = ""
    """Where the finding was made (every entry names it, a cluster-wide one too)."""
    workload: str = ""
    """The failing pod's controller, `Kind/name` (`Pod/name` for a bare pod)."""
    pod: str = ""
    said: str = ""
    """The runtime's (or the log's) text, cut short."""
    provenance: str = ""
    """Why the finding says nothing about the image itself ("" when it does: a runtime start
    error of the image's own entrypoint); such a finding never counts toward cluster-wide."""
    corroboration: str = ""
    """What no tenant can forge that made it cluster-wide; "" for a workload entry."""

    @property
    def scope(self) -> EvidenceScope:
        return "cluster" if self.corroboration else "workload"

    @property
    def key(self) -> str:
        """The field that names it in the shared store: a cluster-wide entry per (digest,
        platform), a workload entry per (digest, platform, namespace, workload)."""
        if self.corroboration:
            return f"{self.digest}|{self.platform}"
        return f"{self.digest}|{self.platform}|{self.namespace}|{self.workload}"

    @property
    def applies_to(self) -> str:
        """For whom, in words (Events, the CLI)."""
        if self.corroboration:
            return f"in every namespace ({self.corroboration})"
        return f"for {self.workload} in namespace {self.namespace} only"


def without_failing(
    platforms: frozenset[Platform], failing: frozenset[Platform]
) -> frozenset[Platform]:
    """`platforms` less every entry a failing platform covers: a node platform has no
    variant, so evidence on linux/arm64 removes linux/arm64/v8 too."""
    if not failing:
        return platforms
    return frozenset(p for p in platforms if not any(_covers(f, p) for f in failing))


def _covers(failing: Platform, entry: Platform) -> bool:
    if (failing.os, failing.architecture) != (entry.os, entry.architecture):
        return False
    return not failing.variant or failing.variant == entry.variant
