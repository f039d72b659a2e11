"""archfit's CPU broken down by what it does, sampled in a running process (py-spy, perf).

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

What a GIL sample is not: CPU. A thread the kernel has taken off the CPU while it holds the
GIL (in a write to a loopback socket, whose receiver the kernel wakes and runs at once, on a
machine with more runnable threads than cores) is sampled as holding it. So the Python view
says where the GIL is held, and the kernel's view says where the CPU goes: `PerfSampler`
records the process with perf's cpu-clock event (on CPU only, the kernel's side included)
and `by_library` splits that CPU by the shared object it ran in (the interpreter, uvloop,
OpenSSL, msgspec, the kernel, ...).
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
# extender/lookups/ is where an older checkout (--before, --source) keeps resolution/.
_PER_CALL = (
    "extender/scheduler/",
    "extender/admission/",
    "extender/resolution/",
    "extender/lookups/",
)
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
            "extender/kube/pod_feed.py",
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


class Unavailable(RuntimeError):
    """py-spy is not installed, or may not read the process (ptrace refused)."""


def available() -> bool:
    """Whether py-spy is installed here."""
    try:
        py_spy()
    except Unavailable:
        return False
    return True


def perf_available() -> bool:
    """Whether perf is installed here (it may still be refused: then it records nothing)."""
    return shutil.which("perf") is not None


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
    """Milliseconds of GIL held per unit of work (a bound pod, a request), by category."""

    ms_per_unit: dict[str, float]
    samples: int
    covered: float
    """GIL-held seconds over the CPU seconds the kernel counted: above 1, the GIL was held
    while the thread waited for a CPU (or in a call that does not release it)."""

    def as_row(self) -> dict[str, object]:
        return {"ms_per_unit": self.ms_per_unit, "samples": self.samples, "covered": self.covered}


def breakdown(
    stacks: Mapping[str, int], cpu_seconds: float, per: int, rate: int = RATE_HZ
) -> Breakdown:
    """The GIL samples by category, as milliseconds held per unit (`per`: the pods bound,
    the requests answered); and how they compare with the CPU the kernel counted."""
    counts: Counter[str] = Counter()
    for stack, count in stacks.items():
        counts[category(stack)] += count
    total = sum(counts.values())
    ms = {name: round(1000 * count / rate / max(1, per), 4) for name, count in counts.most_common()}
    covered = round(total / rate / cpu_seconds, 3) if cpu_seconds > 0 else 0.0
    return Breakdown(ms_per_unit=ms, samples=total, covered=covered)


def top_frames(stacks: Mapping[str, int], count: int = 15) -> list[tuple[str, int]]:
    """The innermost frames that were running most often (self time), most first."""
    innermost: Counter[str] = Counter()
    for stack, samples in stacks.items():
        innermost[stack.rsplit(";", 1)[-1]] += samples
    return innermost.most_common(count)


#: Shared objects by what they do, for perf's samples (first match on the object's name).
LIBRARIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("the kernel: sockets, loopback TCP, scheduling, page faults", ("[kernel",)),
    ("the interpreter: Python code", ("libpython", "python3")),
    ("uvloop: the event loop and its transports", ("uvloop", "loop.cpython")),
    ("TLS: OpenSSL", ("libssl", "libcrypto", "_ssl")),
    ("JSON: msgspec, orjson", ("msgspec", "_core.cpython", "orjson")),
    (
        "aiohttp's C parts: the HTTP parser, multidict, yarl",
        ("_http_parser", "multidict", "yarl", "propcache"),
    ),
    ("libc: malloc, memcpy", ("libc.so", "libm.so", "ld-linux")),
)


@dataclass
class PerfSampler:
    """perf recording one process's on-CPU samples (cpu-clock) until `stop()`."""

    pid: int
    output: Path
    rate: int = 999
    _process: subprocess.Popen[bytes] | None = None

    def start(self) -> PerfSampler:
        perf = shutil.which("perf")
        if perf is None:
            raise Unavailable("perf is not installed (linux-perf)")
        self._process = subprocess.Popen(
            [
                perf,
                "record",
                "-e",
                "cpu-clock",
                "-F",
                str(self.rate),
                "-p",
                str(self.pid),
                "-o",
                str(self.output),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        return self

    def stop(self) -> dict[str, float]:
        """End the recording; each shared object's share of the on-CPU samples (0..1)."""
        process = self._process
        if process is None:
            raise RuntimeError("the sampler was not started")
        process.send_signal(signal.SIGINT)
        try:
            process.communicate(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
        report = subprocess.run(
            [
                "perf",
                "report",
                "-i",
                str(self.output),
                "--stdio",
                "--no-children",
                "--sort",
                "dso",
                "-q",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        return dso_shares(report.stdout)


def dso_shares(text: str) -> dict[str, float]:
    """`perf report --sort dso -q` read: `  41.67%  [kernel.kallsyms]` lines."""
    shares: dict[str, float] = {}
    for line in text.splitlines():
        percent, _, name = line.strip().partition("%")
        try:
            shares[name.strip()] = shares.get(name.strip(), 0.0) + float(percent) / 100
        except ValueError:
            continue
    return shares


def by_library(shares: Mapping[str, float], cpu_seconds: float, per: int) -> dict[str, float]:
    """The measured CPU split by LIBRARIES, in ms per unit."""
    grouped: Counter[str] = Counter()
    for dso, share in shares.items():
        name = next(
            (label for label, markers in LIBRARIES if any(m in dso for m in markers)), "other"
        )
        grouped[name] += share
    total = sum(grouped.values()) or 1.0
    return {
        name: round(1000 * cpu_seconds * share / total / max(1, per), 4)
        for name, share in grouped.most_common()
    }
