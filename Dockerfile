# gpu-oncall: slim, non-root, runbooks baked in (they ship as package data). Build:
#   docker build -t registry.example.com/gpu-infra/gpu-oncall:0.1.0 .
# The base is pinned to an exact Python/Debian release; pin its digest too in your registry
# mirror (`--build-arg PYTHON_IMAGE=python:3.11.11-slim-bookworm@sha256:...`).
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY integrations ./integrations
COPY storage ./storage
COPY runbooks ./runbooks
RUN python -m venv /opt/gpu-oncall \
 && /opt/gpu-oncall/bin/pip install --upgrade pip \
 && /opt/gpu-oncall/bin/pip install .

FROM ${PYTHON_IMAGE}
# No compiler, no pip cache, no source tree: the virtualenv only. UID/GID 10001 matches the
# Deployment's securityContext; the root filesystem is read-only at run time (writes go to /tmp).
RUN groupadd --system --gid 10001 oncall \
 && useradd --system --uid 10001 --gid oncall --home-dir /nonexistent --shell /usr/sbin/nologin oncall
COPY --from=build /opt/gpu-oncall /opt/gpu-oncall
ENV PATH=/opt/gpu-oncall/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    GPU_ONCALL_SERVER__HOST=0.0.0.0 \
    GPU_ONCALL_SERVER__PORT=8080
USER 10001:10001
WORKDIR /tmp
EXPOSE 8080
ENTRYPOINT ["gpu-oncall"]
CMD ["serve"]
