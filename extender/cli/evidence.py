"""`archfit evidence list|confirm|clear`: the learned evidence ("digest D does not run on
platform P") as an operator reads and corrects it (docs/operations.md, "Learned evidence").

It is on Redis when `cache.url` is set, else on the ConfigMap `watcher.evidenceConfigMap` in
archfit's namespace: the pod's own in a pod, else the namespace the shipped manifests install
archfit in, never the kubeconfig context's (an application's namespace, where nothing is).
Every answer says which store it read.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from typing import TYPE_CHECKING, Any, TextIO

import orjson

from extender.cli.flags import add_cluster_flags
from extender.config import settings as config
from extender.core.mismatch import Evidence
from extender.core.platforms import parse as parse_platform
from extender.core.text import utc_text

if TYPE_CHECKING:
    from extender.kube.evidence_store import ConfigMapEvidence

INSTALLED_NAMESPACE = "archfit-system"
"""The namespace deploy/ installs archfit in (kustomize and Helm)."""


def add_evidence(commands: Any, common: argparse.ArgumentParser) -> None:
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument(
        "-n",
        "--namespace",
        default="",
        help="archfit's namespace, where the ConfigMap is without Redis (default: the pod's "
        f"own in a pod, else {INSTALLED_NAMESPACE}, as deploy/ installs it)",
    )
    evidence = commands.add_parser(
        "evidence",
        help="list, confirm or clear learned evidence (digest D does not run on platform P)",
        description="The evidence the mismatch watcher learned, shared through Redis "
        "(cache.url) or else the ConfigMap watcher.evidenceConfigMap in archfit's namespace, "
        "with where each entry came from and whom it applies to: one workload, or every "
        'namespace once corroborated. See docs/operations.md, "Learned evidence".',
    )
    actions = evidence.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser(
        "list",
        parents=[common, where],
        help="print every entry",
        description="Print every learned evidence entry: digest, platform, scope (workload or "
        "cluster), the pod it came from, the reason, what corroborates it, and when it expires.",
    )
    listing.add_argument(
        "-o", "--output", choices=("table", "json"), default="table", help="table or json"
    )
    confirm = actions.add_parser(
        "confirm",
        parents=[common, where],
        help="make a digest's workload entries count in every namespace",
        description="Confirm, as an operator, that a digest does not run on a platform: its "
        "entries learned for one workload then count in every namespace.",
    )
    confirm.add_argument("--digest", required=True, help="the image digest (sha256:...)")
    confirm.add_argument(
        "--platform", default="", help="only this platform's entries (os/arch[/variant])"
    )
    clear = actions.add_parser(
        "clear",
        parents=[common, where],
        help="forget entries: every one, or one digest's",
        description="Forget learned evidence: every entry, or with --digest that digest's. "
        "Every replica forgets it at its next sync.",
    )
    clear.add_argument("--digest", default="", help="only this digest's entries")
    for action in (listing, confirm, clear):
        add_cluster_flags(action)
        action.set_defaults(run=run_evidence, command_parser=action)
    evidence.set_defaults(command_parser=evidence)
    listing.set_defaults(platform="")
    confirm.set_defaults(output="table")
    clear.set_defaults(output="table", platform="")


def run_evidence(settings: config.Settings, args: argparse.Namespace) -> int:
    """On Redis when configured, else on the ConfigMap, through the operator's kubeconfig."""
    from extender.kube.connect import KubeConfigError, build_api_client
    from extender.kube.evidence_store import ConfigMapEvidence

    api = None
    store: ConfigMapEvidence | None = None
    if settings.cache.is_redis:
        where = "Redis (cache.url)"
    else:
        try:
            api = build_api_client(settings.kubernetes)
        except KubeConfigError as error:
            print(f"archfit evidence: {error}", file=sys.stderr)
            return 2
        namespace = args.namespace or archfit_namespace(settings)
        name = settings.watcher.evidence_config_map
        where = f"ConfigMap {namespace}/{name}"
        if api is not None:
            store = ConfigMapEvidence(api, namespace, name)
    with api if api is not None else contextlib.nullcontext():
        return asyncio.run(_act(settings, args, store, where, sys.stdout))


def archfit_namespace(settings: config.Settings) -> str:
    """archfit's own namespace as a command sees it: the pod's in a pod, else deploy/'s."""
    from extender.kube.connect import current_namespace, resolved_mode

    if resolved_mode(settings.kubernetes) == "in-cluster":
        return current_namespace(settings.kubernetes)
    return INSTALLED_NAMESPACE


async def _act(
    settings: config.Settings,
    args: argparse.Namespace,
    store: ConfigMapEvidence | None,
    where: str,
    out: TextIO,
) -> int:
    """0, 1 when the store fails (or confirms nothing), 2 when there is none or the
    arguments are wrong."""
    # Here, not above: the lookups load structlog, which `archfit serve` imports its own way.
    from extender.resolution.evidence_book import EvidenceBook

    try:
        only = parse_platform(args.platform) if args.platform else None
    except ValueError as error:
        print(f"archfit evidence: --platform: {error}", file=sys.stderr)
        return 2
    book = EvidenceBook(settings.cache, store=store)
    try:
        if not book.shared:
            print(
                "archfit evidence: no shared evidence to read: set cache.url (Redis), or give "
                "this command the cluster (--kubeconfig PATH, or kubernetes.mode) to read the "
                f"{where}",
                file=sys.stderr,
            )
            return 2
        if not await book.sync():
            print(f"archfit evidence: {where} did not answer (see the log line)", file=sys.stderr)
            return 1
        if store is not None and store.missing:
            print(
                f"archfit evidence: there is no {where}: the watcher has learned nothing there, "
                "or archfit runs in another namespace (-n NAMESPACE)",
                file=sys.stderr,
            )
        if args.action == "clear":
            print(f"cleared {await book.clear(args.digest)} entries in {where}", file=out)
            return 0
        if args.action == "confirm":
            confirmed = await book.confirm(args.digest, only)
            print(
                f"confirmed {confirmed} entries in {where}: they now count in every namespace",
                file=out,
            )
            return 0 if confirmed else 1
        _print_entries(book.entries(), args.output, where, out)
        return 0
    finally:
        await book.aclose()


def _print_entries(entries: list[Evidence], output: str, where: str, out: TextIO) -> None:
    if output == "json":
        rows = [
            {
                "digest": e.digest,
                "platform": str(e.platform),
                "scope": e.scope,
                "image": e.image,
                "reason": e.reason,
                "namespace": e.namespace,
                "workload": e.workload,
                "pod": e.pod,
                "finding": e.said,
                "provenance": e.provenance,
                "corroboration": e.corroboration,
                "learned": utc_text(e.learned),
                "expires": utc_text(e.expires),
            }
            for e in entries
        ]
        out.write(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    out.write(f"{len(entries)} learned evidence entries in {where}\n")
    if not entries:
        return
    from rich.table import Table

    from extender.tables import print_table

    table = Table(box=None)
    for column in ("DIGEST", "PLATFORM", "SCOPE", "FROM", "REASON", "WHY", "EXPIRES"):
        table.add_column(column, overflow="fold" if column != "DIGEST" else "ignore")
    for e in entries:
        why = e.corroboration or f"uncorroborated{': ' + e.provenance if e.provenance else ''}"
        table.add_row(
            e.digest,
            str(e.platform),
            e.scope,
            f"{e.namespace}/{e.workload} (pod {e.pod})",
            e.reason,
            why,
            utc_text(e.expires),
        )
    print_table(table, out)
