"""What a pod is decided by: the configured rules and facts with its steering (its own, its
workload's or its namespace's annotations: docs/webhook.md) and the platforms the cluster's
nodes have. The extender's verbs, the webhook and the releaser apply these same functions,
so a pod is decided alike at admission, on release from the gate and in the scheduler."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Protocol

from extender.core.mutation import MutationRules
from extender.core.platforms import Platform
from extender.core.pods import PodFacts
from extender.core.steering import SteeringSource


class ClusterPlatforms(Protocol):
    """Knows the distinct platforms of the cluster's nodes (the node index does)."""

    def known_platforms(self) -> frozenset[Platform]: ...


def steered_facts(
    pod_facts: PodFacts, pod: Mapping[str, Any], steering: SteeringSource | None
) -> PodFacts:
    """The pod's facts for the extender's verbs, with the preference the webhook's steering
    gives it (its own, its workload's or its namespace's annotation: docs/webhook.md) when
    this app has the namespace watch."""
    if steering is None:
        return pod_facts
    order = steering.preference_order(pod)
    # Most pods carry no preference anywhere: keep the facts as they are, no copy per call.
    return pod_facts if order == pod_facts.prefer_arch else pod_facts._replace(prefer_arch=order)


def steered_rules(
    rules: MutationRules, pod: Mapping[str, Any], steering: SteeringSource | None
) -> MutationRules:
    """The rules a pod is decided by, at admission and on its release from the gate: `rules`
    with what its own, its workload's or its namespace's annotations say (docs/webhook.md)
    when this app has the namespace watch."""
    if steering is None:
        return rules
    return rules.steered(steering.steer(pod, rules.arch_preference))


def with_cluster_platforms(rules: MutationRules, nodes: ClusterPlatforms | None) -> MutationRules:
    """`rules` with the platforms the node index knows now added to the configured ones."""
    if nodes is None:
        return rules
    known = nodes.known_platforms()
    if known <= rules.platforms:
        return rules
    # replace(): every other rule (aarch32, steering, ...) is kept as configured.
    return replace(rules, platforms=rules.platforms | known)
