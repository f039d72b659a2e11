"""Command line: `archfit serve`, `archfit inspect IMAGE...`, `archfit config`."""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
from pathlib import Path

import yaml

from extender import config, settings_doc


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        settings = config.load(args.config, os.environ)
    except config.ConfigError as error:
        print(f"archfit: bad config: {error}", file=sys.stderr)
        return 2
    command: str = args.command
    if command == "serve":
        return _serve(settings)
    if command == "inspect":
        from extender.inspect import run_inspect

        as_json = args.json or not sys.stdout.isatty()
        try:
            return asyncio.run(
                run_inspect(args.images, settings.registry, settings.cache, as_json, sys.stdout)
            )
        except ValueError as error:  # a CA bundle, plugin config or proxy that is unusable
            print(f"archfit: bad config: {error}", file=sys.stderr)
            return 2
    if args.table:
        print(settings_doc.markdown_table(), end="")
    elif args.defaults:
        print(settings_doc.commented_defaults(), end="")
    else:
        print(yaml.safe_dump(config.to_mapping(settings), sort_keys=False), end="")
    return 0


def _serve(settings: config.Settings) -> int:
    from aiohttp import web

    from extender.app import create_app
    from extender.kube.client import KubeConfigError
    from extender.logs import configure

    configure(settings.logging.level, settings.logging.format)
    app = create_app(settings)
    tune_gc()
    try:
        web.run_app(
            app,
            host=settings.server.host,
            port=settings.server.port,
            shutdown_timeout=settings.server.shutdown_grace_seconds,
            access_log=None,  # the summary line per request says more
            print=None,
        )
    except KubeConfigError as error:
        print(f"archfit: cannot reach Kubernetes: {error}", file=sys.stderr)
        return 2
    except ValueError as error:  # raised while building the resolver: CA bundle, plugins, proxy
        print(f"archfit: bad config: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # the port is taken, the address does not exist
        print(
            f"archfit: cannot listen on {settings.server.host}:{settings.server.port}: "
            f"{error.strerror}",
            file=sys.stderr,
        )
        return 1
    return 0


def tune_gc() -> None:
    """Make garbage collection rare and cheap for a server that parses big JSON bodies.

    A full Node list allocates hundreds of thousands of acyclic objects, which
    refcounting frees anyway; with the default thresholds they set off collections
    that scan every live object mid-request (p99 of a 100-node filter: ~35 ms
    against ~4 ms with this; bench/filter_latency.py). Freezing moves start-up
    objects out of the collector's way for good.
    """
    gc.set_threshold(10_000, 50, 1_000)
    gc.freeze()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="archfit",
        description="kube-scheduler extender that keeps pods off nodes their images can't run on",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--config",
        type=Path,
        default=None,
        help="YAML settings file (default: config/archfit.yaml if present); "
        "ARCHFIT_* env vars override it",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("serve", parents=[common], help="run the extender HTTP service")
    inspect = commands.add_parser(
        "inspect", parents=[common], help="print the digest and platforms of images"
    )
    inspect.add_argument("images", nargs="+", metavar="IMAGE")
    inspect.add_argument("--json", action="store_true", help="JSON output even on a terminal")
    show = commands.add_parser("config", parents=[common], help="print the effective settings")
    what = show.add_mutually_exclusive_group()
    what.add_argument("--table", action="store_true", help="a Markdown table of every setting")
    what.add_argument("--defaults", action="store_true", help="a commented default config file")
    return parser
