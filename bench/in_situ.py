"""archfit's CPU broken down by what it does, sampled in a running process (py-spy).

`Sampler(pid)` attaches py-spy (from PyPI, the bench extra) to a process that is already
running, in non-blocking mode, so the process is never paused, and `--gil`: a sample is the
stack of the thread holding the GIL, and none when no thread holds it. A thread blocked in a
socket read, or the loop waiting in epoll, holds no GIL, so no idle wait is counted as work
(py-spy's own idle test, which reads the thread's state, counted them: 3x the CPU).
`stop()` ends the recording and returns the collapsed stacks, one line per distinct stack
with its sample count; `breakdown()` sorts each stack into one of the CATEGORIES and scales
the shares to a measured CPU figure, so the parts add up to what the kernel counted.

What sampling cannot see: CPU spent without the GIL (OpenSSL and socket reads in the
client's threads, which release it; the kernel's side of those). Such CPU is counted by the
kernel but sampled in no stack; `covered` says how much of the
measured CPU the samples account for, so the rest is visible, not spread over the others.

    sampler = Sampler(pid).start()
    ...  # the load
    stacks = sampler.stop()
    parts = breakdown(stacks, cpu_seconds, per=binds)
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

RATE_HZ = 400
"""Samples per second: at ~1 ms of CPU per pod and ~100 pods/s, 500 pods give a few
thousand samples, enough for shares of a few percent."""
STOP_SECONDS = 30.0

# (category, markers): a stack goes to the first category with a marker among its frames'
# file paths. The order matters: a log line written while answering filter is logging,
# not the verb; the verbs' own work is what is left of a verb's stacks.
_PER_CALL = ("extender/scheduler/", "extender/admission/", "extender/lookups/")
CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "logging per call (structlog, explain)",
        ("structlog/", "extender/logs.py", "extender/explain.py"),
    ),
    ("metrics per call (prometheus_client)", ("prometheus_client/", "extender/metrics.py")),
    ("the calls' own work (verbs, lookups, decisions, wire)", _PER_CALL),
    ("Lease renewals (kube/lease)", ("extender/kube/lease.py", "extender/controllers/leading.py")),
    (
        "pod watches (decode, the policy's pod index, watcher, capacity)",
        (
            "extender/kube/pod_watch.py",
            "extender/kube/indexed_pods.py",
            "extender/kube/pending_pods.py",
            "extender/kube/gated_pods.py",
            "extender/core/image_uses.py",
            "extender/controllers/",
        ),
    ),
    ("node index (kube/nodes)", ("extender/kube/nodes.py",)),
    ("Kubernetes client threads (reads, TLS, other watches)", ("extender/kube/",)),
    ("HTTP: connections, parsing, writing (aiohttp)", ("aiohttp/", "multidict/", "yarl/")),
    ("event loop: scheduling, callbacks (asyncio)", ("asyncio/", "uvloop/", "selectors.py")),
)
OTHER = "other Python"
UNSEEN = "without the GIL (socket reads, TLS, the kernel): in no sample"


class Unavailable(RuntimeError):
    """py-spy is not installed, or may not read the process (ptrace refused)."""


def available() -> bool:
    """Whether py-spy is installed here."""
    try:
        py_spy()
    except Unavailable:
        return False
    return True


def py_spy() -> str:
    """The py-spy executable beside this interpreter, or on PATH."""
    beside = Path(sys.executable).with_name("py-spy")
    found = str(beside) if beside.exists() else shutil.which("py-spy")
    if found is None:
        raise Unavailable("py-spy is not installed (pip install -e '.[bench]')")
    return found


@dataclass
class Sampler:
    """py-spy recording one process's stacks until `stop()`."""

    pid: int
    output: Path
    rate: int = RATE_HZ
    _process: subprocess.Popen[bytes] | None = None

    def start(self) -> Sampler:
        self._process = subprocess.Popen(
            [
                py_spy(),
                "record",
                "--pid",
                str(self.pid),
                "--rate",
                str(self.rate),
                "--nonblocking",
                "--gil",
                "--format",
                "raw",
                "--output",
                str(self.output),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        return self

    def stop(self) -> Counter[str]:
        """End the recording; the collapsed stacks (root first, `;`-joined) and their counts."""
        process = self._process
        if process is None:
            raise RuntimeError("the sampler was not started")
        process.send_signal(signal.SIGINT)  # py-spy writes its output on ^C
        try:
            _, err = process.communicate(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            _, err = process.communicate()
        if not self.output.exists():
            raise Unavailable(f"py-spy wrote no profile: {err.decode(errors='replace')[-500:]}")
        return collapsed(self.output.read_text())


def collapsed(text: str) -> Counter[str]:
    """py-spy's raw (flamegraph) format read: `frame;frame;... count` lines."""
    stacks: Counter[str] = Counter()
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            stacks[stack] += int(count)
    return stacks


def category(stack: str) -> str:
    """The CATEGORIES entry a stack belongs to (OTHER when none matches)."""
    for name, markers in CATEGORIES:
        if any(marker in stack for marker in markers):
            return name
    return OTHER


@dataclass(frozen=True)
class Breakdown:
    """CPU per unit of work (ms), by category; and how much of the CPU the samples cover."""

    ms_per_unit: dict[str, float]
    samples: int
    covered: float
    """Sampled seconds over the CPU seconds measured (1.0: every CPU second was sampled)."""

    def as_row(self) -> dict[str, object]:
        return {"ms_per_unit": self.ms_per_unit, "samples": self.samples, "covered": self.covered}


def breakdown(
    stacks: Mapping[str, int], cpu_seconds: float, per: int, rate: int = RATE_HZ
) -> Breakdown:
    """`cpu_seconds` (measured by the kernel over the work) split by the samples' shares,
    per unit (`per`: the pods bound, the requests answered), in milliseconds.

    The part of the CPU no sample saw is its own line, so the shares of the sampled part
    are not inflated by it."""
    counts: Counter[str] = Counter()
    for stack, count in stacks.items():
        counts[category(stack)] += count
    total = sum(counts.values())
    sampled_seconds = total / rate
    unseen = max(0.0, cpu_seconds - sampled_seconds)
    seen = cpu_seconds - unseen
    ms = {
        name: round(1000 * seen * count / total / max(1, per), 4)
        for name, count in counts.most_common()
    }
    ms[UNSEEN] = round(1000 * unseen / max(1, per), 4)
    covered = round(sampled_seconds / cpu_seconds, 3) if cpu_seconds > 0 else 0.0
    return Breakdown(ms_per_unit=ms, samples=total, covered=covered)


def top_frames(stacks: Mapping[str, int], count: int = 15) -> list[tuple[str, int]]:
    """The innermost frames that were running most often (self time), most first."""
    innermost: Counter[str] = Counter()
    for stack, samples in stacks.items():
        innermost[stack.rsplit(";", 1)[-1]] += samples
    return innermost.most_common(count)
