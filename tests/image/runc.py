"""Run an image's filesystem the way a restricted pod runs it, with Debian's runc.

The OCI bundle mirrors the Deployment's securityContext: the image's USER, no
capabilities, no new privileges, a read-only root filesystem with a tmpfs /tmp, and
the config directory bind-mounted read-only. It shares the host's network, so the
test reaches the served port on loopback and archfit reaches local registries.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_NO_CAPABILITIES: dict[str, list[str]] = {
    key: [] for key in ("bounding", "effective", "inheritable", "permitted", "ambient")
}
# What runc's own `runc spec` hides from a container.
_MASKED = ["/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
           "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware"]  # fmt: skip
_READ_ONLY = ["/proc/asound", "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
              "/proc/sysrq-trigger"]  # fmt: skip


def _mount(destination: str, type_: str, source: str, *options: str) -> dict[str, Any]:
    return {"destination": destination, "type": type_, "source": source, "options": list(options)}


def bundle_config(rootfs: Path, image_config: dict[str, Any], config_dir: Path) -> dict[str, Any]:
    """An OCI runtime config (runtime-spec 1.0) that runs the image's ENTRYPOINT and CMD."""
    user, _, group = str(image_config["User"]).partition(":")
    return {
        "ociVersion": "1.0.2",
        "process": {
            "terminal": False,
            "user": {"uid": int(user), "gid": int(group or user)},
            "args": [*image_config.get("Entrypoint", []), *image_config.get("Cmd", [])],
            "env": image_config.get("Env", []),
            "cwd": image_config.get("WorkingDir") or "/",
            "capabilities": _NO_CAPABILITIES,
            "noNewPrivileges": True,
            "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 4096, "soft": 4096}],
        },
        "root": {"path": str(rootfs), "readonly": True},
        "hostname": "archfit",
        "mounts": [
            _mount("/proc", "proc", "proc"),
            _mount("/dev", "tmpfs", "tmpfs", "nosuid", "strictatime", "mode=755", "size=65536k"),
            _mount("/dev/pts", "devpts", "devpts", "nosuid", "noexec", "newinstance", "mode=0620"),
            _mount("/dev/shm", "tmpfs", "shm", "nosuid", "noexec", "nodev", "size=65536k"),
            _mount("/tmp", "tmpfs", "tmpfs", "nosuid", "nodev", "mode=1777", "size=16m"),
            _mount("/etc/archfit", "bind", str(config_dir), "rbind", "ro", "nosuid", "nodev"),
        ],
        "linux": {
            # No network namespace: the host's loopback is the pod network here.
            "namespaces": [{"type": t} for t in ("pid", "ipc", "uts", "mount")],
            "maskedPaths": _MASKED,
            "readonlyPaths": _READ_ONLY,
        },
    }


@dataclass
class Container:
    """One running container and where its output goes."""

    runc: list[str]
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    @classmethod
    def start(cls, bundle: Path, config: dict[str, Any], name: str) -> Container:
        """Write `config` into `bundle` and `runc run` it in the foreground."""
        binary = shutil.which("runc") or "runc"
        runc = [binary, "--root", str(bundle / "state")]
        (bundle / "config.json").write_text(json.dumps(config, indent=2))
        log = bundle / "output.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [*runc, "run", "--bundle", str(bundle), name],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        return cls(runc, name, process, log)

    def output(self) -> str:
        """What the container wrote so far (stdout and stderr)."""
        return self.log.read_text(errors="replace")

    def pid(self) -> int:
        """The container's first process, as the host sees it."""
        state = subprocess.run(
            [*self.runc, "state", self.name], capture_output=True, text=True, check=True
        )
        return int(json.loads(state.stdout)["pid"])

    def exec(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run a command inside the container with its process settings."""
        return subprocess.run(
            [*self.runc, "exec", self.name, *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            stdin=subprocess.DEVNULL,
        )

    def wait_http(self, url: str, timeout: float = 60.0) -> None:
        """Until `url` answers at all; fail early with the output if the process died."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                status = self.process.returncode
                raise RuntimeError(f"the container exited {status}:\n{self.output()}")
            try:
                urllib.request.urlopen(url, timeout=1).close()  # noqa: S310
                return
            except urllib.error.HTTPError:
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"{url} did not answer within {timeout}s:\n{self.output()}")

    def stop(self, grace: float = 15.0) -> int:
        """SIGTERM the container, wait for it to exit, remove it; its exit status."""
        if self.process.poll() is None:
            self._control("kill", self.name, "TERM")
            try:
                self.process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self._control("kill", self.name, "KILL")
                self.process.wait(timeout=grace)
        self._control("delete", "--force", self.name)
        return self.process.returncode

    def _control(self, *args: str) -> None:
        # Best effort: the container may already be gone.
        subprocess.run([*self.runc, *args], check=False, capture_output=True, timeout=30)


def process_status(pid: int) -> dict[str, str]:
    """/proc/<pid>/status as a dict: Uid, Gid, CapEff and the rest."""
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {key: value.strip() for key, _, value in (line.partition(":") for line in lines)}


def unique_name(prefix: str) -> str:
    """A container name no other test run on this machine uses."""
    return f"{prefix}-{os.getpid()}-{time.monotonic_ns() % 10**6}"
