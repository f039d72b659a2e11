"""Settings: frozen dataclasses loaded from YAML plus `ARCHFIT_` env overrides, validated at start.

YAML keys are the camelCase of the field names; env overrides name the path in
upper snake case with `__` between levels: `ARCHFIT_POLICY__FAILURE_POLICY=fail-closed`.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from extender.core.placement import DEFAULT_ARCH_PREFERENCE
from extender.core.platforms import ARCH_LABEL, MAX_SCORE, normalize
from extender.core.platforms import parse as parse_platform
from extender.core.text import cut
from extender.errors import SetupError
from extender.registry.settings import CacheSettings, RegistrySettings

ENV_PREFIX = "ARCHFIT_"
DEFAULT_CONFIG = Path("config/archfit.yaml")

ARCHITECTURES = frozenset(
    {"386", "amd64", "arm", "arm64", "loong64", "mips", "mips64", "mips64le", "mipsle", "ppc64"}
    | {"ppc64le", "riscv64", "s390x", "wasm"}
)
"""What a node's kubernetes.io/arch can say: kubelet writes Go's runtime.GOARCH, and these are
the GOARCH values of `go tool dist list` (aliases such as aarch64 are normalised first)."""


class ConfigError(SetupError, ValueError):
    """A setting is missing, misspelt or invalid; the message names its key."""


@dataclass(frozen=True)
class ServerSettings:
    host: str = "0.0.0.0"
    """Address to listen on."""
    port: int = 8888
    """TCP port for the extender verbs, health checks and metrics."""
    prefix: str = "/scheduler"
    """Path prefix of the verbs: the `urlPrefix` path in KubeSchedulerConfiguration."""
    max_body_bytes: int = 32 * 1024 * 1024
    """Largest request body accepted; larger ones get 413. Fits 5,000 full Nodes of 6.7 KB each."""
    header_timeout_seconds: float = 10.0
    """A new connection must finish its TLS handshake and first request's headers within this."""
    body_timeout_seconds: float = 10.0
    """A request body must arrive in full within this once its headers have; else 408."""
    max_connections: int = 512
    """Open client connections per listener, counted from accept (before a TLS handshake).
    A new one past the cap closes the oldest idle connection, or is closed if none is idle."""
    max_idle_per_client: int = 256
    """Idle connections one client address may hold per listener; a new connection past it
    closes that address's oldest idle one, so one address cannot take every slot. kube-apiserver
    opens a connection per concurrent admission call: a ReplicaSet's burst of 100 creates held
    more than 32, and closing one just as the apiserver reuses it fails that call (the pod is
    then admitted unchanged), so keep this well above a burst's concurrency."""
    keepalive_timeout_seconds: float = 120.0
    """An idle keep-alive connection is closed after this (aiohttp's own default is 3,630 s).
    Keep it above the 90 s after which kube-apiserver's webhook client and kube-scheduler's
    extender client close idle connections themselves (client-go's transport defaults): a
    close of ours costs the next call a new connection (a TLS handshake on the webhook), or
    fails the call if it races the client's reuse (a pod then admitted unchanged)."""
    handshake_timeout_seconds: float = 5.0
    """A TLS client must finish its handshake within this of connecting; else it is closed."""
    gc_interval_seconds: float = 60.0
    """How often a full garbage collection runs between requests; 0 leaves it to thresholds."""
    event_loop: Literal["asyncio", "uvloop", "auto"] = "asyncio"
    """The event loop: asyncio's own; `uvloop` (pip install 'archfit[uvloop]') refuses to start
    without it; `auto` takes uvloop when installed. uvloop served 500-name filters only ~2%
    faster on the 2-core bench machine (docs/benchmarks.md), so it is not the default."""
    shutdown_grace_seconds: float = 10.0
    """On SIGTERM, how long in-flight requests may take to finish."""
    cert_file: str = ""
    """PEM certificate (chain) to serve HTTPS to kube-scheduler; empty serves plain HTTP."""
    key_file: str = ""
    """PEM private key of certFile."""
    cert_reload_seconds: float = 10.0
    """How often certFile/keyFile are checked; a rotated pair is served without a restart."""
    client_ca_file: str = ""
    """PEM CA bundle: when set, the extender listener accepts only clients with a certificate
    it signed (kube-scheduler's tlsConfig.certFile/keyFile); needs certFile. Empty: none asked."""

    @property
    def tls(self) -> bool:
        return bool(self.cert_file)

    def __post_init__(self) -> None:
        if bool(self.cert_file) != bool(self.key_file):
            raise ValueError("certFile and keyFile: set both for HTTPS, or neither")
        if self.client_ca_file and not self.cert_file:
            raise ValueError("clientCaFile: needs certFile and keyFile (HTTPS)")
        if self.cert_reload_seconds < 0.1:
            raise ValueError("certReloadSeconds: must be at least 0.1")
        if not 0 < self.port < 65536:
            raise ValueError(f"port: {self.port} is not a TCP port")
        if not self.prefix.startswith("/") or (self.prefix.endswith("/") and self.prefix != "/"):
            raise ValueError(f"prefix: {self.prefix!r} must start with / and not end with /")
        if self.max_body_bytes < 1024:
            raise ValueError("maxBodyBytes: must be at least 1024")
        if self.header_timeout_seconds <= 0 or self.body_timeout_seconds <= 0:
            raise ValueError("headerTimeoutSeconds and bodyTimeoutSeconds: must be above 0")
        if self.max_connections < 1:
            raise ValueError("maxConnections: must be at least 1")
        if self.max_idle_per_client < 1:
            raise ValueError("maxIdlePerClient: must be at least 1")
        if self.keepalive_timeout_seconds <= 0 or self.handshake_timeout_seconds <= 0:
            raise ValueError("keepaliveTimeoutSeconds and handshakeTimeoutSeconds: must be above 0")
        if self.gc_interval_seconds < 0:
            raise ValueError("gcIntervalSeconds: must not be negative")
        if self.shutdown_grace_seconds < 0:
            raise ValueError("shutdownGraceSeconds: must not be negative")


@dataclass(frozen=True)
class PolicySettings:
    mode: Literal["enforce", "dry-run"] = "enforce"
    """`dry-run` decides, logs and counts, but never rejects or scores."""
    failure_policy: Literal["fail-open", "fail-closed"] = "fail-open"
    """What an image with unknown platforms does: pass every node, or fail them (FailedNodes)."""
    excluded_namespaces: tuple[str, ...] = ("kube-system",)
    """Pods in these namespaces are never filtered or scored."""
    arch_preference: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_ARCH_PREFERENCE))
    """Score (0..10) per architecture, for pods whose images run on two or more candidates."""
    matching: Literal["auto", "strict", "loose"] = "auto"
    """`auto` judges each node by its runtime's rule; `strict` or `loose` judge all nodes alike."""
    arm32_on_arm64: Literal["labelled", "pull-rule"] = "labelled"
    """Whether a 32-bit Arm build (arm/v5..v8) counts on an arm64 node whose runtime pulls it
    (containerd < 2.1). Many arm64 CPUs cannot run it (Neoverse N2/V2 such as Graviton4,
    AmpereOne). `labelled`: only on nodes labelled `archfit.io/aarch32: "true"`, and never in
    the webhook's constraint; `pull-rule`: on every such node. Never a reason to prefer arm64."""
    resolve_deadline_seconds: float = 1.5
    """Time a request waits for registries; keep it below the scheduler's httpTimeout."""

    def __post_init__(self) -> None:
        for arch, score in self.arch_preference.items():
            if not 0 <= score <= MAX_SCORE:
                raise ValueError(f"archPreference.{arch}: score {score} is outside 0..{MAX_SCORE}")
        # Normalise aliases once, so "aarch64: 10" means arm64.
        preference = self.arch_preference.items()
        normal = {normalize("linux", arch.strip()).architecture: s for arch, s in preference}
        for written in self.arch_preference:
            if normalize("linux", written.strip()).architecture not in ARCHITECTURES:
                raise ValueError(
                    f"archPreference.{written}: not an architecture a node reports "
                    f"(kubernetes.io/arch: {', '.join(sorted(ARCHITECTURES))})"
                )
        object.__setattr__(self, "arch_preference", normal)
        if not 0 < self.resolve_deadline_seconds <= 60:
            raise ValueError("resolveDeadlineSeconds: must be in (0, 60]")

    @property
    def loose_matching(self) -> bool:
        """Whether every node gets containerd's Only() fallbacks (the pre-`matching` flag)."""
        return self.matching == "loose"


@dataclass(frozen=True)
class KubernetesSettings:
    mode: Literal["auto", "in-cluster", "kubeconfig", "off"] = "auto"
    """API server access. `auto`, for `serve` and `audit` alike: `kubeconfig` if set, else
    the pod's service account, else $KUBECONFIG, else ~/.kube/config if it exists, else off
    (`serve`'s services_ready line says which, and why the node index is off)."""
    kubeconfig: str = ""
    """Kubeconfig path (empty: $KUBECONFIG or ~/.kube/config); set, `auto` uses it first."""
    context: str = ""
    """Kubeconfig context to use (empty: the file's current-context), as kubectl --context."""
    node_index: bool = True
    """List-watch Nodes so `nodeCacheCapable: true` requests (NodeNames only) can be served."""
    pull_secrets: bool = True
    """Read pods' and service accounts' imagePullSecrets for private registries."""


@dataclass(frozen=True)
class ArchTaintSettings:
    architecture: str = "arm64"
    """Nodes of this architecture carry the taint; pods whose images all run there tolerate it."""
    key: str = ARCH_LABEL
    """The taint's key."""
    value: str = "arm64"
    """The taint's value (tolerated with operator Equal)."""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"
    """The taint's effect."""

    def __post_init__(self) -> None:
        arch = normalize("linux", self.architecture).architecture
        if not arch or "/" in arch:
            raise ValueError(f"architecture: {self.architecture!r} is not an architecture")
        object.__setattr__(self, "architecture", arch)
        if not self.key:
            raise ValueError("key: must not be empty")


@dataclass(frozen=True)
class WebhookCertificateSettings:
    self_managed: bool = False
    """archfit makes its own CA and serving certificate, keeps them in a Secret, writes them
    to certFile/keyFile and sets the webhook configuration's caBundle (no cert-manager)."""
    secret_name: str = "archfit-webhook-tls"  # noqa: S105 (a name, not a secret)
    """The Secret (kubernetes.io/tls, plus ca.crt and ca.key) that holds that certificate."""
    secret_namespace: str = ""
    """Namespace of that Secret; empty means archfit's own (read from its service account)."""
    webhook_configuration: str = "archfit"
    """The MutatingWebhookConfiguration whose caBundle archfit keeps set."""
    validating_webhook_configuration: str = "archfit-workload-warnings"
    """The ValidatingWebhookConfiguration of the workload warnings, whose caBundle archfit
    keeps set too while webhook.workloadWarnings.enabled; empty: none (a missing one is
    logged, and skipped)."""
    hosts: tuple[str, ...] = ("archfit-webhook.archfit-system.svc",)
    """DNS names (or IP addresses) the serving certificate is for: the webhook Service's name."""
    validity_days: int = 365
    """Lifetime of a serving certificate; it is renewed once less than a third of it is left."""
    check_seconds: float = 600.0
    """How often the Secret and the caBundle are checked (renewal, a re-applied configuration)."""

    def __post_init__(self) -> None:
        if self.self_managed and not self.hosts:
            raise ValueError("hosts: a self-managed certificate needs at least one name")
        if not 1 <= self.validity_days <= 3650:
            raise ValueError("validityDays: must be in 1..3650")
        if self.check_seconds < 1:
            raise ValueError("checkSeconds: must be at least 1")


@dataclass(frozen=True)
class WebhookGateSettings:
    max_wait_seconds: float = 120.0
    """Longest a pod is held by archfit's scheduling gate; then it is released with `fallback`."""
    fallback: str = "known"
    """How a pod is released at the cap: `known` (the constraint of the images that did
    resolve: never excludes a node that could run the pod), `admit` (unconstrained), or an
    architecture (`amd64`: required `kubernetes.io/arch In [amd64]`)."""
    releases_per_second: float = 50.0
    """Pod updates the releaser sends per second at most (a cold rollout of many replicas)."""
    retry_seconds: float = 1.0
    """First wait before a held pod's lookup is tried again; it doubles up to 4 s (or stays
    at this, if longer), so a pod goes within seconds of its registry's recovery."""
    lease_name: str = "archfit-releaser"
    """The coordination.k8s.io Lease (in archfit's namespace) that elects the one releaser."""

    def __post_init__(self) -> None:
        if not 5 <= self.max_wait_seconds <= 3600:
            raise ValueError("maxWaitSeconds: must be in 5..3600")
        if self.releases_per_second <= 0:
            raise ValueError("releasesPerSecond: must be above 0")
        if not 0.05 <= self.retry_seconds <= 60:
            raise ValueError("retrySeconds: must be in 0.05..60")
        if self.fallback not in ("known", "admit"):
            arch = normalize("linux", self.fallback).architecture
            if not arch or "/" in arch:
                raise ValueError(
                    f"fallback: {self.fallback!r} is not `known`, `admit` or an architecture"
                )
            object.__setattr__(self, "fallback", arch)
        if not self.lease_name:
            raise ValueError("leaseName: must not be empty")


@dataclass(frozen=True)
class WorkloadWarningSettings:
    enabled: bool = True
    """Answer the workload warnings path (when the webhook is enabled): warnings, never a
    denial, on Deployment, StatefulSet, DaemonSet, ReplicaSet, Job and CronJob CREATE and
    UPDATE, for the client that deploys (docs/webhook.md, "Warnings on workloads")."""
    path: str = "/warn"
    """Path kube-apiserver posts the workloads' AdmissionReviews to (the
    ValidatingWebhookConfiguration's service path), on the webhook's listener."""

    def __post_init__(self) -> None:
        if not self.path.startswith("/"):
            raise ValueError(f"path: {self.path!r} must start with /")


@dataclass(frozen=True)
class WebhookSettings:
    enabled: bool = False
    """Serve the mutating admission webhook (POST <path>, HTTPS only) on its own listener."""
    host: str = "0.0.0.0"
    """Address the webhook's TLS listener binds."""
    port: int = 8443
    """TCP port of the webhook's TLS listener."""
    path: str = "/mutate"
    """Path kube-apiserver posts AdmissionReviews to (the webhook configuration's service path)."""
    cert_file: str = "/var/run/archfit/webhook/tls.crt"
    """PEM serving certificate (chain); a rotated file is picked up without a restart."""
    key_file: str = "/var/run/archfit/webhook/tls.key"
    """PEM private key of that certificate."""
    cert_reload_seconds: float = 10.0
    """How often the certificate files are checked for rotation."""
    max_body_bytes: int = 4 * 1024 * 1024
    """Largest AdmissionReview accepted; larger ones get 413. kube-apiserver takes request bodies
    of at most 3 MiB, so a pod's review is smaller (server.maxBodyBytes is the extender's)."""
    resolve_deadline_seconds: float = 2.0
    """Time one pod CREATE waits for registries; keep it below the webhook's timeoutSeconds."""
    architectures: tuple[str, ...] = ("linux/amd64", "linux/arm64")
    """Platforms pods may land on besides those of the current nodes: what autoscalers can add."""
    arch_taints: tuple[ArchTaintSettings, ...] = ()
    """Architecture taints to tolerate for pods whose images all run there; on GKE:
    [{architecture: arm64, key: kubernetes.io/arch, value: arm64, effect: NoSchedule}]."""
    scheduler_name: str = ""
    """If set, pods that asked for the default scheduler go to this one instead (a second
    scheduler that calls archfit)."""
    certificate: WebhookCertificateSettings = field(default_factory=WebhookCertificateSettings)
    """Where the serving certificate comes from when archfit manages it itself."""
    unknown_images: Literal["gate", "admit"] = "gate"
    """A pod with an image whose platforms are still unknown at the deadline: `gate` holds it
    with a scheduling gate until the lookup answers (then constrains and releases it), `admit`
    lets it through constrained only by the images that did resolve (docs/webhook.md)."""
    gate: WebhookGateSettings = field(default_factory=WebhookGateSettings)
    """How held pods are released."""
    workload_warnings: WorkloadWarningSettings = field(default_factory=WorkloadWarningSettings)
    """Warnings to whoever applies a workload whose images do not run where it will run;
    they wait for registries as long as a pod CREATE does (resolveDeadlineSeconds)."""
    steering: bool = True
    """Read `archfit.io/prefer-arch` and `archfit.io/arm64-share` from Namespaces and split
    workloads by share (docs/webhook.md): list-watches Namespaces and the pods labelled
    `archfit.io/arch-choice`. Needs API access; without it only pod annotations count."""

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise ValueError(f"port: {self.port} is not a TCP port")
        if not self.path.startswith("/"):
            raise ValueError(f"path: {self.path!r} must start with /")
        if self.cert_reload_seconds < 0.1:
            raise ValueError("certReloadSeconds: must be at least 0.1")
        if self.max_body_bytes < 1024:
            raise ValueError("maxBodyBytes: must be at least 1024")
        if not 0 < self.resolve_deadline_seconds <= 29:
            raise ValueError("resolveDeadlineSeconds: must be in (0, 29] (timeoutSeconds is 1..30)")
        if self.workload_warnings.enabled and self.workload_warnings.path == self.path:
            raise ValueError("workloadWarnings.path: must differ from path")
        for index, text in enumerate(self.architectures):
            try:
                parse_platform(text)
            except ValueError as error:
                raise ValueError(f"architectures[{index}]: {error}") from None


@dataclass(frozen=True)
class WatcherSettings:
    enabled: bool = True
    """Watch pods (on the replica holding `leaseName`) for containers that fail on their node's
    platform: an Event on the pod and its controller, metrics, and learned evidence."""
    lease_name: str = "archfit-watcher"
    """The coordination.k8s.io Lease (in archfit's namespace) that elects the one watcher."""
    evidence_ttl_seconds: int = 7 * 24 * 3600
    """How long learned evidence ("digest D does not run on platform P") counts."""
    evidence_sync_seconds: float = 5.0
    """How often each replica reads the shared evidence again from Redis (`cache.url`)."""
    evidence_config_map: str = "archfit-evidence"
    """Without Redis (`cache.url`), the ConfigMap in archfit's namespace through which the
    watcher's replica shares learned evidence with every replica and `archfit evidence`."""
    evidence_namespaces: int = 3
    """In how many namespaces a digest must fail alike (a start error of the image's own
    entrypoint, on the same platform) before that evidence counts for every namespace;
    until then it counts for the failing workload only (docs/operations.md, "Learned
    evidence")."""
    log_bytes: int = 16384
    """How much of a crash-looping container's previous log is read (limitBytes), once per
    restart."""
    logs_per_second: float = 2.0
    """Previous-log reads per second at most."""
    events_per_second: float = 20.0
    """Events the watcher writes per second at most (a finding writes one on the pod and
    one on its controller)."""
    page_size: int = 500
    """Pods per list request."""
    remediate: bool = False
    """Evict (the Eviction API, so PodDisruptionBudgets hold) pods that are not Ready, are
    owned by a controller, and sit on a node whose platform their images lack."""
    evictions_per_minute: float = 6.0
    """Evictions per minute at most, with `remediate`."""

    def __post_init__(self) -> None:
        if not self.lease_name:
            raise ValueError("leaseName: must not be empty")
        if self.evidence_ttl_seconds < 60:
            raise ValueError("evidenceTtlSeconds: must be at least 60")
        if not 0.1 <= self.evidence_sync_seconds <= 3600:
            raise ValueError("evidenceSyncSeconds: must be in 0.1..3600")
        if not self.evidence_config_map:
            raise ValueError("evidenceConfigMap: must not be empty")
        if not 2 <= self.evidence_namespaces <= 1000:
            raise ValueError("evidenceNamespaces: must be in 2..1000")
        if not 256 <= self.log_bytes <= 1048576:
            raise ValueError("logBytes: must be in 256..1048576")
        if min(self.logs_per_second, self.events_per_second, self.evictions_per_minute) <= 0:
            raise ValueError("logsPerSecond, eventsPerSecond, evictionsPerMinute: must be above 0")
        if not 10 <= self.page_size <= 5000:
            raise ValueError("pageSize: must be in 10..5000")


@dataclass(frozen=True)
class AdmissionPolicySettings:
    enabled: bool = False
    """Publish what archfit has resolved as the parameter of its MutatingAdmissionPolicy
    (Kubernetes 1.36+), so kube-apiserver constrains known images and holds unknown ones
    while archfit is down or unreachable (docs/webhook.md, "When archfit is down"). Needs
    API access; on a cluster without admissionregistration.k8s.io/v1 policies, serve says
    so once and runs without it."""
    parameter_name: str = "archfit"
    """The cluster-scoped ImagePlatforms object (archfit.io/v1alpha1) the paramRef names."""
    lease_name: str = "archfit-policy-publisher"
    """The coordination.k8s.io Lease (in archfit's namespace) that elects the one publisher."""
    publish_seconds: float = 5.0
    """How often the leader writes the parameter when what it says changed."""
    refresh_seconds: float = 300.0
    """An image is resolved again this long after its last lookup, so a moved tag shows."""
    unused_seconds: float = 7 * 24 * 3600.0
    """An image no pod has named for this long leaves the parameter."""
    max_bytes: int = 1_000_000
    """Bound on the parameter's spec as JSON, below etcd's 1.5 MiB request limit; past it the
    least recently used images are left out (their pods are held as unknown ones are)."""
    max_entries: int = 50_000
    """Images remembered per replica (least recently used first out)."""

    def __post_init__(self) -> None:
        if not self.parameter_name or not self.lease_name:
            raise ValueError("parameterName and leaseName: must not be empty")
        if not 0.5 <= self.publish_seconds <= 3600:
            raise ValueError("publishSeconds: must be in 0.5..3600")
        if self.refresh_seconds < 10:
            raise ValueError("refreshSeconds: must be at least 10")
        if self.unused_seconds < 60:
            raise ValueError("unusedSeconds: must be at least 60")
        if not 10_000 <= self.max_bytes <= 1_400_000:
            raise ValueError("maxBytes: must be in 10000..1400000 (etcd takes 1.5 MiB at most)")
        if self.max_entries < 1:
            raise ValueError("maxEntries: must be at least 1")


@dataclass(frozen=True)
class LoggingSettings:
    level: Literal["debug", "info", "warning", "error"] = "info"
    """Lowest level written."""
    format: Literal["auto", "json", "console"] = "auto"
    """`auto` is JSON unless stdout is a terminal."""


@dataclass(frozen=True)
class Settings:
    server: ServerSettings = field(default_factory=ServerSettings)
    """HTTP listener."""
    policy: PolicySettings = field(default_factory=PolicySettings)
    """Decisions: enforcement, failure policy, scoring."""
    kubernetes: KubernetesSettings = field(default_factory=KubernetesSettings)
    """API server access for the node index and pull secrets."""
    logging: LoggingSettings = field(default_factory=LoggingSettings)
    """Structured logs."""
    registry: RegistrySettings = field(default_factory=RegistrySettings)
    """Registry access: timeouts, per-host TLS, mirrors, private-address allow-list."""
    cache: CacheSettings = field(default_factory=CacheSettings)
    """Resolver cache: in memory or Redis, TTLs."""
    webhook: WebhookSettings = field(default_factory=WebhookSettings)
    """The mutating admission webhook: writes platform constraints into pods at CREATE."""
    watcher: WatcherSettings = field(default_factory=WatcherSettings)
    """The mismatch watcher: pods failing on their node's platform, learned evidence."""
    admission_policy: AdmissionPolicySettings = field(default_factory=AdmissionPolicySettings)
    """The parameter of archfit's MutatingAdmissionPolicy: the guarantee while archfit is down."""


def source(path: Path | None = None) -> Path | None:
    """The file `load(path)` reads: `path`, else config/archfit.yaml if present, else none."""
    if path is not None:
        return path
    return DEFAULT_CONFIG if DEFAULT_CONFIG.is_file() else None


def load(path: Path | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Load settings from `path` (default config/archfit.yaml if present) and env overrides."""
    data: dict[str, Any] = {}
    chosen = source(path)
    if chosen is not None:
        import yaml  # here, not at the top: with no file and no env, start-up skips it

        try:
            loaded = yaml.safe_load(chosen.read_text(encoding="utf-8"))
        except OSError as error:
            raise ConfigError(f"cannot read config file {chosen}: {error.strerror}") from error
        except yaml.YAMLError as error:
            # PyYAML names a string it was given "<unicode string>": name the file.
            where = str(error).replace('"<unicode string>"', f'"{chosen}"')
            raise ConfigError(f"config file {chosen} is not valid YAML: {where}") from error
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"config file {chosen} must hold a mapping at the top")
        data = loaded or {}
    _apply_env(data, environ if environ is not None else {})
    return from_mapping(data)


def from_mapping(data: Mapping[str, Any]) -> Settings:
    """Build validated Settings from plain data (camelCase keys)."""
    settings: Settings = _build(Settings, _upgrade_legacy(data), "")
    return settings


def _upgrade_legacy(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """Read `policy.looseMatching: true|false` of older files as `policy.matching: loose|strict`.

    false meant containerd 2.x's strict matching, so it stays strict rather than turning auto.
    """
    policy = data.get("policy")
    if not isinstance(policy, Mapping) or "looseMatching" not in policy:
        return data
    loose = policy["looseMatching"]
    if "matching" in policy:
        raise ConfigError("policy.looseMatching: replaced by policy.matching; set only matching")
    if isinstance(loose, _EnvText):
        loose = _from_env(bool, loose, "policy.looseMatching")
    if not isinstance(loose, bool):
        raise ConfigError(f"policy.looseMatching: must be true or false, not {loose!r}")
    upgraded = {key: value for key, value in policy.items() if key != "looseMatching"}
    upgraded["matching"] = "loose" if loose else "strict"
    return {**data, "policy": upgraded}


def camel(name: str) -> str:
    """snake_case field name → camelCase YAML key."""
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


class _EnvText(str):
    """An env override's raw text, read later as the type of the setting it names.

    Reading it as YAML up front would turn `off`, `on`, `yes` and `no` into booleans
    (YAML 1.1), so `ARCHFIT_KUBERNETES__MODE=off` would fail for a string setting.
    """

    variable: str

    def __new__(cls, text: str, variable: str) -> _EnvText:
        made = super().__new__(cls, text)
        made.variable = variable
        return made


_SECTIONS = frozenset(camel(f.name) for f in dataclasses.fields(Settings))


def ignored_env(environ: Mapping[str, str]) -> list[str]:
    """Warnings for ARCHFIT_ variables that look like a setting but set nothing: a section name
    followed by one `_` (ARCHFIT_POLICY_FAILURE_POLICY). Other ARCHFIT_ names without `__`
    belong to other tools (ARCHFIT_E2E_CACHE) and are left alone."""
    found = []
    for key in sorted(environ):
        rest = key[len(ENV_PREFIX) :]
        if not key.startswith(ENV_PREFIX) or "__" in rest:
            continue
        section = next((s for s in sorted(_SECTIONS) if rest.lower().startswith(s + "_")), "")
        if section:
            meant = f"{ENV_PREFIX}{rest[: len(section)]}__{rest[len(section) + 1 :]}"
            found.append(
                f"{key} sets nothing: a section and its key are joined by two underscores ({meant})"
            )
    return found


def _apply_env(data: dict[str, Any], environ: Mapping[str, str]) -> None:
    for key, raw in sorted(environ.items()):
        if not key.startswith(ENV_PREFIX):
            continue
        path = [camel(part.lower()) for part in key[len(ENV_PREFIX) :].split("__")]
        if len(path) == 1 and path[0] not in _SECTIONS:
            # Not the ARCHFIT_<SECTION>__<KEY> syntax and no section: another tool's
            # variable (ARCHFIT_E2E_CACHE), not a misspelt setting, which has `__`.
            continue
        value = _EnvText(raw, key)
        target = data
        for part in path[:-1]:
            nested = target.setdefault(part, {})
            if not isinstance(nested, dict):
                raise ConfigError(f"{key}: {'.'.join(path)} is not a section")
            target = nested
        target[path[-1]] = value


def _build(cls: type[Any], data: object, where: str) -> Any:
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where or 'config'}: must be a mapping")
    fields = {camel(f.name): f for f in dataclasses.fields(cls)}
    for key in data:
        if key not in fields:
            known = ", ".join(sorted(fields))
            variables = _variables(data[key])
            origin = f" (from {', '.join(variables)})" if variables else ""
            raise ConfigError(f"{_join(where, str(key))}{origin}: unknown setting (known: {known})")
    hints = typing.get_type_hints(cls)
    kwargs = {
        fields[key].name: _convert(hints[fields[key].name], value, _join(where, key))
        for key, value in data.items()
    }
    try:
        return cls(**kwargs)
    except ValueError as error:
        raise ConfigError(f"{_join(where, str(error))}") from error


def _variables(value: object) -> list[str]:
    """The env variables that wrote `value` or anything inside it."""
    if isinstance(value, _EnvText):
        return [value.variable]
    if isinstance(value, Mapping):
        return [v for item in value.values() for v in _variables(item)]
    return []


def _convert(tp: Any, value: Any, where: str) -> Any:
    if isinstance(value, _EnvText):
        try:
            return _convert(tp, _from_env(tp, value, where), where)
        except ConfigError as error:
            if value.variable in str(error):
                raise
            raise ConfigError(f"{error} (from {value.variable})") from error
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if dataclasses.is_dataclass(tp):
        return _build(typing.cast(type[Any], tp), value, where)
    if origin is Literal:
        # Choices are lowercase words that differ by more than case: `DEBUG` means `debug`.
        if isinstance(value, str) and value not in args and value.lower() in args:
            value = value.lower()
        if value not in args:
            raise ConfigError(f"{where}: {value!r} is not one of {', '.join(map(str, args))}")
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [arg for arg in args if arg is not type(None)]
        return _convert(inner, value, where)
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{where}: must be a list (YAML: [a, b]; an env var: a,b)")
        return tuple(_convert(args[0], item, f"{where}[{i}]") for i, item in enumerate(value))
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: must be a mapping")
        return {str(k): _convert(args[1], v, _join(where, str(k))) for k, v in value.items()}
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: must be true or false, not {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: must be an integer, not {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where}: must be a number, not {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: must be a string, not {value!r}")
        return value
    raise TypeError(f"config type {tp!r} at {where} is not supported")  # a programming error


_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def _from_env(tp: Any, text: _EnvText, where: str) -> Any:
    """An env override's text as the setting's own type (str stays str, whatever it says)."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        (inner,) = [arg for arg in args if arg is not type(None)]
        return _from_env(inner, text, where)
    if tp is str or origin is Literal:
        return str(text)
    raw = text.strip()
    try:
        if tp is bool:
            if raw.lower() in _TRUE | _FALSE:
                return raw.lower() in _TRUE
            raise ValueError("must be true or false")
        if tp is int:
            if not re.fullmatch(r"[+-]?\d+", raw):
                raise ValueError("must be an integer")
            return int(raw)
        if tp is float:
            try:
                return float(raw)
            except ValueError:
                raise ValueError("must be a number") from None
        if origin is tuple and not raw.startswith("["):
            # `a,b` as well as YAML's `[a, b]`: each item is read as the item type.
            items = [item.strip() for item in raw.split(",") if item.strip()]
            return [_EnvText(item, text.variable) for item in items]
        # Lists, maps and nested sections: YAML flow syntax, "[a, b]", "{arm64: 10}".
        import yaml  # only here, as in load()

        try:
            return yaml.safe_load(raw) if raw else None
        except yaml.YAMLError as error:
            raise ValueError(str(error)) from error
    except ValueError as error:
        raise ConfigError(f"{where} (from {text.variable}={_short(text)}): {error}") from error


def _short(text: str) -> str:
    return repr(cut(text, 60))


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def to_mapping(settings: Any) -> dict[str, Any]:
    """Settings back to plain camelCase data (for `archfit config`)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(settings):
        value = getattr(settings, f.name)
        if dataclasses.is_dataclass(value):
            value = to_mapping(value)
        elif isinstance(value, tuple):
            value = [to_mapping(v) if dataclasses.is_dataclass(v) else v for v in value]
        elif isinstance(value, dict):
            value = {
                k: to_mapping(v) if dataclasses.is_dataclass(v) else v for k, v in value.items()
            }
        out[camel(f.name)] = value
    return out
