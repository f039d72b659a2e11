"""archfit's errors: one root, one family per kind of failure, each answered in one place.

    ArchfitError
    ├── ClientError             the client is at fault, not archfit
    │   ├── InputError          its input cannot be read: 400, or "allowed" at admission
    │   │   ├── WireError       the body is not the wire type it should be (ExtenderArgs,
    │   │   │   │               AdmissionReview: one class for both)
    │   │   │   └── NodeDecodeError  a full v1.Node of the request cannot be read
    │   │   ├── JsonError       JSON that cannot be read or written within the bounds
    │   │   ├── PodError        the pod is not a pod archfit can read
    │   │   ├── ShapeError      the pod's affinity is not a shape a patch can extend
    │   │   └── ShareError      an arm64-share annotation that is no percentage (steering)
    │   ├── BodyTimeout         the body did not arrive within server.bodyTimeoutSeconds: 408
    │   └── UnknownPath         a POST to a path archfit does not serve: 404 naming the ones
    │                           it does (a urlPrefix without server.prefix)
    ├── SetupError              archfit cannot run as configured; the message names the
    │   │                       setting (`archfit serve` exits 2 with `summary: message`)
    │   ├── ConfigError         a setting is invalid
    │   ├── EventLoopUnavailable
    │   ├── ResolverSetupError  the registry client cannot be built (CA bundle, plugins, proxy)
    │   ├── ServerCertificateError
    │   ├── NoNodeIndex         NodeNames arrived but archfit list-watches no Nodes
    │   ├── KubeConfigError     the API server cannot be reached as the settings ask
    │   ├── PluginConfigError   the CredentialProviderConfig file is invalid (registry)
    │   └── WebhookSetupError
    │       └── CertificateSetupError  the self-managed certificate cannot be kept
    ├── ListenError             a listener cannot open its port (`archfit serve` exits 1)
    ├── CertificateRefused      a certificate pair loads but cannot serve
    ├── ConflictError           the cluster changed under archfit: read again, then retry
    │   ├── PodChanged, ReleaseRefused   (gates)
    │   ├── Expired             a watch's resourceVersion is gone (410)
    │   └── LostRace            another replica wrote the Lease first
    ├── CredentialSourceError   a pull secret, docker config or plugin gave nothing usable
    │   └── CredentialError, PluginAnswerError, PluginFailed   (registry)
    ├── ApiError                the Kubernetes API server answered a call with an error
    │                           status (extender.kube: its status, reason, body, headers)
    ├── ClusterReadError        the API did not answer a read archfit needs
    │   ├── FleetError          the fleet could not be read (audit)
    │   └── WatchFailed         a watch ended in an ERROR event (kube.watching)
    ├── RegistryError           a registry lookup failed (extender.registry.errors has its tree)
    └── AuditInputError         a workload or quantity in the cluster cannot be read (audit)

The classes live where they are raised and are declared on the family here, but for those
raised in one layer and answered in another (WireError, NoNodeIndex), which live here; the
ones that were ValueErrors stay ValueErrors too, so no caller changes. `cli.serve._serve` catches
the two start-up roots (SetupError, ListenError); errors raised serving a request become
HTTP answers in one place, extender.serving.error_answers, for both apps.
"""

from __future__ import annotations


class ArchfitError(Exception):
    """Any failure archfit itself names."""


class ClientError(ArchfitError):
    """The client is at fault, not archfit."""


class InputError(ClientError, ValueError):
    """A client's input cannot be read: answered 400, or "allowed" at admission."""


class WireError(InputError):
    """The body is not the wire type it should be; the message says what is wrong."""


class UnknownPath(ClientError):
    """A POST to a path the app does not serve; the message names the paths it does."""


class SetupError(ArchfitError):
    """archfit cannot run as configured; the message names the setting."""

    summary = "bad config"
    """What `archfit serve` prints before the message: `archfit: <summary>: <message>`."""


class NoNodeIndex(SetupError):
    """NodeNames arrived but archfit list-watches no Nodes: the extender's `Error` says so."""

    def __init__(self) -> None:
        super().__init__(
            "archfit got NodeNames (nodeCacheCapable: true) but has no node index: "
            "enable kubernetes.nodeIndex with API access, or set nodeCacheCapable: false"
        )


class WebhookSetupError(SetupError):
    """The webhook cannot start as configured; the message names the setting."""

    summary = "cannot start the webhook"


class ResolverSetupError(SetupError):
    """The registry client cannot be built: a CA bundle, plugin config or proxy is unusable."""


class ListenError(ArchfitError):
    """A listener cannot open its port; the message names the address and why."""


class CredentialSourceError(ArchfitError):
    """A credential source (pull secret, docker config, plugin) gave nothing usable."""


class ConflictError(ArchfitError):
    """The cluster changed under archfit: read again, then retry."""


class ClusterReadError(ArchfitError):
    """The Kubernetes API did not answer a read archfit needs."""


class AuditInputError(ArchfitError, ValueError):
    """An object archfit reads from the cluster for a report cannot be read."""
