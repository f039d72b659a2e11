"""Taking archfit out of admission without stranding a pod (`archfit uninstall`).

The MutatingAdmissionPolicyBinding and the MutatingWebhookConfiguration go first, so that
nothing holds a new pod; then every held pod is released. The same order in the other one
would strand pods: released pods are held again by a binding still in place, and a binding
left behind holds every new pod of an image it does not list, with no archfit to release it.
The Helm chart's pre-delete hook runs this; deploy/README.md, "Uninstalling", is the procedure.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from extender.kube.client.errors import ApiError

if TYPE_CHECKING:  # the command line reads the names below; the client loads on use
    from extender.kube.client.api import KubeApi

BINDING = "archfit"
"""The name the shipped manifests and the chart give the MutatingAdmissionPolicyBinding."""

SETTLE_SECONDS = 10.0
"""How long after the deletions held pods are looked for once more: a pod CREATE being
admitted at that moment may still be held (kube-apiserver calls archfit's webhook up to twice,
3 s each as shipped) and is written after the first look."""

RELEASED = "released by `archfit uninstall`, unconstrained"


@dataclass
class Removal:
    """What `archfit uninstall` did."""

    deleted: list[str] = field(default_factory=list)
    """`Kind name` of each admission object it deleted (none: they were gone already)."""
    released: list[tuple[str, str]] = field(default_factory=list)
    """(namespace, name) of each pod it released."""


def _delete(api: KubeApi, path: str) -> bool:
    """DELETE one object; False when it is not there (or the cluster serves no such kind)."""
    from extender.kube.client.watching import REQUEST_TIMEOUT

    try:
        api.delete(path, timeout=REQUEST_TIMEOUT)
    except ApiError as error:
        if error.status == 404:
            return False
        raise
    return True


def stop_holding(api: KubeApi, binding: str, webhook_configuration: str) -> list[str]:
    """Delete archfit's policy binding and pod webhook configuration. Blocking."""
    from extender.kube.webhook_certs import ADMISSION_API

    objects = [
        ("MutatingAdmissionPolicyBinding", "mutatingadmissionpolicybindings", binding),
        ("MutatingWebhookConfiguration", "mutatingwebhookconfigurations", webhook_configuration),
    ]
    return [
        f"{kind} {name}"
        for kind, plural, name in objects
        if _delete(api, f"{ADMISSION_API}/{plural}/{name}")
    ]


async def uninstall(
    api: KubeApi,
    binding: str,
    webhook_configuration: str,
    settle_seconds: float,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> Removal:
    """Stop holding, release every held pod, and once more after `settle_seconds`."""
    from extender.kube.gated_pods import release_all

    removal = Removal(await asyncio.to_thread(stop_holding, api, binding, webhook_configuration))
    removal.released += await release_all(api, None, RELEASED)
    await sleep(settle_seconds)
    removal.released += await release_all(api, None, RELEASED)
    return removal
