"""What `archfit lint` finds in a workload, per container, and how a finding is silenced.

Pure: workloads as written (extender.lint.pure.manifests), what each image runs on, the platforms a
cluster may have, and the architecture taints it uses; findings out. Four rules, each with a
level (docs/lint.md says what each means and how to fix or silence it):

- `platform-missing` (error): an image lacks a platform the template's own nodeSelector,
  required node affinity and tolerations let its pods run on. The trap: a pod that lands
  there cannot pull or start.
- `platforms-unknown` (error): an image whose platforms are needed and could not be learned
  (not in the platforms file, a registry that did not answer). Never a silent pass.
- `no-arm64` (warning): an image without linux/arm64, where the template keeps it off arm64
  anyway: migration readiness, with the audit's "arm64 from tag X" where one is known.
- `unneeded-arch-pin` (note): the template's nodeSelector or affinity excludes a platform
  every image runs on.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from extender.core.mutation import TaintRule, allowed_by_pod, tolerates
from extender.core.platforms import (
    LINUX_ARM64,
    Platform,
    Resolved,
    Rule,
    Unknown,
    any_accepts,
    normalize,
)
from extender.core.pods import ShapeError, read_placement
from extender.lint.pure.manifests import Container, WrittenWorkload

IGNORE_ANNOTATION = "archfit.io/lint-ignore"
"""On a workload or its pod template: the rules (comma-separated, `rule:container` for one
container, `all`) whose findings are silenced on purpose."""


class Level(enum.IntEnum):
    """A finding's weight, as SARIF names them; `--fail-on` compares them."""

    NOTE = 1
    WARNING = 2
    ERROR = 3

    def __str__(self) -> str:
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class LintRule:
    """A kind of finding: its id, its level and what it is about."""

    id: str
    level: Level
    summary: str
    """One sentence: SARIF's shortDescription, JUnit's failure type."""
    fix: str
    """How to fix it, or silence it on purpose."""


PLATFORM_MISSING = LintRule(
    "platform-missing",
    Level.ERROR,
    "An image lacks a platform its pod template lets the pods run on.",
    "Pin the template to the platforms every image runs on (nodeSelector kubernetes.io/arch, "
    "or required node affinity), or build the image for the missing platform.",
)
PLATFORMS_UNKNOWN = LintRule(
    "platforms-unknown",
    Level.ERROR,
    "An image's platforms could not be learned, so the workload could not be checked.",
    "Add the image to the platforms file (archfit inspect -o json IMAGE), or let archfit lint "
    "reach its registry.",
)
NO_ARM64 = LintRule(
    "no-arm64",
    Level.WARNING,
    "An image has no linux/arm64 entry: the workload cannot move to arm64.",
    "Build and push the image for linux/arm64, or move to a tag that has it.",
)
UNNEEDED_ARCH_PIN = LintRule(
    "unneeded-arch-pin",
    Level.NOTE,
    "The pod template excludes a platform every one of its images runs on.",
    "Drop the kubernetes.io/arch (or kubernetes.io/os) constraint, so the pods may use every "
    "platform their images run on.",
)
RULES = (PLATFORM_MISSING, PLATFORMS_UNKNOWN, NO_ARM64, UNNEEDED_ARCH_PIN)


@dataclass(frozen=True, slots=True)
class LintFinding:
    """One finding on a workload, or on one of its containers."""

    rule: LintRule
    workload: WrittenWorkload
    container: Container | None
    """None: the finding is about the whole template (unneeded-arch-pin)."""
    message: str
    silenced: bool = False
    """The workload's archfit.io/lint-ignore names this rule."""

    @property
    def line(self) -> int:
        return self.container.line if self.container is not None else self.workload.line

    @property
    def column(self) -> int:
        return self.container.column if self.container is not None else 1


@dataclass(frozen=True, slots=True)
class Judging:
    """What every workload is judged against."""

    platforms: frozenset[Platform]
    """The platforms the cluster's nodes may have (`--cluster-platforms`)."""
    taints: Sequence[TaintRule] = ()
    """Architecture taints the cluster's nodes carry (webhook.archTaints)."""
    rule: Rule = Rule.LOOSE
    aarch32: bool = False


def judge_workload(
    workload: WrittenWorkload,
    resolved: Mapping[str, Resolved],
    judging: Judging,
    hints: Mapping[str, str] | None = None,
) -> list[LintFinding]:
    """Every finding of one workload, silenced ones marked. `hints`: image → the newer tag
    that runs on arm64, where one is known."""
    found: list[LintFinding] = []
    allowed = _allowed(workload, judging)
    unknown = False
    for container in workload.containers:
        image = container.image
        if not image:
            continue
        platforms = resolved.get(image)
        if not isinstance(platforms, frozenset):
            why = platforms.reason if isinstance(platforms, Unknown) else "not looked up"
            found.append(_finding(PLATFORMS_UNKNOWN, workload, container, f"{image}: {why}"))
            unknown = True
            continue
        missing = sorted(p for p in allowed if not _runs(p, platforms, judging))
        if missing:
            found.append(
                _finding(
                    PLATFORM_MISSING,
                    workload,
                    container,
                    f"{image} has no {_names(missing)}, which the pod template allows; it "
                    f"runs on {_names(sorted(platforms)) or 'no platform'}",
                )
            )
        if LINUX_ARM64 not in missing and not _runs(LINUX_ARM64, platforms, judging):
            hint = (hints or {}).get(image)
            found.append(
                _finding(
                    NO_ARM64,
                    workload,
                    container,
                    f"{image} has no linux/arm64"
                    + (f"; arm64 from tag {hint}" if hint else ": rebuild it for arm64"),
                )
            )
    if not unknown and not any(f.rule is PLATFORM_MISSING for f in found):
        # A pin that is wrong (the error) is not one that is merely unneeded.
        found += _unneeded_pin(workload, resolved, allowed, judging)
    return found


def _allowed(workload: WrittenWorkload, judging: Judging) -> frozenset[Platform]:
    """The platforms the template lets its pods run on: its nodeSelector and required node
    affinity, less those whose architecture's taint it does not tolerate."""
    try:
        placement = read_placement(workload.spec)
        allowed = allowed_by_pod(placement, judging.platforms | _named(workload.spec))
    except ShapeError:
        return frozenset()
    tolerations = workload.spec.get("tolerations")
    listed = tolerations if isinstance(tolerations, list) else []
    shut = {t.architecture for t in judging.taints if not any(tolerates(x, t) for x in listed)}
    return frozenset(p for p in allowed if p.architecture not in shut)


def _named(spec: Mapping[str, object]) -> frozenset[Platform]:
    """Platforms a nodeSelector names beyond the cluster's (a pin to s390x is judged too)."""
    selector = spec.get("nodeSelector")
    if not isinstance(selector, Mapping):
        return frozenset()
    arch, os_ = selector.get("kubernetes.io/arch"), selector.get("kubernetes.io/os")
    if not isinstance(arch, str):
        return frozenset()
    return frozenset({normalize(os_ if isinstance(os_, str) else "linux", arch)})


def _unneeded_pin(
    workload: WrittenWorkload,
    resolved: Mapping[str, Resolved],
    allowed: frozenset[Platform],
    judging: Judging,
) -> list[LintFinding]:
    images = [p for i in workload.images() if isinstance(p := resolved.get(i), frozenset)]
    if not images or not allowed:
        return []
    try:
        pinned = allowed_by_pod(read_placement(workload.spec), judging.platforms)
    except ShapeError:
        return []
    excluded = sorted(
        p
        for p in judging.platforms - pinned
        if all(_runs(p, platforms, judging) for platforms in images)
    )
    if not excluded:
        return []
    message = (
        f"every image of this {workload.kind} runs on {_names(excluded)} too, but its "
        f"nodeSelector or node affinity keeps its pods off {'it' if len(excluded) == 1 else 'them'}"
    )
    return [_finding(UNNEEDED_ARCH_PIN, workload, None, message)]


def _runs(platform: Platform, platforms: frozenset[Platform], judging: Judging) -> bool:
    return any_accepts(platform, platforms, rule=judging.rule, aarch32=judging.aarch32)


def _finding(
    rule: LintRule, workload: WrittenWorkload, container: Container | None, message: str
) -> LintFinding:
    return LintFinding(rule, workload, container, message, _silenced(workload, rule, container))


def _silenced(workload: WrittenWorkload, rule: LintRule, container: Container | None) -> bool:
    said = workload.annotations.get(IGNORE_ANNOTATION, "")
    wanted = {item.strip() for item in said.split(",") if item.strip()}
    if "all" in wanted or rule.id in wanted:
        return True
    return container is not None and f"{rule.id}:{container.name}" in wanted


def _names(platforms: Iterable[Platform]) -> str:
    return ", ".join(str(p) for p in platforms)


def worst(findings: Iterable[LintFinding]) -> Level | None:
    """The highest level of the findings that are not silenced; None when there are none."""
    return max((f.rule.level for f in findings if not f.silenced), default=None)
