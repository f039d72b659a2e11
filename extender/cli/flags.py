"""What the subcommands share: --config, and kubectl's connection flags on every command that
talks to a cluster. Each subcommand's module adds its own parser with `set_defaults(run=...)`,
so `archfit` dispatches by table, not by name."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from extender.config import settings as config

Run = Callable[[config.Settings, argparse.Namespace], int]
"""A subcommand: the settings (loaded, with kubectl's flags applied when it `connects`) and
its arguments in, the exit status out."""

KUBECONFIG_HELP = (
    "kubeconfig file (default: kubernetes.kubeconfig, $KUBECONFIG or ~/.kube/config); "
    "with it, the kubeconfig is read whatever kubernetes.mode says"
)
CONTEXT_HELP = "kubeconfig context (default: kubernetes.context or current-context)"


def common_parser() -> argparse.ArgumentParser:
    """The parent of every subcommand's parser: --config."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--config",
        type=Path,
        default=None,
        help="YAML settings file (default: config/archfit.yaml if present); "
        "ARCHFIT_* env vars override it",
    )
    return common


def add_cluster_flags(parser: argparse.ArgumentParser) -> None:
    """--kubeconfig and --context, as kubectl names them, for a command that `connects`."""
    parser.add_argument("--kubeconfig", metavar="PATH", help=KUBECONFIG_HELP)
    parser.add_argument("--context", metavar="CONTEXT", help=CONTEXT_HELP)
    parser.set_defaults(connects=True)
