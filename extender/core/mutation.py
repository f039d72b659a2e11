"""What the admission webhook writes into a new pod: platform constraints every scheduler reads.

Pure: takes the pod, what its images run on and the cluster's platforms; returns a
JSONPatch (RFC 6902), warnings for kubectl and the facts to explain them. It only ever
narrows where a pod may go to platforms its images run on, and never loosens a
constraint the pod already has. See docs/webhook.md for the rules and why.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from extender.core.json_patch import set_in_metadata
from extender.core.platforms import (
    ARCH_LABEL,
    MAX_SCORE,
    OS_LABEL,
    Platform,
    Resolved,
    Rule,
    any_accepts,
)
from extender.core.pods import (
    PLATFORMS_ANNOTATION,
    REQUIRED_TERMS,
    Placement,
    PodView,
    ShapeError,
    annotation_preference,
    read_mapping,
)
from extender.core.steering import CHOICE_LABEL, SIDES, Steering
from extender.core.text import short_image

DEFAULT_SCHEDULER = "default-scheduler"

# The API documents about 120 characters as what a warning should stay under.
_MAX_WARNING = 120
_MAX_ANNOTATED_PLATFORMS = 16
# Distinct (image platform sets, cluster platforms, matching) combinations remembered: a
# cluster's pods name a few hundred images of far fewer platform sets.
_FITS_CACHED = 256


@dataclass(frozen=True, slots=True)
class TaintRule:
    """Nodes of `architecture` carry this taint; pods whose images all run there tolerate it."""

    architecture: str
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class MutationRules:
    """The knobs, taken from settings once at start."""

    platforms: frozenset[Platform]
    """Platforms a pod could land on: the current nodes' and those autoscalers may add."""
    arch_preference: Mapping[str, int]
    """Score 0..10 per architecture; a preferred term's weight is score x 10."""
    taints: Sequence[TaintRule] = ()
    rule: Rule = Rule.LOOSE
    """How image entries match a platform. The webhook cannot see which runtime a pod
    will meet, so under `policy.matching: auto` it takes the most permissive rule: a
    constraint must never exclude a node that could run the images."""
    aarch32: bool = False
    """Whether arm64 runs 32-bit Arm builds (platforms.accepts). A constraint names
    architectures, not nodes, so only `policy.arm32OnArm64: pull-rule` sets it."""
    scheduler_name: str = ""
    """Send pods that asked for the default scheduler to this one (off when empty)."""
    steering: Steering | None = None
    """What this pod's namespace and workload say (extender.core.steering): the preference that
    replaces arch_preference, and the side an arm64 share chose, required only when the
    pod's images run natively on both arm64 and amd64 and the pod admits it."""

    def steered(self, steering: Steering) -> MutationRules:
        """These rules with `steering`: made once per admission, where dataclasses.replace
        costs ten times a call of the constructor."""
        return MutationRules(
            platforms=self.platforms,
            arch_preference=self.arch_preference,
            taints=self.taints,
            rule=self.rule,
            aarch32=self.aarch32,
            scheduler_name=self.scheduler_name,
            steering=steering,
        )


@dataclass(slots=True)
class Mutation:
    """The patch for one pod and the facts to explain it."""

    patch: list[dict[str, Any]] = field(default_factory=list)
    """The constraints and routing; dry-run leaves them out."""
    annotation: list[dict[str, Any]] = field(default_factory=list)
    """The `archfit.io/platforms` explanation, written in dry-run too."""
    warnings: list[str] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)
    """What the patch does, one short label each (`required_affinity`, `toleration`, ...)."""
    runs_on: tuple[str, ...] = ()
    """The cluster platforms every image runs on, as the log lines name them."""
    unknown: tuple[str, ...] = ()
    """Images whose platforms are unknown: the webhook fails open for the whole pod."""
    outcome: str = "unchanged"
    """mutated | unchanged | conflict | unknown: the metric label."""
    arch_choice: str = ""
    """The side the pod now requires because of an arm64 share, or "" (untouched)."""
    steering: Steering | None = None
    """The rules' steering, for the pod_admitted line."""

    def operations(self, dry_run: bool) -> list[dict[str, Any]]:
        """The JSONPatch to answer with: dry-run explains but constrains nothing."""
        return self.annotation if dry_run else [*self.annotation, *self.patch]


def decide_mutation(
    pod: PodView,
    images: Sequence[str],
    resolved: Mapping[str, Resolved],
    rules: MutationRules,
    *,
    known_only: bool = False,
) -> Mutation:
    """The JSONPatch that pins `pod` to the platforms its images run on.

    Unknown images fail open: no toleration, no preference, only routing, and with
    `known_only` the required constraint of the images that did resolve. A pod needs every
    image, so what the known ones run on bounds where the pod can run: that constraint never
    excludes a node that could run the whole pod. A pod whose own constraints exclude every
    platform its images run on is left alone, with a warning, because adding a constraint
    could only make it unschedulable.
    """
    spec = pod.spec
    mutation = Mutation(steering=rules.steering)
    unknown = tuple(image for image in images if not isinstance(resolved.get(image), frozenset))
    if unknown:
        mutation.unknown, mutation.outcome = unknown, "unknown"
        if known_only:
            _require_known(pod, images, resolved, rules, mutation)
        _route(spec, rules, mutation)
        return mutation
    known = [(image, r) for image in images if isinstance(r := resolved[image], frozenset)]
    fits = fits_of(frozenset(r for _, r in known), rules.platforms, rules.rule, rules.aarch32)
    supported = fits.supported
    mutation.runs_on = fits.runs_on
    _annotate(pod, fits.annotation, mutation)
    allowed = allowed_by_pod(pod.placement, rules.platforms)
    if not supported:
        mutation.outcome = "conflict"
        mutation.warnings.append(_none_fits(known, rules.platforms, rules))
    elif not supported & allowed:
        mutation.outcome = "conflict"
        mutation.warnings.append(_pod_requires_other(known, allowed, rules))
    else:
        # Only native builds earn a preference: a 32-bit Arm one never makes arm64 preferred.
        native = fits.native
        choice = rules.steering.choice if rules.steering else ""
        if _takes_choice(pod, native & allowed, choice):
            supported = native = frozenset(p for p in native if p.architecture == choice)
            _label_choice(pod, choice, mutation)
        node_affinity = _node_affinity(pod)
        changed = _require(node_affinity, supported, allowed, mutation)
        changed |= _prefer(node_affinity, native & allowed, pod, rules, mutation)
        if changed:
            _set_node_affinity(spec, node_affinity, mutation)
        _tolerate(spec, supported & allowed, rules.taints, mutation)
    _route(spec, rules, mutation)
    if mutation.changes and mutation.outcome == "unchanged":
        mutation.outcome = "mutated"
    return mutation


def _require_known(
    pod: PodView,
    images: Sequence[str],
    resolved: Mapping[str, Resolved],
    rules: MutationRules,
    mutation: Mutation,
) -> None:
    known = [(i, r) for i in images if isinstance(r := resolved.get(i), frozenset)]
    if not known:
        return
    supported = frozenset(_runs_on(known, rules.platforms, rules))
    allowed = allowed_by_pod(pod.placement, rules.platforms)
    if not supported & allowed:
        return  # a conflict: no constraint could help, and the unknown image may explain it
    node_affinity = _node_affinity(pod)
    if _require(node_affinity, supported, allowed, mutation):
        _set_node_affinity(pod.spec, node_affinity, mutation)


# --- what the pod already says -------------------------------------------------------


def allowed_by_pod(placement: Placement, platforms: Iterable[Platform]) -> frozenset[Platform]:
    """The platforms the pod's nodeSelector and required node affinity already admit."""
    selector = placement.node_selector
    terms = _required_terms(placement.node_affinity)
    if not selector and terms is None:
        return frozenset(platforms)  # most pods: they admit every platform
    return frozenset(
        p
        for p in platforms
        if _selector_admits(selector, p)
        and (terms is None or any(_term_admits(t, p) for t in terms))
    )


def _selector_admits(selector: Mapping[str, Any], platform: Platform) -> bool:
    arch, os_ = selector.get(ARCH_LABEL), selector.get(OS_LABEL)
    return (arch is None or arch == platform.architecture) and (os_ is None or os_ == platform.os)


def _term_admits(term: Mapping[str, Any], platform: Platform) -> bool:
    """Whether a nodeSelectorTerm's arch/os expressions admit a node of this platform.

    An empty term admits no node at all, as kube-scheduler reads it.
    """
    if _is_empty_term(term):
        return False
    values = {ARCH_LABEL: platform.architecture, OS_LABEL: platform.os}
    for index, expression in enumerate(_list(term.get("matchExpressions"), "matchExpressions")):
        expression = read_mapping(expression, f"matchExpressions[{index}]", ShapeError)
        key = expression.get("key")
        if key in values and not _expression_admits(expression, values[key]):
            return False
    return True


def _expression_admits(expression: Mapping[str, Any], label: str) -> bool:
    operator = expression.get("operator")
    given = _list(expression.get("values"), "values")
    if operator == "In":
        return label in given
    if operator == "NotIn":
        return label not in given
    # DoesNotExist never admits a labelled node; Gt/Lt never match a non-integer value.
    return operator == "Exists"


# --- required node affinity -----------------------------------------------------------


def _require(
    node_affinity: dict[str, Any],
    supported: frozenset[Platform],
    allowed: frozenset[Platform],
    mutation: Mutation,
) -> bool:
    """AND `arch In [...]` (and `os In [...]` where the OS matters) into every term."""
    if allowed <= supported:
        return False  # the pod's own constraints already keep it where its images run
    expressions = []
    arches = sorted({p.architecture for p in supported})
    if any(p.architecture not in arches for p in allowed):
        expressions.append({"key": ARCH_LABEL, "operator": "In", "values": arches})
    oses = sorted({p.os for p in supported})
    if any(p.os not in oses for p in allowed):
        expressions.append({"key": OS_LABEL, "operator": "In", "values": oses})
    if not expressions:
        # Only variants or os/arch pairs tell them apart, which labels cannot say;
        # the extender still judges each node. Never add an empty term: it matches nothing.
        return False
    required = node_affinity.get(REQUIRED_TERMS)
    if required is None:
        node_affinity[REQUIRED_TERMS] = {"nodeSelectorTerms": [{"matchExpressions": expressions}]}
        mutation.changes.append("required_affinity")
        return True
    changed = False
    for term in required.get("nodeSelectorTerms") or ():
        if _is_empty_term(term):
            # It matches no node; an expression ANDed into it would make it match some.
            continue
        present = term.get("matchExpressions") or []
        term["matchExpressions"] = present
        for expression in expressions:
            # Idempotent: the webhook may be called again for the same pod.
            if expression not in present:
                present.append(copy.deepcopy(expression))
                changed = True
    if changed:
        mutation.changes.append("required_affinity")
    return changed


def _is_empty_term(term: Mapping[str, Any]) -> bool:
    """A term with no expressions and no fields, which kube-scheduler reads as matching no
    node (component-helpers nodeaffinity: `nodeSelectorTerm.isEmpty`)."""
    return not term.get("matchExpressions") and not term.get("matchFields")


# --- the arm64 share's choice ----------------------------------------------------------


def _takes_choice(pod: PodView, possible: frozenset[Platform], choice: str) -> bool:
    """Whether the share's side applies: the pod may run natively on both arm64 and amd64
    (or it carries this choice already, a reinvocation). A single-arch pod is never split."""
    if not choice:
        return False
    arches = {p.architecture for p in possible}
    if choice not in arches:
        return False
    return set(SIDES) <= arches or pod.labels.get(CHOICE_LABEL) == choice


def _label_choice(pod: PodView, choice: str, mutation: Mutation) -> None:
    mutation.arch_choice = choice
    if pod.labels.get(CHOICE_LABEL) == choice:
        return  # a reinvocation: written already
    mutation.patch.append(set_in_metadata(pod.metadata, "labels", CHOICE_LABEL, choice))
    mutation.changes.append("arch_choice")


# --- preferred node affinity ----------------------------------------------------------


def _prefer(
    node_affinity: dict[str, Any],
    possible: frozenset[Platform],
    pod: PodView,
    rules: MutationRules,
    mutation: Mutation,
) -> bool:
    """Weighted terms for the preferred architectures, for pods that run on two or more."""
    arches = {p.architecture for p in possible}
    if len(arches) < 2:
        return False
    order = pod.facts.prefer_arch
    preference: Mapping[str, int] = rules.arch_preference
    if order:
        preference = annotation_preference(order)
    elif rules.steering is not None:
        preference = rules.steering.preference
    wanted = [
        _preferred_term(arch, score)
        for arch, score in sorted(preference.items(), key=lambda item: (-item[1], item[0]))
        if arch in arches and score > 0
    ]
    existing = _list(
        node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"),
        "preferredDuringSchedulingIgnoredDuringExecution",
    )
    ours = [term for term in existing if term in wanted]
    if len(ours) != len(existing) and any(_mentions_arch(term) for term in existing):
        return False  # the pod states an architecture preference of its own: keep it
    missing = [term for term in wanted if term not in existing]
    if not missing:
        return False
    node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [*existing, *missing]
    mutation.changes.append("preferred_affinity")
    return True


_MAX_WEIGHT = 100
"""A preferred node affinity term's weight runs 1..100: a score of MAX_SCORE weighs most."""


def preferred_weight(score: int) -> int:
    """The weight (1..100) of the preferred term for an architecture scored `score` (0..10)."""
    return max(1, min(_MAX_WEIGHT, score * _MAX_WEIGHT // MAX_SCORE))


def _preferred_term(arch: str, score: int) -> dict[str, Any]:
    return {
        "weight": preferred_weight(score),
        "preference": {
            "matchExpressions": [{"key": ARCH_LABEL, "operator": "In", "values": [arch]}]
        },
    }


def _mentions_arch(term: Any) -> bool:
    preference = term.get("preference") if isinstance(term, Mapping) else None
    expressions = preference.get("matchExpressions") if isinstance(preference, Mapping) else None
    return any(isinstance(e, Mapping) and e.get("key") == ARCH_LABEL for e in expressions or ())


def _node_affinity(pod: PodView) -> dict[str, Any]:
    """A deep copy of spec.affinity.nodeAffinity (empty when absent), safe to edit."""
    node_affinity = pod.placement.node_affinity
    if not node_affinity:
        return {}  # most pods: nothing to copy
    try:
        copied = copy.deepcopy(dict(node_affinity))
    except RecursionError as error:
        raise ShapeError("spec.affinity.nodeAffinity nests deeper than any pod") from error
    required = copied.get(REQUIRED_TERMS) or {}
    terms = required.get("nodeSelectorTerms") or []
    for index, term in enumerate(terms):
        # The apiserver decodes a null item as an empty term (Go's zero value): so does this.
        terms[index] = dict(term or {})
    return copied


def _required_terms(node_affinity: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
    """The required terms, or None when the pod requires nothing (`node_affinity` as
    PodView reads it: its terms' shape checked).

    A required node selector with no terms admits no node (the apiserver refuses it as
    `nodeSelectorTerms: Required value`); it is an empty list, not None.
    """
    required = node_affinity.get(REQUIRED_TERMS)
    if required is None:
        return None
    # A null item is an empty term, as the apiserver decodes it (_node_affinity).
    return [term or {} for term in required.get("nodeSelectorTerms") or ()]


def _set_node_affinity(
    spec: Mapping[str, Any], node_affinity: dict[str, Any], mutation: Mutation
) -> None:
    # "add" replaces an existing member (RFC 6902 4.1), so one op covers both cases.
    if spec.get("affinity") is None:
        mutation.patch.append(
            {"op": "add", "path": "/spec/affinity", "value": {"nodeAffinity": node_affinity}}
        )
    else:
        mutation.patch.append(
            {"op": "add", "path": "/spec/affinity/nodeAffinity", "value": node_affinity}
        )


# --- tolerations, routing, annotation ---------------------------------------------------


def _tolerate(
    spec: Mapping[str, Any],
    possible: frozenset[Platform],
    taints: Sequence[TaintRule],
    mutation: Mutation,
) -> None:
    """Tolerate an architecture's taint only when every image runs on that architecture."""
    existing = _list(spec.get("tolerations"), "spec.tolerations")
    arches = {p.architecture for p in possible}
    added: list[dict[str, Any]] = []
    for taint in taints:
        if taint.architecture not in arches:
            continue
        if any(tolerates(t, taint) for t in [*existing, *added]):
            continue
        added.append(
            {"key": taint.key, "operator": "Equal", "value": taint.value, "effect": taint.effect}
        )
    if not added:
        return
    if spec.get("tolerations") is None:
        mutation.patch.append({"op": "add", "path": "/spec/tolerations", "value": added})
    else:
        mutation.patch.extend(
            {"op": "add", "path": "/spec/tolerations/-", "value": t} for t in added
        )
    mutation.changes.append("toleration")


def tolerates(toleration: Any, taint: TaintRule) -> bool:
    """v1.Toleration.ToleratesTaint (k8s.io/api/core/v1/toleration.go)."""
    if not isinstance(toleration, Mapping):
        return False
    effect = toleration.get("effect") or ""
    if effect and effect != taint.effect:
        return False
    key = toleration.get("key") or ""
    if key and key != taint.key:
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return (
        operator == "Equal" and key == taint.key and (toleration.get("value") or "") == taint.value
    )


def _route(spec: Mapping[str, Any], rules: MutationRules, mutation: Mutation) -> None:
    name = spec.get("schedulerName")
    if not rules.scheduler_name or name not in (None, "", DEFAULT_SCHEDULER):
        return
    mutation.patch.append(
        {"op": "add", "path": "/spec/schedulerName", "value": rules.scheduler_name}
    )
    mutation.changes.append("scheduler_name")
    if mutation.outcome == "unchanged":
        mutation.outcome = "mutated"


def _annotation_value(platforms: Sequence[Platform]) -> str:
    """The `archfit.io/platforms` text: the platforms, the first few named."""
    shown = [str(p) for p in platforms[:_MAX_ANNOTATED_PLATFORMS]]
    if len(platforms) > len(shown):
        shown.append(f"+{len(platforms) - len(shown)} more")
    return ",".join(shown) or "none"


def _annotate(pod: PodView, value: str, mutation: Mutation) -> None:
    if pod.annotations.get(PLATFORMS_ANNOTATION) == value:
        return
    mutation.annotation.append(
        set_in_metadata(pod.metadata, "annotations", PLATFORMS_ANNOTATION, value)
    )


class Fits(NamedTuple):
    """Where a pod's images run, among the cluster's platforms: what decide_mutation reads
    of them (fits_of)."""

    supported: frozenset[Platform]
    """The cluster platforms every image runs on, by the rules' matching."""
    runs_on: tuple[str, ...]
    """`supported`, sorted, as text (`linux/arm64`): made once per platform set, not per
    pod's log line."""
    annotated: tuple[Platform, ...]
    """Every platform of the images' or the cluster's that every image runs on, sorted: the
    `archfit.io/platforms` annotation."""
    native: frozenset[Platform]
    """Those of `supported` every image runs on natively (no 32-bit Arm build on arm64):
    only these earn a preference."""
    annotation: str
    """`annotated` as the annotation's text."""


@functools.lru_cache(maxsize=_FITS_CACHED)
def fits_of(
    image_platforms: frozenset[frozenset[Platform]],
    platforms: frozenset[Platform],
    rule: Rule,
    aarch32: bool,
) -> Fits:
    """Where images with these platform sets run (a pod needs every image, so their order
    and repeats do not matter), among `platforms`.

    Cached: every pod of a workload, and most pods of a cluster, name images of a few
    platform sets, and matching them is most of a webhook call's own work (bench/
    webhook_latency.py). The resolver hands out the same frozensets, whose hashes Python keeps.
    """
    known = [("", ps) for ps in image_platforms]
    rules = MutationRules(platforms=platforms, arch_preference={}, rule=rule, aarch32=aarch32)
    supported = frozenset(_runs_on(known, platforms, rules))
    # The images' platforms and the cluster's: the annotation names every one supported has.
    entries = {p for ps in image_platforms for p in ps} | platforms
    native = frozenset(_runs_on(known, supported, replace(rules, aarch32=False)))
    annotated = tuple(sorted(_runs_on(known, entries, rules)))
    runs_on = tuple(str(p) for p in sorted(supported))
    return Fits(supported, runs_on, annotated, native, _annotation_value(annotated))


def _runs_on(
    known: Sequence[tuple[str, frozenset[Platform]]],
    platforms: Iterable[Platform],
    rules: MutationRules,
) -> Iterable[Platform]:
    """Those of `platforms` that every image runs on."""
    return (p for p in platforms if all(image_runs_on(p, ps, rules) for _, ps in known))


def image_runs_on(
    platform: Platform, image_platforms: frozenset[Platform], rules: MutationRules
) -> bool:
    """Whether an image with these entries runs on `platform`, under the rules' matching."""
    return any_accepts(platform, image_platforms, rule=rules.rule, aarch32=rules.aarch32)


# --- warnings ---------------------------------------------------------------------------


def _none_fits(
    known: Sequence[tuple[str, frozenset[Platform]]],
    platforms: Iterable[Platform],
    rules: MutationRules,
) -> str:
    wanted = sorted(platforms)
    for image, image_platforms in known:
        if not any(image_runs_on(p, image_platforms, rules) for p in wanted):
            names = ", ".join(str(p) for p in wanted)
            return _warning(image, f"runs on none of this cluster's platforms ({names})")
    # Each image runs somewhere, just not all on the same platform.
    return _warning(known[0][0], "and the pod's other images share no platform")


def _pod_requires_other(
    known: Sequence[tuple[str, frozenset[Platform]]],
    allowed: frozenset[Platform],
    rules: MutationRules,
) -> str:
    if not allowed:
        return _OWN_CONSTRAINTS_ADMIT_NONE
    required = sorted(allowed)
    arches = ",".join(sorted({p.architecture for p in required}))
    for platform in required:
        for image, image_platforms in known:
            if not image_runs_on(platform, image_platforms, rules):
                return _warning(image, f"has no {platform}, but this pod requires {arches}")
    return _warning(known[0][0], f"does not fit this pod's required {arches}")


_OWN_CONSTRAINTS_ADMIT_NONE = (
    "archfit: this pod's own nodeSelector or required node affinity admits none of "
    "this cluster's platforms"
)


def _warning(image: str, text: str) -> str:
    room = _MAX_WARNING - len("archfit: image  ") - len(text)
    return f"archfit: image {short_image(image, max(room, 24))} {text}"


# --- shape checks -------------------------------------------------------------------------


def _list(value: object, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ShapeError(f"{where} must be a list")
    return value
