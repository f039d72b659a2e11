"""The settings turned into decision rules, in one place, once per app.

The extender's verbs decide by a `placement.Policy`, the webhook by `mutation.MutationRules`;
both read the same `policy` settings, so they are built here side by side.
"""

from __future__ import annotations

from extender.config.settings import Settings
from extender.core.mutation import MutationRules, TaintRule
from extender.core.placement import Policy
from extender.core.platforms import Rule
from extender.core.platforms import parse as parse_platform


def policy_of(settings: Settings) -> Policy:
    """The extender's decision knobs (verbs.Verbs.policy)."""
    policy = settings.policy
    return Policy(
        failure_policy=policy.failure_policy,
        matching=policy.matching,
        arch_preference=policy.arch_preference,
        arm32_on_arm64=policy.arm32_on_arm64,
    )


def mutation_rules_of(settings: Settings) -> MutationRules:
    """The webhook's rules, before the node index adds the platforms it knows."""
    hook, policy = settings.webhook, settings.policy
    return MutationRules(
        platforms=frozenset(parse_platform(text) for text in hook.architectures),
        arch_preference=policy.arch_preference,
        taints=tuple(TaintRule(t.architecture, t.key, t.value, t.effect) for t in hook.arch_taints),
        rule=Rule.STRICT if policy.matching == "strict" else Rule.LOOSE,
        aarch32=policy.arm32_on_arm64 == "pull-rule",
        scheduler_name=hook.scheduler_name,
    )
