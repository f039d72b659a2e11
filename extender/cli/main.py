"""Command line: `archfit serve`, `inspect IMAGE...`, `audit`, `lint PATH`, `scheduler-config`,
`release`, `uninstall`, `evidence`, `config`. Each subcommand adds its parser with
`set_defaults(run=...)` (the table is _SUBCOMMANDS): `_run` loads the settings once and calls
the one that was named."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from extender import __version__
from extender.cli import evidence, serve
from extender.cli.flags import CONTEXT_HELP, KUBECONFIG_HELP, add_cluster_flags, common_parser
from extender.cli.policy_status import OLDEST_SHOWN
from extender.cli.scheduler_config import KUBEADM_KUBECONFIG, SERVICE_URL
from extender.config import extras, loading
from extender.config import settings as config

if TYPE_CHECKING:  # the client loads only for the commands that reach a cluster
    from extender.kube.client.api import KubeApi

DESCRIPTION = (
    "archfit keeps pods off nodes their images cannot run on (arm64, amd64, ...): a "
    "kube-scheduler extender, a mutating admission webhook and a MutatingAdmissionPolicy that "
    "write the constraint into pods, and `archfit audit`, which reports what can move to arm64"
)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # the command's usage, not archfit's: that is where the flag was looked for
        args.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        return _run(args)
    except KeyboardInterrupt:  # Ctrl-C: the operator knows; no traceback
        print("archfit: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `archfit config --docs | head`: the reader has what it wanted
        # Python would complain again flushing stdout at exit; point it at nothing first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # as a shell reports a command that SIGPIPE ended


def _run(args: argparse.Namespace) -> int:
    """Load the settings, check them for the command, apply kubectl's connection flags when
    the command `connects`, and run it."""
    try:
        settings = loading.load(args.config, os.environ)
    except loading.ConfigError as error:
        print(f"archfit: bad config: {error}", file=sys.stderr)
        return 2
    for warning in loading.ignored_env(os.environ):
        print(f"archfit: warning: {warning}", file=sys.stderr)
    if args.needs_extras:
        problems = extras.missing(settings)
        for problem in problems:
            print(f"archfit: bad config: {problem}", file=sys.stderr)
        if problems:
            return 2
    if args.connects:
        from extender.kube.connect import KubeConfigError

        try:
            settings = _connect(settings, args.kubeconfig, [args.context] if args.context else [])
        except KubeConfigError as error:
            print(f"archfit {args.command}: {error}", file=sys.stderr)
            return 2
    run: Callable[[config.Settings, argparse.Namespace], int] = args.run
    return run(settings, args)


def _show_config(settings: config.Settings, args: argparse.Namespace) -> int:
    # Only `archfit config` needs these; `serve` should not pay for them at start.
    import yaml

    from extender.config import docs as settings_doc

    if args.table:
        print(settings_doc.markdown_table(), end="")
    elif args.defaults:
        print(settings_doc.commented_defaults(), end="")
    elif args.docs:
        print(settings_doc.configuration_page(), end="")
    elif args.metrics:
        from extender.metrics import metrics_table

        print(metrics_table(), end="")
    elif args.schema:
        import json

        schema = {"$schema": settings_doc.JSON_SCHEMA, **settings_doc.settings_schema()}
        print(json.dumps(schema, indent=2))
    else:
        print(_config_origin(loading.source(args.config), os.environ))
        shown = _without_passwords(loading.to_mapping(settings))
        print(yaml.safe_dump(shown, sort_keys=False), end="")
    return 0


def _quiet_logs(settings: config.Settings) -> None:
    """stdout carries the report: warnings (a missing pull secret, say) go to stderr, and the
    service's info lines stay quiet unless debug is asked for (inspect, audit)."""
    from extender.logs import configure

    level = "warning" if settings.logging.level == "info" else settings.logging.level
    configure(level, settings.logging.format, sys.stderr)


def _inspect(settings: config.Settings, args: argparse.Namespace) -> int:
    from extender.cli.inspect_images import run_inspect

    _quiet_logs(settings)
    as_json = args.output == "json" if args.output else args.json or not sys.stdout.isatty()
    try:
        return asyncio.run(
            run_inspect(
                args.images,
                settings.registry,
                settings.cache,
                as_json,
                sys.stdout,
                verify=args.verify,
            )
        )
    except ValueError as error:  # a CA bundle, plugin config or proxy that is unusable
        print(f"archfit: bad config: {error}", file=sys.stderr)
        return 2


def _config_origin(source: Path | None, environ: Mapping[str, str]) -> str:
    """A YAML comment saying which file was read (the default is relative to the current
    directory, so elsewhere none is) and which ARCHFIT_ variables override it."""
    if source is not None:
        origin = f"# archfit config: read {source.resolve()}"
    else:
        origin = (
            f"# archfit config: no file read ({loading.DEFAULT_CONFIG} is not in {Path.cwd()}; "
            "--config PATH names one): built-in defaults"
        )
    overrides = sorted(k for k in environ if k.startswith(loading.ENV_PREFIX) and "__" in k)
    return origin + (f", overridden by {', '.join(overrides)}" if overrides else "")


def _without_passwords(value: Any) -> Any:
    """Settings as `archfit config` shows them: every URL's password (a proxy's, Redis's)
    replaced by `***`, so the output can be pasted into an issue."""
    if isinstance(value, dict):
        return {key: _without_passwords(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_without_passwords(item) for item in value]
    if isinstance(value, str) and "://" in value and "@" in value:
        from urllib.parse import urlsplit, urlunsplit

        parts = urlsplit(value)
        userinfo, at, host = parts.netloc.rpartition("@")
        if at and ":" in userinfo:
            user = userinfo.split(":", 1)[0]
            return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
    return value


def _scheduler_config(settings: config.Settings, args: argparse.Namespace) -> int:
    from extender.cli.scheduler_config import Registration, render

    try:
        registration = Registration(
            url=args.url,
            ca_file=args.ca_file or "",
            kubeconfig=args.kubeconfig,
            node_cache_capable=not args.full_nodes,
            http_timeout=args.http_timeout,
            client_cert=args.client_cert or "",
            client_key=args.client_key or "",
        )
    except ValueError as error:
        print(f"archfit scheduler-config: {error}", file=sys.stderr)
        return 2
    for warning in (
        registration.prefix_warning(settings.server.prefix),
        registration.port_warning(settings.server.port, settings.webhook.port),
        registration.timeout_warning(settings.policy.resolve_deadline_seconds),
    ):
        if warning:
            print(f"archfit scheduler-config: warning: {warning}", file=sys.stderr)
    print(render(registration), end="")
    return 0


def _audit(settings: config.Settings, args: argparse.Namespace) -> int:
    from extender.audit.pure.options import AuditOptions, Pricing
    from extender.audit.run import run_audit
    from extender.kube.connect import KubeConfigError, current_namespace

    _quiet_logs(settings)
    contexts: list[str] = args.context or []
    try:
        settings = _connect(settings, args.kubeconfig, contexts)
    except KubeConfigError as error:
        print(f"archfit audit: {error}", file=sys.stderr)
        return 2
    namespace = None if args.all_namespaces else args.namespace
    if namespace is None and not args.all_namespaces:
        namespace = current_namespace(settings.kubernetes)
    options = AuditOptions(
        namespace=namespace,
        selector=args.selector,
        output=args.output,
        fail_on_blockers=args.fail_on == "blockers",
        pricing=Pricing(args.price_per_vcpu_hour, args.arm64_discount),
        newer_tags=args.newer_tags,
        verify=args.verify,
    )
    if len(contexts) > 1 or args.all_contexts:
        return _audit_clusters(settings, args, contexts, options)
    return run_audit(settings, options, sys.stdout, sys.stderr)


def _lint(settings: config.Settings, args: argparse.Namespace) -> int:
    from extender.lint.pure.findings import Level
    from extender.lint.run import LintOptions, run_lint

    _quiet_logs(settings)
    options = LintOptions(
        paths=args.paths,
        output=args.output,
        fail_on=Level[args.fail_on.upper()],
        platforms_file=args.platforms,
        cluster_platforms=frozenset(p for p in args.cluster_platforms.split(",") if p.strip()),
        newer_tags=args.newer_tags,
    )
    return run_lint(settings, options, sys.stdout, sys.stderr)


def _connect(
    settings: config.Settings, kubeconfig: str | None, contexts: list[str]
) -> config.Settings:
    """The settings with kubectl's connection flags applied: --kubeconfig, and one
    --context, choose the kubeconfig and the cluster, whatever kubernetes.mode says.

    Raises KubeConfigError naming the flag: a file that does not exist, a context the
    kubeconfig does not have (with the ones it has)."""
    import dataclasses

    from extender.kube.connect import KubeConfigError, context_names

    if kubeconfig is None and not contexts:
        return settings
    if kubeconfig is not None:
        paths = [path for path in kubeconfig.split(os.pathsep) if path]
        if not any(Path(path).expanduser().is_file() for path in paths):
            raise KubeConfigError(f"--kubeconfig {kubeconfig}: no such file")
    kube = dataclasses.replace(
        settings.kubernetes,
        mode="kubeconfig",
        kubeconfig=kubeconfig or settings.kubernetes.kubeconfig,
        context=contexts[0] if len(contexts) == 1 else settings.kubernetes.context,
    )
    if contexts:
        known = context_names(kube)
        for context in contexts:
            if context not in known:
                raise KubeConfigError(
                    f"--context {context}: the kubeconfig has no such context (it has: "
                    f"{', '.join(known) or 'none'})"
                )
    return dataclasses.replace(settings, kubernetes=kube)


def _audit_clusters(
    settings: config.Settings, args: argparse.Namespace, contexts: list[str], options: Any
) -> int:
    """`--context a --context b` or `--all-contexts`: one report for several clusters."""
    import dataclasses

    from extender.audit.clusters import run_fleet_audit
    from extender.kube.connect import KubeConfigError, context_names, current_namespace

    if args.all_contexts:
        try:
            contexts = context_names(settings.kubernetes)
        except KubeConfigError as error:
            print(f"archfit: {error}", file=sys.stderr)
            return 2
    namespaces: dict[str, str | None] = {}
    for name in dict.fromkeys(contexts):  # each once, in the order given
        kube = dataclasses.replace(settings.kubernetes, mode="kubeconfig", context=name)
        namespaces[name] = (
            None if args.all_namespaces else args.namespace or current_namespace(kube)
        )
    return run_fleet_audit(settings, namespaces, options, sys.stdout, sys.stderr)


def _cluster_api(settings: config.Settings) -> KubeApi | None:
    """The API client `release`, `uninstall` and `policy` need, or None after saying why
    there is none."""
    from extender.kube.connect import KubeConfigError, build_api_client

    try:
        api = build_api_client(settings.kubernetes, required=True)
    except KubeConfigError as error:
        print(f"archfit: {error}", file=sys.stderr)
        return None
    assert api is not None  # required=True: a client or KubeConfigError
    return api


def _release(settings: config.Settings, args: argparse.Namespace) -> int:
    from extender.kube.gated_pods import release_all

    api = _cluster_api(settings)
    if api is None:
        return 2
    with api:
        released = asyncio.run(
            release_all(api, args.namespace, "released by `archfit release --all`, unconstrained")
        )
    for namespace, name in released:
        print(f"released {namespace}/{name}")
    where = f"namespace {args.namespace}" if args.namespace else "all namespaces"
    print(f"archfit: released {len(released)} held pod(s) in {where}", file=sys.stderr)
    return 0


def _uninstall(settings: config.Settings, args: argparse.Namespace) -> int:
    from extender.kube.client.errors import ApiError, short_error
    from extender.kube.removal import uninstall

    api = _cluster_api(settings)
    if api is None:
        return 2
    webhook = args.webhook_configuration or settings.webhook.certificate.webhook_configuration
    with api:
        try:
            removal = asyncio.run(uninstall(api, args.binding, webhook, args.settle_seconds))
        except ApiError as error:
            print(f"archfit uninstall: {short_error(error)}", file=sys.stderr)
            return 1
    for deleted in removal.deleted:
        print(f"deleted {deleted}")
    for namespace, name in removal.released:
        print(f"released {namespace}/{name}")
    print(
        f"archfit: nothing holds new pods now; released {len(removal.released)} held pod(s). "
        "Next: unregister the extender, then delete archfit's other objects "
        '(deploy/README.md, "Uninstalling")',
        file=sys.stderr,
    )
    return 0


_VERIFY_HELP = (
    "check each index entry's platform against its image config (a manifest and a config "
    "blob per entry; Docker Hub counts the manifest GETs as pulls): report disagreements "
    "and believe the config (exit status 1 when an index disagrees)"
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="archfit", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"archfit {__version__}")
    common = common_parser()
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in _SUBCOMMANDS:
        add(commands, common)
    for command in commands.choices.values():
        # What no subcommand says otherwise: settings checked in full, no cluster flags, and
        # usage errors shown with the subcommand's usage, not archfit's.
        defaults = {"needs_extras": True, "connects": False, "command_parser": command}
        command.set_defaults(
            **{k: v for k, v in defaults.items() if command.get_default(k) is None}
        )
    return parser


def _add_inspect(commands: Any, common: argparse.ArgumentParser) -> None:
    inspect = commands.add_parser(
        "inspect",
        parents=[common],
        help="print the digest and platforms of images",
        description="Look images up as archfit does (registries, mirrors, credentials, the "
        "SSRF guard of the settings) and print each digest and its platforms.",
    )
    inspect.add_argument("images", nargs="+", metavar="IMAGE")
    inspect.add_argument("--json", action="store_true", help="JSON output even on a terminal")
    inspect.add_argument(
        "-o",
        "--output",
        choices=("table", "json"),
        default=None,
        help="table or json (default: a table on a terminal, else JSON)",
    )
    inspect.add_argument("--verify", action="store_true", help=_VERIFY_HELP)
    inspect.set_defaults(run=_inspect)


def _add_scheduler_config(commands: Any, common: argparse.ArgumentParser) -> None:
    register = commands.add_parser(
        "scheduler-config",
        parents=[common],
        help="print the KubeSchedulerConfiguration that registers archfit",
        description="Print a KubeSchedulerConfiguration with archfit as an extender. "
        "See deploy/README.md for which --url fits your control plane.",
    )
    register.add_argument(
        "--url",
        default=SERVICE_URL,
        help=f"the extender urlPrefix (default: {SERVICE_URL}; a kubeadm scheduler "
        "needs the Service's ClusterIP instead)",
    )
    register.add_argument(
        "--ca-file",
        help="for an https --url: the CA bundle that signed archfit's certificate (for a "
        "public CA, the system bundle: /etc/ssl/certs/ca-certificates.crt)",
    )
    register.add_argument(
        "--client-cert",
        metavar="PATH",
        help="for archfit's server.clientCaFile (mutual TLS): the certificate kube-scheduler "
        "presents, with --client-key",
    )
    register.add_argument("--client-key", metavar="PATH", help="the key of --client-cert")
    register.add_argument(
        "--http-timeout",
        default="2s",
        help="the extender's httpTimeout (default: 2s); keep it above "
        "policy.resolveDeadlineSeconds",
    )
    register.add_argument(
        "--kubeconfig", default=KUBEADM_KUBECONFIG, help="kube-scheduler's own kubeconfig"
    )
    register.add_argument(
        "--full-nodes",
        action="store_true",
        help="nodeCacheCapable: false (whole Node objects per call; no node index needed)",
    )
    # It reads only server.prefix, server.port, webhook.port and the deadline.
    register.set_defaults(run=_scheduler_config, needs_extras=False)


def _policy_status(settings: config.Settings, args: argparse.Namespace) -> int:
    """`archfit policy status`: the published ImagePlatforms object, read with the operator's
    kubeconfig."""
    from extender.cli.policy_status import print_status, status_report
    from extender.kube.client.errors import short_error
    from extender.kube.image_platforms import read_object

    api = _cluster_api(settings)
    if api is None:
        return 2
    name = settings.admission_policy.parameter_name
    with api:
        try:
            found = read_object(api, name)
        except Exception as error:  # the API's refusal or no answer: said, not raised
            print(
                f"archfit: ImagePlatforms/{name} unreadable: {short_error(error)}", file=sys.stderr
            )
            return 1
    if found is None:
        print(
            f"archfit: no ImagePlatforms/{name}: archfit has not published it "
            "(admissionPolicy.enabled, and the cluster's policy API and archfit's CRD)",
            file=sys.stderr,
        )
        return 1
    print_status(status_report(found, args.oldest), args.output, sys.stdout)
    return 0


def _add_policy(commands: Any, common: argparse.ArgumentParser) -> None:
    policy = commands.add_parser(
        "policy",
        parents=[common],
        help="what the admission policy's parameter lists now, what it left out",
        description="The ImagePlatforms object archfit's leader publishes (admissionPolicy): "
        "how many images it lists of those in use, which namespaces had images left out "
        "under admissionPolicy.maxBytes, and the entries resolved longest ago. See "
        """docs/operations.md, "The admission policy's parameter".""",
    )
    policy.add_argument("action", choices=("status",))
    policy.add_argument(
        "--oldest",
        type=int,
        default=OLDEST_SHOWN,
        help=f"how many of the entries resolved longest ago to show (default {OLDEST_SHOWN})",
    )
    policy.add_argument(
        "-o", "--output", choices=("table", "json"), default="table", help="a table or JSON"
    )
    add_cluster_flags(policy)
    policy.set_defaults(run=_policy_status)


def _add_release(commands: Any, common: argparse.ArgumentParser) -> None:
    release = commands.add_parser(
        "release",
        parents=[common],
        help="remove archfit's scheduling gate from held pods (when uninstalling)",
        description="Remove archfit's scheduling gate (archfit.io/platforms-unknown) from "
        "every pod it holds, without constraints, and write an Event on each. For "
        "uninstalling archfit, or when it is down for long: see deploy/README.md.",
    )
    release.add_argument(
        "--all", action="store_true", required=True, help="every held pod (required)"
    )
    release.add_argument("-n", "--namespace", help="only this namespace (default: all)")
    add_cluster_flags(release)
    release.set_defaults(run=_release)


def _add_uninstall(commands: Any, common: argparse.ArgumentParser) -> None:
    from extender.kube import removal

    uninstall = commands.add_parser(
        "uninstall",
        parents=[common],
        help="stop archfit holding pods and release the held ones (first, when removing it)",
        description="Delete archfit's MutatingAdmissionPolicyBinding and its pod "
        "MutatingWebhookConfiguration, so that nothing holds a new pod, then remove archfit's "
        "scheduling gate from every held pod (unconstrained, with an Event on each), and look "
        "once more after --settle-seconds. Run it before deleting archfit's other objects; "
        '`helm uninstall` runs it in a pre-delete hook. See deploy/README.md, "Uninstalling".',
    )
    uninstall.add_argument(
        "--binding",
        default=removal.BINDING,
        help=f"the MutatingAdmissionPolicyBinding (default: {removal.BINDING})",
    )
    uninstall.add_argument(
        "--webhook-configuration",
        metavar="NAME",
        help="the pod MutatingWebhookConfiguration (default: "
        "webhook.certificate.webhookConfiguration, archfit)",
    )
    uninstall.add_argument(
        "--settle-seconds",
        type=_non_negative,
        default=removal.SETTLE_SECONDS,
        metavar="SECONDS",
        help="look for held pods once more this long after the deletions, for pods being "
        f"admitted meanwhile (default {removal.SETTLE_SECONDS:g})",
    )
    add_cluster_flags(uninstall)
    uninstall.set_defaults(run=_uninstall)


def _add_config(commands: Any, common: argparse.ArgumentParser) -> None:
    show = commands.add_parser(
        "config",
        parents=[common],
        help="print the effective settings",
        description="Print the settings archfit runs with: the file read, the ARCHFIT_* "
        "variables over it, and every value (passwords in URLs hidden).",
    )
    what = show.add_mutually_exclusive_group()
    what.add_argument("--table", action="store_true", help="a Markdown table of every setting")
    what.add_argument("--defaults", action="store_true", help="a commented default config file")
    what.add_argument("--docs", action="store_true", help="docs/configuration.md")
    what.add_argument(
        "--metrics", action="store_true", help="docs/operations.md's table of every metric"
    )
    what.add_argument(
        "--schema",
        action="store_true",
        help="a JSON Schema of archfit.yaml (for an editor; the Helm chart's values.schema.json "
        "holds it under config)",
    )
    show.set_defaults(run=_show_config)


def _add_audit(commands: Any, common: argparse.ArgumentParser) -> None:
    # From audit.options, not audit.output: that loads rich and the report, which only
    # `archfit audit` needs, and every command builds this parser.
    from extender.audit.pure import newer_tags
    from extender.audit.pure.options import ARM64_DISCOUNT, FORMATS

    audit = commands.add_parser(
        "audit",
        parents=[common],
        help="report which workloads can move to arm64, what blocks the rest, and the saving",
        description="Read the cluster's workloads through the kubeconfig, look up every image "
        "with serve's settings, and report which workloads can move to arm64, what blocks "
        "the rest, and what moving is worth (docs/audit.md).",
    )
    where = audit.add_mutually_exclusive_group()
    where.add_argument(
        "-n", "--namespace", help="one namespace (default: the kubeconfig context's)"
    )
    where.add_argument(
        "-A",
        "--all-namespaces",
        action="store_true",
        help="every namespace except policy.excludedNamespaces",
    )
    audit.add_argument("-l", "--selector", default="", help="label selector for workloads")
    audit.add_argument("--kubeconfig", metavar="PATH", help=KUBECONFIG_HELP)
    clusters = audit.add_mutually_exclusive_group()
    clusters.add_argument(
        "--context",
        action="append",
        metavar="CONTEXT",
        help=f"{CONTEXT_HELP}; repeat it to audit several clusters in one run, with one "
        "lookup per distinct image",
    )
    clusters.add_argument(
        "--all-contexts",
        action="store_true",
        help="audit the cluster of every context in the kubeconfig, in one run",
    )
    audit.add_argument(
        "--newer-tags",
        type=_count,
        default=newer_tags.LIMIT,
        metavar="N",
        help="for each image that blocks arm64 and has a version tag, look up the N highest "
        "newer tags of the same shape and name the lowest that runs on arm64 "
        f"(default {newer_tags.LIMIT}; 0: off)",
    )
    audit.add_argument(
        "-o",
        "--output",
        choices=FORMATS,
        default="table",
        help=f"report format: {', '.join(FORMATS)} (default: table; csv is one row per "
        "workload, json for scripts)",
    )
    audit.add_argument("--verify", action="store_true", help=_VERIFY_HELP)
    audit.add_argument(
        "--fail-on",
        choices=("blockers", "never"),
        default="never",
        help="blockers: exit status 1 when any workload is blocked from arm64 or cannot run "
        "on this cluster's capacity, for CI (default: never)",
    )
    audit.add_argument(
        "--price-per-vcpu-hour",
        type=_non_negative,
        default=None,
        metavar="PRICE",
        help="on-demand price of one vCPU-hour, for the monthly saving estimate",
    )
    audit.add_argument(
        "--arm64-discount",
        type=_fraction,
        default=ARM64_DISCOUNT,
        metavar="FRACTION",
        help=f"how much cheaper arm64 is (default {ARM64_DISCOUNT:.2f}, the commonly quoted "
        "Graviton saving)",
    )
    # Its own --kubeconfig and a --context that may be repeated: it connects by itself.
    audit.set_defaults(run=_audit)


def _add_lint(commands: Any, common: argparse.ArgumentParser) -> None:
    from extender.audit.pure import newer_tags
    from extender.lint.pure.options import LEVELS, OUTPUTS

    lint = commands.add_parser(
        "lint",
        parents=[common],
        help="check rendered manifests for images that lack a platform their pods may run on",
        description="Read rendered manifests (helm template, kustomize build: many documents, "
        "List kinds) and report, per workload and container: an image that lacks a platform "
        "the pod template allows (error), an image without linux/arm64 (warning), an arch "
        "pin the images do not need (note). The annotation archfit.io/lint-ignore on a "
        "workload silences findings on purpose. See docs/lint.md.",
    )
    lint.add_argument(
        "paths", nargs="+", metavar="PATH", help="a manifest file, a directory of them, or -"
    )
    lint.add_argument(
        "-o",
        "--output",
        choices=OUTPUTS,
        default="table",
        help="table (80 columns, or the terminal's), json, sarif (2.1.0, for code scanning) "
        "or junit (XML test report) (default: table)",
    )
    lint.add_argument(
        "--fail-on",
        choices=LEVELS,
        default="error",
        help="exit status 1 when a finding of this level or above is not silenced (default: error)",
    )
    lint.add_argument(
        "--platforms",
        metavar="FILE",
        help="offline: image platforms from `archfit inspect -o json` or `archfit audit -o "
        "json` output; an image not in it is a finding (platforms-unknown)",
    )
    lint.add_argument(
        "--cluster-platforms",
        default="",
        metavar="LIST",
        help="the platforms the cluster's nodes may have, comma-separated (default: "
        "webhook.architectures, linux/amd64,linux/arm64)",
    )
    lint.add_argument(
        "--newer-tags",
        type=_count,
        default=newer_tags.LIMIT,
        metavar="N",
        help="online: for each image without arm64, look up the N highest newer tags and "
        f"name the lowest that runs on arm64 (default {newer_tags.LIMIT}; 0: off)",
    )
    lint.set_defaults(run=_lint)


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"{text!r} must not be negative")
    return value


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 0 or more")
    return int(text)


def _fraction(text: str) -> float:
    value = _non_negative(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be below 1 (0.20 is 20%)")
    return value


_SUBCOMMANDS: tuple[Callable[[Any, argparse.ArgumentParser], None], ...] = (
    serve.add_serve,
    _add_inspect,
    _add_audit,
    _add_lint,
    _add_scheduler_config,
    _add_release,
    _add_uninstall,
    evidence.add_evidence,
    _add_policy,
    _add_config,
)
"""Every subcommand, in the order `archfit --help` lists them: each adds its parser and
names the function that runs it (flags.Run)."""
