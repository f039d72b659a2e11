# syntax=docker/dockerfile:1
# archfit: kube-scheduler extender and admission webhook image. Publish it multi-arch
# (archfit's own pods may land on arm64 or amd64 nodes), built from the repository root:
#
#   version="$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' extender/__init__.py)"
#   base="python:3.11-slim-bookworm@sha256:..."   # the index digest: see below
#   docker buildx build --platform linux/amd64,linux/arm64 -t "ghcr.io/archfit/archfit:$version" \
#     --build-arg PYTHON_IMAGE="$base" --build-arg VERSION="$version" \
#     --build-arg REVISION="$(git rev-parse HEAD)" .
#
# The version is written once, in extender/__init__.py; the labels below are filled from
# these build arguments. Pin the base by the digest of its multi-arch index, so a rebuild
# gets the same Python: `archfit inspect docker.io/library/python:3.11-slim-bookworm` (or
# `docker buildx imagetools inspect python:3.11-slim-bookworm`) prints it. Without the
# argument the tag below is used, which moves with every Debian and Python patch release.
# CI builds this file with buildah on a local Debian base: tests/image/build.sh.
ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore
# A venv without pip: the image's pip installs into it, so the runtime carries
# only archfit and its dependencies (all of which ship wheels for amd64 and arm64).
RUN python -m venv --without-pip /opt/archfit
WORKDIR /src
# Dependencies come only from the lock (tests/lock.sh), every file checked against
# its hash; this layer is reused until the lock changes.
COPY requirements.lock ./
RUN pip --python /opt/archfit/bin/python install --require-hashes --no-deps -r requirements.lock
# .dockerignore admits only pyproject.toml, docs/package.md (the package description), LICENSE,
# requirements.lock and extender/.
COPY . .
# archfit itself, with nothing unlocked pulled in; `pip check` fails the build if the
# lock misses a dependency (the redis extra is in the lock, for cache.url: redis://).
RUN pip --python /opt/archfit/bin/python install --no-deps . \
    && pip --python /opt/archfit/bin/python check \
    && /opt/archfit/bin/archfit --help >/dev/null
# Built-in defaults, so the image also runs without a mounted config; the
# Deployment mounts its ConfigMap over this directory.
RUN mkdir -p /etc/archfit \
    && printf '# archfit defaults; mount a ConfigMap at /etc/archfit to change them.\n{}\n' \
        > /etc/archfit/archfit.yaml

FROM ${PYTHON_IMAGE}
# A numeric, non-root user so runAsNonRoot can verify it without a passwd lookup.
# The base's own pip, setuptools and wheel are of no use at run time (archfit's venv has
# none and does not see the base's site-packages): they go, so nothing in the running
# image can install packages, and their CVEs stop showing up in scans of it.
RUN groupadd --system --gid 65532 archfit \
    && useradd --system --uid 65532 --gid 65532 --no-create-home \
        --home-dir /nonexistent --shell /usr/sbin/nologin archfit \
    && for module in pip setuptools pkg_resources _distutils_hack wheel; do \
        dir="$(python -c 'import importlib.util as u, sys; s = u.find_spec(sys.argv[1]); \
            print(s.submodule_search_locations[0] if s and s.submodule_search_locations else "")' \
            "$module")"; \
        [ -z "$dir" ] || rm -rf "$dir" "$dir"-*.dist-info "$(dirname "$dir")"/distutils-precedence.pth; \
    done \
    && rm -f /usr/local/bin/pip /usr/local/bin/pip3* /usr/bin/pip /usr/bin/pip3*
COPY --from=build /opt/archfit /opt/archfit
COPY --from=build /etc/archfit /etc/archfit
# Bytecode was compiled at install time; a read-only root filesystem can't take more.
ENV PATH=/opt/archfit/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
WORKDIR /
# The extender (verbs, health, metrics) and the admission webhook (webhook.enabled: true).
EXPOSE 8888 8443
ENTRYPOINT ["archfit"]
CMD ["serve", "--config", "/etc/archfit/archfit.yaml"]
# Last, so a new commit rebuilds only this step.
ARG VERSION=unknown
ARG REVISION=unknown
ARG SOURCE=https://github.com/archfit/archfit
LABEL org.opencontainers.image.title="archfit" \
      org.opencontainers.image.description="Keeps Kubernetes pods off nodes their images cannot run on: a kube-scheduler extender, an admission webhook and policy, and an arm64 readiness audit" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}"
