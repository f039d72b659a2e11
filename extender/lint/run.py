"""`archfit lint PATH|-`: read rendered manifests, learn each distinct image's platforms once
(from a platforms file, or from its registry), judge every workload, write the findings.

Exit status: 0, or 1 when a finding not silenced is at `--fail-on` or above, or 2 when an
input or the platforms file cannot be read.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from extender.audit.pure.newer_tags import TagHint
from extender.audit.pure.report import same_image
from extender.config.rules import mutation_rules_of
from extender.config.settings import Settings
from extender.core.platforms import LINUX_ARM64, Resolved, any_accepts, parse
from extender.core.pods import PullSecretsRef
from extender.errors import InputError
from extender.lint import render
from extender.lint.pure import findings, manifests, platforms_file
from extender.lint.pure.findings import Judging, Level

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
"""What a directory given as PATH is read for."""
_NO_CREDENTIALS = PullSecretsRef("")
"""Lint has no pod: only the mounted docker config and credential plugins apply."""


@dataclass(frozen=True, slots=True)
class LintOptions:
    """What the command line asks for."""

    paths: Sequence[str]
    output: str = "table"
    fail_on: Level = Level.ERROR
    platforms_file: str | None = None
    """Offline: image platforms from `archfit inspect -o json` or `archfit audit -o json`."""
    cluster_platforms: frozenset[str] = frozenset()
    """The platforms the cluster's nodes may have (empty: webhook.architectures)."""
    newer_tags: int = 3
    """Online: newer tags looked up per image without arm64, for the "arm64 from tag" hint."""


def run_lint(settings: Settings, options: LintOptions, out: TextIO, err: TextIO) -> int:
    """The command: read, look up, judge, write; the exit status."""
    try:
        texts = [(path, _read(path)) for path in _expanded(options.paths)]
        known = None
        if options.platforms_file is not None:
            known = platforms_file.read_platforms(Path(options.platforms_file).read_bytes())
        judging = judging_of(settings, options)
    except (OSError, InputError, ValueError) as error:
        print(f"archfit lint: {error}", file=err)
        return 2
    read: list[tuple[str, list[manifests.WrittenWorkload], list[manifests.Skipped]]] = []
    for path, text in texts:
        try:
            workloads, skipped = manifests.read_stream(text)
        except InputError as error:
            print(f"archfit lint: {path}: {error}", file=err)
            return 2
        read.append((path, workloads, skipped))
    images = list(dict.fromkeys(i for _, ws, _ in read for w in ws for i in w.images()))
    if known is not None:
        resolved = {image: known.resolved(image) for image in images}
        tags = {image: hint for image in images if (hint := known.hint(image))}
    else:
        resolved, tags = asyncio.run(_resolve_images(settings, images, judging, options.newer_tags))
    sources = [
        render.Source(
            path,
            workloads,
            [f for w in workloads for f in findings.judge_workload(w, resolved, judging, tags)],
            skipped,
        )
        for path, workloads, skipped in read
    ]
    render.write_findings(sources, options.output, options.fail_on, out)
    if options.output != "table":
        print(render.summary(sources), file=err)
    worst = findings.worst(f for s in sources for f in s.findings)
    return 1 if worst is not None and worst >= options.fail_on else 0


def _expanded(paths: Sequence[str]) -> list[str]:
    """The paths, a directory replaced by its manifests (sorted, recursively)."""
    found: list[str] = []
    for path in paths:
        if path != "-" and Path(path).is_dir():
            found += sorted(str(p) for p in Path(path).rglob("*") if p.suffix in MANIFEST_SUFFIXES)
        else:
            found.append(path)
    return found


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    return Path(path).read_text(encoding="utf-8")


def judging_of(settings: Settings, options: LintOptions) -> Judging:
    """The cluster's platforms, taints and matching, as the webhook's rules have them."""
    rules = mutation_rules_of(settings)
    written = options.cluster_platforms or frozenset(settings.webhook.architectures)
    return Judging(
        platforms=frozenset(parse(text) for text in written),
        taints=rules.taints,
        rule=rules.rule,
        aarch32=rules.aarch32,
    )


async def _resolve_images(
    settings: Settings, images: Sequence[str], judging: Judging, newer_tags: int
) -> tuple[dict[str, Resolved], dict[str, str]]:
    """Each image's platforms from its registry, each image read once (concurrently, a
    bounded number per host), and for those without arm64 the newest tags' hint."""
    # Only lint online pays for the registry client (aiohttp): offline CI runs skip it.
    from extender.audit import hints
    from extender.audit.distinct_images import BoundedResolution
    from extender.registry.resolver import build_resolver

    resolver = await build_resolver(settings.registry, settings.cache)
    try:
        resolution = BoundedResolution(resolver, settings.registry.max_connections_per_host)
        pairs = [(image, _NO_CREDENTIALS) for image in images]
        lookups = await resolution.all(pairs)
        resolved = {image: lookups[(image, _NO_CREDENTIALS)] for image in images}
        blocking = [
            image
            for image, found in resolved.items()
            if isinstance(found, frozenset)
            and not any_accepts(LINUX_ARM64, found, rule=judging.rule, aarch32=judging.aarch32)
        ]
        found_hints: Mapping[str, TagHint] = {}
        if blocking and newer_tags > 0:
            found_hints = await hints.hints(
                resolver, resolution.one, blocking, pairs, limit=newer_tags
            )
        tags = {
            image: tag
            for image in blocking
            if (hint := found_hints.get(same_image(image))) and (tag := hint.arm64_tag)
        }
        return resolved, tags
    finally:
        await resolver.aclose()
