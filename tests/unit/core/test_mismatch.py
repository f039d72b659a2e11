"""The classifier of platform failures (extender.core.mismatch), against the runtimes' own texts.

Each message below is what the runtime writes, built from its source:
- containerd: core/images/handlers.go `no match for platform in manifest: %w` (errdefs
  ErrNotFound: `not found`), wrapped by internal/cri/server/images/image_pull.go
  `failed to pull and unpack image %q: %w`; internal/cri/server/helpers.go
  `errorStartReason = "StartError"`; internal/cri/server/container_start.go
  `failed to create containerd task: %w` (containerd/containerd);
- CRI-O: containers/image internal/manifest/docker_schema2_list.go `no image found in
  manifest list for architecture %q, variant %q, OS %q` and oci_index.go `... in image index
  ...`, wrapped by internal/image/docker_list.go `choosing image instance: %w`; cri-o
  server/container_start.go `failed to start container %s: %w` (kubelet: RunContainerError);
- Docker: moby daemon/internal/distribution/pull_v2.go `no matching manifest for %s in the
  manifest list entries`.
"""

from __future__ import annotations

import pytest

from extender.core.mismatch import (
    ContainerState,
    classify,
    digest_in_image_id,
    from_log,
    wants_log,
    without_failing,
)
from extender.core.platforms import normalize

DIGEST = "sha256:" + "ab" * 32
CONTAINERD_PULL = (
    'rpc error: code = NotFound desc = failed to pull and unpack image "docker.io/acme/api:1.2": '
    "no match for platform in manifest: not found"
)
CRIO_PULL = (
    'choosing image instance: no image found in manifest list for architecture "arm64", '
    'variant "v8", OS "linux"'
)
CRIO_INDEX_PULL = (
    'choosing image instance: no image found in image index for architecture "arm64", '
    'variant "", OS "linux"'
)
DOCKER_PULL = "no matching manifest for linux/arm64/v8 in the manifest list entries"
CONTAINERD_START = (
    "failed to create containerd task: failed to create shim task: OCI runtime create failed: "
    'runc create failed: unable to start container process: exec: "/app": exec format error: '
    "unknown"
)
CRIO_START = "failed to start container 1f2e: exec format error"


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (
            ContainerState(
                "c", "i", waiting_reason="ErrImagePull", waiting_message=CONTAINERD_PULL
            ),
            "pull",
        ),
        (
            ContainerState("c", "i", waiting_reason="ImagePullBackOff", waiting_message=CRIO_PULL),
            "pull",
        ),
        (
            ContainerState(
                "c", "i", waiting_reason="ErrImagePull", waiting_message=CRIO_INDEX_PULL
            ),
            "pull",
        ),
        (
            ContainerState("c", "i", waiting_reason="ErrImagePull", waiting_message=DOCKER_PULL),
            "pull",
        ),
        (
            ContainerState(
                "c", "i", terminated_reason="StartError", terminated_message=CONTAINERD_START
            ),
            "start",
        ),
        (
            ContainerState(
                "c", "i", waiting_reason="RunContainerError", waiting_message=CRIO_START
            ),
            "start",
        ),
        (
            ContainerState(
                "c",
                "i",
                terminated_reason="ContainerCannotRun",
                terminated_message="exec format error",
            ),
            "start",
        ),
        (
            ContainerState(
                "c", "i", waiting_reason="ErrImagePull", waiting_message="manifest unknown"
            ),
            None,
        ),
        (
            ContainerState(
                "c", "i", terminated_reason="StartError", terminated_message="no such file"
            ),
            None,
        ),
        (
            ContainerState(
                "c", "i", terminated_reason="Error", terminated_message="exec format error"
            ),
            None,
        ),
        (ContainerState("c", "i"), None),
    ],
)
def test_a_status_is_classified_by_the_runtimes_own_text(
    state: ContainerState, expected: str | None
) -> None:
    """Pull and start failures are found by reason and text; other failures are not."""
    finding = classify(state)
    assert expected == (finding.reason if finding else None)


def test_a_crash_loop_without_a_platform_message_wants_its_previous_log() -> None:
    """Only a restarted container in CrashLoopBackOff with no such message needs its log."""
    looping = ContainerState("c", "i", waiting_reason="CrashLoopBackOff", restart_count=2)
    first = ContainerState("c", "i", waiting_reason="CrashLoopBackOff", restart_count=0)
    assert (True, False) == (wants_log(looping), wants_log(first))


def test_a_log_that_says_exec_format_error_is_a_run_finding() -> None:
    """The log's line is the finding's message; a log without it finds nothing."""
    state = ContainerState("c", "i", image_id=f"r/x@{DIGEST}", restart_count=3)
    finding = from_log(
        state, "starting\n/entrypoint.sh: line 3: /bin/app: cannot execute: exec format error\n"
    )
    assert (
        ("run", DIGEST, 3) == (finding.reason, finding.digest, finding.restart) if finding else None
    )
    assert None is from_log(state, "panic: nil map\n")


@pytest.mark.parametrize(
    ("image_id", "expected"),
    [
        (f"docker.io/library/x@{DIGEST}", DIGEST),
        (DIGEST, DIGEST),
        (f"docker-pullable://x@{DIGEST}", DIGEST),
        ("", ""),
    ],
)
def test_the_digest_is_read_from_any_imageid_spelling(image_id: str, expected: str) -> None:
    """containerd, CRI-O and dockershim spell imageID differently."""
    assert expected == digest_in_image_id(image_id)


def test_evidence_on_a_node_platform_removes_every_variant_of_it() -> None:
    """linux/arm64 evidence removes linux/arm64/v8 (the same after normalising) but not amd64."""
    platforms = frozenset({normalize("linux", "arm64", "v8"), normalize("linux", "amd64")})
    failing = frozenset({normalize("linux", "arm64")})
    assert frozenset({normalize("linux", "amd64")}) == without_failing(platforms, failing)
