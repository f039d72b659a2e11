"""What `archfit audit` is asked for: the report's format, its scope, what moving is worth.

Pure and light: the command line reads its choices and defaults here, before the audit's
modules (rich, the registry client) are loaded.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from extender.audit.pure.newer_tags import LIMIT as NEWER_TAGS

FORMATS = ("table", "json", "csv", "markdown", "html")
"""The report formats of `archfit audit -o` (audit.output writes each)."""

ARM64_DISCOUNT = 0.20
"""The commonly quoted Graviton saving over comparable x86 instances."""


@dataclass(frozen=True, slots=True)
class Pricing:
    """What moving is worth: the on-demand price of a vCPU-hour and arm64's discount on it."""

    price_per_vcpu_hour: float | None = None
    """None: the saving is not estimated (the share of vCPU is still reported)."""
    arm64_discount: float = ARM64_DISCOUNT


@dataclass(frozen=True, slots=True)
class AuditOptions:
    """What the command line asks for."""

    namespace: str | None
    """None: every namespace but policy.excludedNamespaces."""
    selector: str = ""
    output: str = "table"
    fail_on_blockers: bool = False
    pricing: Pricing = field(default_factory=Pricing)
    newer_tags: int = NEWER_TAGS
    """Newer tags looked up per arm64 blocker with a version tag; 0: none (audit.hints)."""
    verify: bool = False
    """Check each index's entries against their image configs, believing the configs."""
