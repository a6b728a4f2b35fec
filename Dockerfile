# syntax=docker/dockerfile:1
# The rl-scheduler image: `rl-scheduler run` (the scheduler), and the trainer sidecar.
#   docker build -t rl-scheduler:0.1.0 .
# Two stages: the first builds a virtualenv, the second copies only that venv onto a
# slim Python, runs as a non-root user and needs no writable root filesystem.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PATH=/opt/rl-scheduler/bin:$PATH
RUN python -m venv /opt/rl-scheduler
# torch from PyTorch's CPU-only index first: PyPI's default Linux wheel pulls in several
# GB of CUDA libraries, and the scheduler scores on the CPU. The package's own
# `torch>=2.3` is then already satisfied, so pip keeps this build.
ARG TORCH_VERSION=2.15.0
RUN pip install --index-url https://download.pytorch.org/whl/cpu "torch==${TORCH_VERSION}"
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY scheduler ./scheduler
# C++ headers and CMake files serve only extensions built against torch: none here.
RUN pip install "./[operator,learn]" \
    && rm -rf /opt/rl-scheduler/lib/python3*/site-packages/torch/include \
              /opt/rl-scheduler/lib/python3*/site-packages/torch/share/cmake

FROM ${PYTHON_IMAGE}
# The uid and gid the Helm chart runs as (podSecurityContext.runAsUser).
RUN groupadd --system --gid 10001 rl-scheduler \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /tmp \
               --shell /usr/sbin/nologin rl-scheduler
COPY --from=build /opt/rl-scheduler /opt/rl-scheduler
# HOME and MPLCONFIGDIR under /tmp: the chart mounts the root filesystem read-only and
# an emptyDir on /tmp.
ENV PATH=/opt/rl-scheduler/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    MPLCONFIGDIR=/tmp/matplotlib
USER 10001:10001
EXPOSE 10260
ENTRYPOINT ["rl-scheduler"]
CMD ["run"]
