#!/usr/bin/env bash
# One command for every check: installs what the suite needs (Debian packages, a
# venv, the Go-built control plane), then lint, types, import contracts, and all tests.
# Extra arguments go to pytest, e.g. `bash tests/run.sh tests/unit -x`.
set -euo pipefail
cd "$(dirname "$0")/.."

# Real servers the integration tests start: CNCF distribution, redis, htpasswd, a forward
# proxy; promtool (Debian's prometheus package) to check the alert rules; and what builds
# and runs the image (tests/image): buildah, mmdebstrap, runc, and qemu-user-static with
# arch-test for the arm64 image on an amd64 machine; chromium renders `archfit audit -o html`
# headless (tests/support/browser.py).
packages=(docker-registry redis-server apache2-utils tinyproxy prometheus buildah mmdebstrap
          runc qemu-user-static arch-test chromium)
sudo_=""; [ "$(id -u)" = 0 ] || sudo_="sudo"
missing=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "run.sh: installing ${missing[*]}"
  $sudo_ apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

# The proxy tests need a host name other than localhost that resolves to 127.0.0.1
# (proxies never proxy localhost). Usually the machine's own name does; if not, add one.
if ! getent ahostsv4 "$(hostname)" 2>/dev/null | grep -q '^127\.0\.0\.1 ' \
   && ! getent ahostsv4 archfit-loopback.test >/dev/null 2>&1; then
  echo "run.sh: mapping archfit-loopback.test to 127.0.0.1 in /etc/hosts"
  echo "127.0.0.1 archfit-loopback.test" | $sudo_ tee -a /etc/hosts >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
# The locked versions, checked against their hashes (tests/lock.sh refreshes the lock),
# then archfit itself without letting pip pick any other dependency.
.venv/bin/pip install -q --disable-pip-version-check --require-hashes -r requirements-test.lock
.venv/bin/pip install -q --disable-pip-version-check --no-deps -e .

in_ci() { .venv/bin/python -c 'import sys; from tests.support.prerequisites import in_ci; sys.exit(not in_ci())'; }
if in_ci || [ $# -eq 0 ]; then
  # The image tests build both architectures, arm64 under qemu (minutes of CPU). Started
  # here, at low priority, the builds overlap the lint and the minimum-versions suite; the
  # tests then find the images built (build.sh takes a lock per architecture and rebuilds
  # nothing that has not changed). A build that fails here runs again in its test, which
  # says why.
  image_log="${TMPDIR:-/tmp}/archfit-image-build.$$.log"
  : "${ARCHFIT_IMAGE_ARCHES:=amd64,arm64}"  # as tests/image/conftest.py reads it
  echo "run.sh: building the images in the background (log: $image_log)"
  ( for arch in ${ARCHFIT_IMAGE_ARCHES//,/ }; do nice -n 10 bash tests/image/build.sh "$arch" >/dev/null || true; done ) \
    >"$image_log" 2>&1 </dev/null &
fi
echo "run.sh: ruff" && .venv/bin/ruff check . && .venv/bin/ruff format --check .
echo "run.sh: mypy" && .venv/bin/mypy
echo "run.sh: import contracts" && .venv/bin/lint-imports

# The e2e control plane is built from Go modules into a cache outside the clone;
# a warm cache makes this a no-op. Without Go outside CI the e2e tests skip loudly.
# What counts as CI is decided in one place, tests/support/prerequisites.in_ci.
if command -v go >/dev/null 2>&1 || in_ci; then
  echo "run.sh: e2e binaries" && bash tests/e2e/build.sh
  echo "run.sh: Karpenter (kwok provider) for the autoscaler e2e test" && bash tests/e2e/build-karpenter.sh
  echo "run.sh: clientgo-observe for the kubeconfig differential test" && bash tests/clientgo/build.sh
  if [ -f tests/deploy/build-tools.sh ]; then bash tests/deploy/build-tools.sh; fi
fi

# The minimum-versions job: a second venv with every direct dependency at the lowest version
# pyproject.toml allows (requirements-min.lock, from tests/lock.sh), running the unit and app
# suites, so a floor that is too low fails here rather than at a user's import. Always in CI;
# locally only for a full run (no pytest arguments), since it costs about a minute.
if in_ci || [ $# -eq 0 ]; then
  echo "run.sh: minimum versions (.venv-min, requirements-min.lock): tests/unit tests/app"
  [ -x .venv-min/bin/python ] || python3 -m venv .venv-min
  .venv-min/bin/pip install -q --disable-pip-version-check --require-hashes -r requirements-min.lock
  .venv-min/bin/pip install -q --disable-pip-version-check --no-deps -e .
  .venv-min/bin/pip check
  .venv-min/bin/pytest -q -p no:cacheprovider tests/unit tests/app
fi

echo "run.sh: pytest"
exec .venv/bin/pytest "$@"
