"""The settings' schema: frozen dataclasses grouped by concern, a docstring per field, each
validated as it is built (a ValueError that names the key).

A YAML key is the camelCase of its field's name (`camel`); extender.config.loading reads them
from a file and `ARCHFIT_` env vars, extender.config.docs documents them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from extender.config.registry_settings import CacheSettings, RegistrySettings
from extender.core.placement import DEFAULT_ARCH_PREFERENCE
from extender.core.platforms import ARCH_LABEL, MAX_SCORE, Platform, normalize
from extender.core.platforms import parse as parse_platform

ARCHITECTURES = frozenset(
    {"386", "amd64", "arm", "arm64", "loong64", "mips", "mips64", "mips64le", "mipsle", "ppc64"}
    | {"ppc64le", "riscv64", "s390x", "wasm"}
)
"""What a node's kubernetes.io/arch can say: kubelet writes Go's runtime.GOARCH, and these are
the GOARCH values of `go tool dist list` (aliases such as aarch64 are normalised first)."""


INFRASTRUCTURE_NAMESPACES = (
    "kube-system",
    "kube-node-lease",
    "kube-public",
    "karpenter",
    "tigera-operator",
    "calico-system",
    "calico-apiserver",
    "kube-flannel",
    "longhorn-system",
    "rook-ceph",
    "openebs",
)
"""Where the control plane, autoscalers (Karpenter's own namespace; Cluster Autoscaler runs in
kube-system) and network (Calico's operator install, flannel) and storage add-ons (Longhorn,
Rook, OpenEBS) run by their projects' documented defaults. A pod held there while archfit needs
a node, an address or a volume to come back would wait for archfit forever."""


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
    event_loop: Literal["asyncio", "uvloop", "auto"] = "auto"
    """The event loop: `auto` takes uvloop when installed (a dependency on Linux, so in the
    image), else asyncio's own; `uvloop` refuses to start without it; `asyncio` is asyncio's.
    On uvloop the webhook's TLS runs in uvloop's compiled implementation: a pod admission
    cost ~10% less CPU than on asyncio's loop (python -m bench.webhook_cost)."""
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
    excluded_namespaces: tuple[str, ...] = INFRASTRUCTURE_NAMESPACES
    """Namespaces archfit leaves alone: their pods are never filtered, scored, constrained or
    held. The default is the control plane's and the usual homes of autoscalers and network
    and storage add-ons, which must start while archfit is down (docs/webhook.md,
    "Infrastructure namespaces"); archfit's own namespace is never held either way."""
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
    """Kubeconfig file, as kubectl's --kubeconfig: one file, which must exist (empty:
    $KUBECONFIG's list or ~/.kube/config); set, `auto` uses it first."""
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
    """Pods per list request of the pod list-watch the watcher shares with the admission
    policy's publisher."""
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
    """Publish the platforms of every image the cluster's pods name as the parameter of
    archfit's MutatingAdmissionPolicy (Kubernetes 1.36+), so kube-apiserver constrains known
    images and holds unknown ones while archfit is down or unreachable; every replica reads
    it back as a cache tier (docs/webhook.md, "When archfit is down"). Needs API access; on a
    cluster without admissionregistration.k8s.io/v1 policies, serve says so once and runs
    without it."""
    parameter_name: str = "archfit"
    """The cluster-scoped ImagePlatforms object (archfit.io/v1alpha1) the paramRef names."""
    lease_name: str = "archfit-policy-publisher"
    """The coordination.k8s.io Lease (in archfit's namespace) that elects the one publisher."""
    publish_seconds: float = 5.0
    """How often the leader writes the parameter when what it says changed: an image new to
    the cluster's pods is listed within this plus one lookup."""
    refresh_seconds: float = 300.0
    """An image is resolved again this long after its last lookup, so a moved tag shows."""
    unused_seconds: float = 7 * 24 * 3600.0
    """An image leaves the parameter this long after the last pod that named it went (a
    running pod keeps it, however old its CREATE)."""
    max_bytes: int = 1_000_000
    """Bound on the parameter's spec as JSON, below etcd's 1.5 MiB request limit; past it
    images are left out round-robin across namespaces, each namespace's least recently used
    first (their pods are held as unknown ones are)."""
    max_entries: int = 50_000
    """Images the parameter lists at most, beside the byte bound (left out as above)."""

    def __post_init__(self) -> None:
        if not self.parameter_name or not self.lease_name:
            raise ValueError("parameterName and leaseName: must not be empty")
        if not 0.5 <= self.publish_seconds <= 3600:
            raise ValueError("publishSeconds: must be in 0.5..3600")
        if self.refresh_seconds < 10:
            raise ValueError("refreshSeconds: must be at least 10")
        if self.unused_seconds < 1:
            raise ValueError("unusedSeconds: must be at least 1")
        if not 10_000 <= self.max_bytes <= 1_400_000:
            raise ValueError("maxBytes: must be in 10000..1400000 (etcd takes 1.5 MiB at most)")
        if self.max_entries < 1:
            raise ValueError("maxEntries: must be at least 1")


@dataclass(frozen=True)
class CapacitySettings:
    enabled: bool = True
    """Tell, on the replica holding `leaseName`, when a pending pod's platforms (the
    constraint the webhook, the releaser or the admission policy wrote, or what its images run
    on) meet no node, no Karpenter NodePool and nothing `declared`: an Event on the pod and
    its controller, a metric, and `archfit audit` blockers. It never changes a decision
    (docs/operations.md, "Capacity"). Needs API access."""
    lease_name: str = "archfit-capacity"
    """The coordination.k8s.io Lease (in archfit's namespace) that elects the one replica
    that checks pending pods and writes the capacity Events."""
    declared: tuple[str, ...] = ()
    """Platforms (`linux/amd64`) that capacity archfit cannot read can add: Cluster
    Autoscaler node groups scaled to zero, a cloud's node pools. Karpenter NodePools and
    nodes are read, not declared."""
    node_pools: bool = True
    """List-watch Karpenter NodePools (karpenter.sh/v1); a cluster without that API has none."""
    events_per_second: float = 5.0
    """Capacity Events written per second at most (one on the pod, one per controller)."""
    page_size: int = 500
    """Pending pods per list request."""

    def __post_init__(self) -> None:
        if not self.lease_name:
            raise ValueError("leaseName: must not be empty")
        for index, text in enumerate(self.declared):
            try:
                parse_platform(text)
            except ValueError as error:
                raise ValueError(f"declared[{index}]: {error}") from None
        if self.events_per_second <= 0:
            raise ValueError("eventsPerSecond: must be above 0")
        if not 10 <= self.page_size <= 5000:
            raise ValueError("pageSize: must be in 10..5000")

    @property
    def declared_platforms(self) -> frozenset[Platform]:
        return frozenset(parse_platform(text) for text in self.declared)


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
    capacity: CapacitySettings = field(default_factory=CapacitySettings)
    """Pending pods whose platforms meet none of the cluster's capacity: told, never changed."""


def camel(name: str) -> str:
    """snake_case field name → camelCase YAML key."""
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)
