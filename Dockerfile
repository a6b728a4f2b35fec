# syntax=docker/dockerfile:1
# The rl-scheduler images, one per container of the Helm chart:
#   docker build --target scheduler -t rl-scheduler:0.1.0 .           # `rl-scheduler run`, no torch
#   docker build --target trainer -t rl-scheduler-trainer:0.1.0 .     # the trainer sidecar, with torch
# `make images` builds both with podman, from a Debian base made with mmdebstrap when no
# registry can be reached (hack/images.sh).
#
# Build arguments:
#   BASE_IMAGE         a Debian bookworm image with python3 and python3-venv (Python >= 3.11)
#   SCHEDULER_EXTRAS   the package's extras in the scheduler image (the live policy runs in
#                      numpy from safetensors: no torch)
#   TRAINER_EXTRAS     the package's extras in the trainer image
#   TORCH_INDEX_URL    where torch comes from; PyTorch's CPU-only index by default (PyPI's
#                      Linux wheel adds several GB of CUDA libraries). Empty: PyPI's.
#   TORCH_VERSION      the torch release
ARG BASE_IMAGE=python:3.11-slim-bookworm

# ---- build stages: a virtualenv each ------------------------------------------------
FROM ${BASE_IMAGE} AS venv
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PATH=/opt/rl-scheduler/bin:$PATH
RUN python3 -m venv /opt/rl-scheduler
WORKDIR /src

FROM venv AS scheduler-venv
ARG SCHEDULER_EXTRAS=operator
COPY pyproject.toml README.md LICENSE ./
COPY scheduler ./scheduler
RUN pip install "./[${SCHEDULER_EXTRAS}]"

FROM venv AS trainer-venv
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG TORCH_VERSION=2.15.0
ARG TRAINER_EXTRAS=operator,learn
# torch first, from its index, in a layer of its own that a change of the sources does
# not rebuild; the package's own `torch>=2.3` is then satisfied. C++ headers and CMake
# files serve only extensions built against torch: none here.
RUN PIP_INDEX_URL="${TORCH_INDEX_URL:-${PIP_INDEX_URL:-https://pypi.org/simple}}" \
        pip install "torch==${TORCH_VERSION}"
COPY pyproject.toml README.md LICENSE ./
COPY scheduler ./scheduler
RUN pip install "./[${TRAINER_EXTRAS}]" \
    && rm -rf /opt/rl-scheduler/lib/python3*/site-packages/torch/include \
              /opt/rl-scheduler/lib/python3*/site-packages/torch/share/cmake

# ---- runtime: the base, a non-root user, no writable root filesystem ----------------
FROM ${BASE_IMAGE} AS runtime
# The uid and gid the Helm chart runs as (podSecurityContext.runAsUser).
RUN groupadd --system --gid 10001 rl-scheduler \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /tmp \
               --shell /usr/sbin/nologin rl-scheduler
# HOME and the caches under /tmp: the chart mounts the root filesystem read-only and an
# emptyDir on /tmp.
ENV PATH=/opt/rl-scheduler/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    MPLCONFIGDIR=/tmp/matplotlib
USER 10001:10001
ENTRYPOINT ["rl-scheduler"]

FROM runtime AS trainer
COPY --from=trainer-venv /opt/rl-scheduler /opt/rl-scheduler
EXPOSE 10261
CMD ["trainer", "--shared-dir", "/var/lib/rl-scheduler"]

# The last stage is what a plain `docker build .` makes: the scheduler.
FROM runtime AS scheduler
COPY --from=scheduler-venv /opt/rl-scheduler /opt/rl-scheduler
EXPOSE 10259
CMD ["run"]
