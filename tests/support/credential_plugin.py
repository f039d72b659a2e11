"""A kubelet image credential provider plugin written by the tests: a real executable.

It speaks the v1 exec protocol on stdin/stdout and behaves as its `behaviour.json` says:
answer with a credential, hang (with a child process), crash, print garbage or answer far
too much. Every run appends one line to `calls.log`, so tests count invocations.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

NAME = "archfit-test-credential-provider"
API_VERSION = "credentialprovider.kubelet.k8s.io/v1"

_SOURCE = r'''#!{python}
"""Test credential provider: see tests/support/credential_plugin.py."""
import json, os, subprocess, sys, time

here = os.environ["PLUGIN_STATE_DIR"]
with open(os.path.join(here, "behaviour.json")) as handle:
    behaviour = json.load(handle)
request = json.loads(sys.stdin.read())
with open(os.path.join(here, "calls.log"), "a") as log:
    log.write(json.dumps({{"request": request, "env": sorted(os.environ)}}) + "\n")
mode = behaviour["mode"]
if mode == "hang":
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(os.path.join(here, "child.pid"), "w") as handle:
        handle.write(str(child.pid))
    time.sleep(600)
if mode == "crash":
    sys.stderr.write("boom: " + behaviour["password"] + "\n")
    sys.exit(3)
if mode == "garbage":
    sys.stdout.write("not json at all " + behaviour["password"])
    sys.exit(0)
answer = {{
    "apiVersion": behaviour.get("apiVersion", request["apiVersion"]),
    "kind": "CredentialProviderResponse",
    "cacheKeyType": behaviour.get("cacheKeyType", "Image"),
    "auth": {{
        behaviour["key"]: {{"username": behaviour["username"], "password": behaviour["password"]}},
    }},
}}
if "cacheDuration" in behaviour:
    answer["cacheDuration"] = behaviour["cacheDuration"]
if mode == "oversized":
    answer["padding"] = "x" * behaviour["padding"]
sys.stdout.write(json.dumps(answer))
if mode in ("group_child", "setsid_child"):
    # Answer, then leave a child behind that keeps stdout open, in the plugin's process
    # group or in a session of its own.
    sys.stdout.flush()
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"],
        start_new_session=mode == "setsid_child",
    )
    with open(os.path.join(here, "child.pid"), "w") as handle:
        handle.write(str(child.pid))
'''


@dataclass
class ProviderPlugin:
    """The plugin binary in `bin_dir`, its state directory and its config file."""

    bin_dir: Path
    state_dir: Path
    config_path: Path

    @classmethod
    def install(
        cls, root: Path, match_images: list[str], default_cache: str = "5m"
    ) -> ProviderPlugin:
        """Write the executable, a CredentialProviderConfig naming it, and an empty state."""
        bin_dir, state_dir = root / "bin", root / "state"
        bin_dir.mkdir(parents=True)
        state_dir.mkdir(parents=True)
        binary = bin_dir / NAME
        binary.write_text(_SOURCE.format(python=sys.executable))
        binary.chmod(0o755)
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1",
            "kind": "CredentialProviderConfig",
            "providers": [
                {
                    "name": NAME,
                    "matchImages": match_images,
                    "defaultCacheDuration": default_cache,
                    "apiVersion": API_VERSION,
                    "env": [{"name": "PLUGIN_STATE_DIR", "value": str(state_dir)}],
                }
            ],
        }
        config_path = root / "credential-providers.yaml"
        config_path.write_text(yaml.safe_dump(config))
        return cls(bin_dir, state_dir, config_path)

    def behave(self, mode: str = "ok", **fields: Any) -> None:
        """Set what the next runs do: ok, hang, crash, garbage, oversized, or answer and
        leave a child holding stdout (group_child, setsid_child)."""
        (self.state_dir / "behaviour.json").write_text(json.dumps({"mode": mode, **fields}))

    def calls(self) -> list[dict[str, Any]]:
        """Every run so far: the request it read and the names in its environment."""
        log = self.state_dir / "calls.log"
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_text().splitlines()]

    def child_alive(self) -> bool:
        """Whether the child a hanging run started is still running."""
        pid = int((self.state_dir / "child.pid").read_text())
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        # A killed child of a killed parent is a zombie until init reaps it.
        try:
            with open(f"/proc/{pid}/stat") as stat:
                return stat.read().split(") ", 1)[1][0] != "Z"
        except FileNotFoundError:
            return False

    def settings(self, **overrides: Any) -> dict[str, Any]:
        """The `registry.credentialProviders` section for this plugin (camelCase)."""
        return {"configPath": str(self.config_path), "binDir": str(self.bin_dir), **overrides}
