"""What the Dockerfile promises, read without a Docker engine.

The final stage's USER, ENTRYPOINT, CMD and EXPOSE are parsed, and the build
context is computed from .dockerignore the way Docker's pattern matcher does it,
so tests can check the manifests against the image and replay the install step.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from tests.deploy.render import REPO

DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"


@dataclass(frozen=True)
class FinalStage:
    """The settings of the Dockerfile's last stage that a Deployment must agree with."""

    base: str
    user: str
    entrypoint: list[str]
    cmd: list[str]
    exposed: list[str]
    run_lines: list[str]


def final_stage(dockerfile: Path = DOCKERFILE) -> FinalStage:
    """Parse the last stage of a Dockerfile (line continuations joined, comments dropped)."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    args: dict[str, str] = {}
    stage: list[tuple[str, str]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, rest = line.partition(" ")
        instruction = instruction.upper()
        if instruction == "ARG" and not stage and "=" in rest:
            name, _, value = rest.partition("=")
            args[name.strip()] = value.strip()
        if instruction == "FROM":
            stage = []
        stage.append((instruction, rest.strip()))
    (base,) = [rest for instruction, rest in stage if instruction == "FROM"]
    base = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), base.split()[0])

    def last(instruction: str) -> str:
        values = [rest for i, rest in stage if i == instruction]
        assert values, f"the final stage has no {instruction}"
        return values[-1]

    def exec_form(instruction: str) -> list[str]:
        value = last(instruction)
        assert value.startswith("["), f"{instruction} should use the exec (JSON) form: {value}"
        return list(json.loads(value))

    return FinalStage(
        base=base,
        user=last("USER"),
        entrypoint=exec_form("ENTRYPOINT"),
        cmd=exec_form("CMD"),
        exposed=[port for i, rest in stage if i == "EXPOSE" for port in shlex.split(rest)],
        run_lines=[rest for i, rest in stage if i == "RUN"],
    )


@dataclass(frozen=True)
class _Pattern:
    regex: re.Pattern[str]
    exclusion: bool
    text: str


def _compile(line: str) -> _Pattern:
    exclusion = line.startswith("!")
    text = os.path.normpath(line[1:] if exclusion else line).lstrip("/")
    out, i = "", 0
    while i < len(text):
        if text.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif text.startswith("**", i):
            out, i = out + ".*", i + 2
        elif text[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif text[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(text[i]), i + 1
    return _Pattern(re.compile(out + r"\Z"), exclusion, text)


def _patterns(dockerignore: Path) -> list[_Pattern]:
    lines = [line.strip() for line in dockerignore.read_text().splitlines()]
    return [_compile(line) for line in lines if line and not line.startswith("#")]


def _excluded(path: str, patterns: list[_Pattern]) -> bool:
    # As moby's patternmatcher: a pattern matches a path or any of its parent
    # directories, and the last matching pattern decides.
    parents = [path]
    while "/" in parents[-1]:
        parents.append(parents[-1].rsplit("/", 1)[0])
    verdict = False
    for pattern in patterns:
        if any(pattern.regex.match(p) for p in parents):
            verdict = not pattern.exclusion
    return verdict


def build_context(root: Path = REPO, dockerignore: Path = DOCKERIGNORE) -> list[str]:
    """Paths (relative, sorted) of the files `docker build root` would send."""
    patterns = _patterns(dockerignore)
    reincluded = [p.text for p in patterns if p.exclusion]
    files: list[str] = []
    for directory, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(directory, root)
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        # Skip excluded trees that no `!` pattern could reach into.
        dirnames[:] = [
            d
            for d in dirnames
            if not _excluded(rel_dir + d, patterns)
            or any(r.startswith(rel_dir + d + "/") or r.startswith("**") for r in reincluded)
        ]
        files += [rel_dir + name for name in filenames if not _excluded(rel_dir + name, patterns)]
    return sorted(files)
