#!/usr/bin/env bash
# Refresh the dependency locks from pyproject.toml, with hashes, for every platform
# the image is published for (universal: amd64 and arm64, Python 3.11+):
#   requirements.lock       what the image installs: archfit's dependencies and the redis extra
#   requirements-test.lock  what CI's venv installs: the same pins plus the test, lint and
#                           bench extras
#   requirements-min.lock   the minimum-versions venv of tests/run.sh: every direct dependency
#                           (runtime, redis and test extras) at the lowest version pyproject.toml
#                           allows, so a wrong floor fails CI instead of a user's install
# The test lock is constrained by the image lock, so CI tests exactly the versions
# the image ships. Pass --upgrade to move every pin to the newest release.
set -euo pipefail
cd "$(dirname "$0")/.."
uv=.venv/bin/uv
[ -x "$uv" ] || { python3 -m venv .venv && .venv/bin/pip install -q uv; }
common=(--quiet --generate-hashes --universal --python-version 3.11
        --custom-compile-command "bash tests/lock.sh")
"$uv" pip compile "${common[@]}" "$@" pyproject.toml --extra redis -o requirements.lock
"$uv" pip compile "${common[@]}" "$@" pyproject.toml --extra redis --extra test \
    --extra lint --extra bench --constraint requirements.lock -o requirements-test.lock
"$uv" pip compile "${common[@]}" "$@" pyproject.toml --extra redis --extra test \
    --resolution lowest-direct -o requirements-min.lock
