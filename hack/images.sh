#!/usr/bin/env bash
# Builds the rl-scheduler images with podman, without Docker and without a registry:
#
#   hack/images.sh [scheduler] [trainer] [pause]    # default: scheduler
#   hack/images.sh --print-ref scheduler            # the name a pod spec uses
#   hack/images.sh --id scheduler                   # its image id (its config's digest)
#   hack/images.sh --save scheduler FILE            # a docker-archive, for `ctr import`
#
# The base is $BASE_IMAGE if set; otherwise python:3.11-slim-bookworm when a registry
# answers, else a Debian bookworm made with mmdebstrap (python3, python3-venv,
# ca-certificates; cached in .cache/images/). pip inside the build reaches PyPI through
# the host's network and CA bundle. `pause` is the pod sandbox image of the real node,
# built from the pinned Kubernetes module's own build/pause/linux/pause.c.
#
# Everything podman keeps (layers, images) lives in .cache/images/podman, so a warm
# cache rebuilds only what changed and `rm -rf .cache` removes it all.
# Exit codes: 0 ok, 2 bad usage, 4 a build failed.
set -euo pipefail

HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT_DIR="$(cd "${HACK_DIR}/.." && pwd)"
# shellcheck source=/dev/null  # plain KEY=VALUE lines
source "${HACK_DIR}/versions.env"
CACHE_DIR="${RL_DEVCLUSTER_CACHE:-${ROOT_DIR}/.cache}"
IMAGES_DIR="${CACHE_DIR}/images"
VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' "${ROOT_DIR}/pyproject.toml")"
PUBLIC_BASE="python:3.11-slim-bookworm"
PAUSE_ALIAS="registry.k8s.io/pause:3.10"
DEBIAN_BASE="localhost/rl-scheduler-base:bookworm"
DEBIAN_PACKAGES="python3,python3-venv,ca-certificates,passwd"
HOST_CA="${HOST_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"

die() {
  local code="$1"; shift
  echo "images: error: $*" >&2
  exit "${code}"
}

# podman with this cache's storage and a configuration that works as root without
# CAP_SYS_RESOURCE (podman's default ulimits need it) and with runc (crun refuses
# hybrid cgroups).
setup_podman() {
  command -v podman >/dev/null || die 4 "podman is missing: run 'make real-node-deps' (Debian's podman)"
  mkdir -p "${IMAGES_DIR}/podman/storage" "${IMAGES_DIR}/podman/run"
  cat >"${IMAGES_DIR}/podman/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "${IMAGES_DIR}/podman/storage"
runroot = "${IMAGES_DIR}/podman/run"
EOF
  cat >"${IMAGES_DIR}/podman/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
  export CONTAINERS_STORAGE_CONF="${IMAGES_DIR}/podman/storage.conf"
  export CONTAINERS_CONF="${IMAGES_DIR}/podman/containers.conf"
}

image_exists() { podman image exists "$1"; }

# The name the chart's pods use: a bare name is docker.io/library/<name> to a kubelet.
ref_of() {
  case "$1" in
    scheduler) echo "docker.io/library/rl-scheduler:${VERSION}" ;;
    trainer) echo "docker.io/library/rl-scheduler-trainer:${VERSION}" ;;
    pause) echo "registry.k8s.io/pause:${PAUSE_VERSION}" ;;
    *) die 2 "unknown image '$1'; choose from scheduler, trainer, pause" ;;
  esac
}

debian_base() {
  local tar="${IMAGES_DIR}/base-bookworm.tar" stamp="${IMAGES_DIR}/base-bookworm.packages"
  if image_exists "${DEBIAN_BASE}" && [[ "$(cat "${stamp}" 2>/dev/null)" == "${DEBIAN_PACKAGES}" ]]; then
    return 0
  fi
  command -v mmdebstrap >/dev/null || die 4 "mmdebstrap is missing: run 'make real-node-deps'"
  echo "==> base: mmdebstrap bookworm (${DEBIAN_PACKAGES}), about a minute" >&2
  local start=${SECONDS}
  # Slim like the public Python images: no documentation, manual pages or locales
  # (copyright files stay), with bookworm's security updates.
  mmdebstrap --quiet --variant=minbase --include="${DEBIAN_PACKAGES}" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    bookworm "${tar}" \
    "deb http://deb.debian.org/debian bookworm main" \
    "deb http://deb.debian.org/debian bookworm-updates main" \
    "deb http://deb.debian.org/debian-security bookworm-security main" ||
    die 4 "mmdebstrap failed"
  podman import --quiet \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["python3"]' "${tar}" "${DEBIAN_BASE}" >/dev/null || die 4 "podman import of the base failed"
  rm -f "${tar}"
  echo "${DEBIAN_PACKAGES}" >"${stamp}"
  echo "==> base: ${DEBIAN_BASE} in $((SECONDS - start)) s" >&2
}

# The base image to build on: $BASE_IMAGE, the public one, or our Debian one.
choose_base() {
  if [[ -n "${BASE_IMAGE:-}" ]]; then
    image_exists "${BASE_IMAGE}" || podman pull "${BASE_IMAGE}" >&2 || die 4 "cannot pull BASE_IMAGE=${BASE_IMAGE}"
    echo "${BASE_IMAGE}"
  elif image_exists "${PUBLIC_BASE}" || timeout 60 podman pull --quiet "${PUBLIC_BASE}" >/dev/null 2>&1; then
    echo "${PUBLIC_BASE}"
  else
    echo "==> base: no registry answers for ${PUBLIC_BASE}; using a Debian base made with mmdebstrap" >&2
    debian_base
    echo "${DEBIAN_BASE}"
  fi
}

# PyTorch's CPU-only index unless $TORCH_INDEX_URL says otherwise; PyPI's (CUDA) wheel
# when that index cannot be reached.
torch_index() {
  local cpu="https://download.pytorch.org/whl/cpu"
  if [[ -n "${TORCH_INDEX_URL+set}" ]]; then
    echo "${TORCH_INDEX_URL}"
  elif curl -sSf -o /dev/null --max-time 15 "${cpu}/torch/" 2>/dev/null; then
    echo "${cpu}"
  else
    echo "==> trainer: ${cpu} cannot be reached; torch comes from PyPI (the CUDA build, several GB)" >&2
    echo ""
  fi
}

build_target() { # scheduler | trainer
  local target="$1" base ref start=${SECONDS}
  base="$(choose_base)"
  ref="$(ref_of "${target}")"
  echo "==> ${target}: podman build --target ${target} on ${base}" >&2
  local args=(--network host --layers --target "${target}" --build-arg "BASE_IMAGE=${base}" -t "${ref}")
  # pip in the build trusts what the host trusts (a proxy's CA, say); Debian's pip reads
  # the system bundle, other pips PIP_CERT.
  [[ -f "${HOST_CA}" ]] && args+=(--volume "${HOST_CA}:/etc/ssl/certs/ca-certificates.crt:ro")
  if [[ "${target}" == trainer ]]; then
    args+=(--build-arg "TORCH_INDEX_URL=$(torch_index)")
  fi
  local previous
  previous="$(podman image inspect --format '{{.Id}}' "${ref}" 2>/dev/null || true)"
  podman build "${args[@]}" "${ROOT_DIR}" || die 4 "building the ${target} image failed"
  # The image this build replaced (a trainer image is 6 GB): the stages' layer cache stays.
  if [[ -n "${previous}" && "${previous}" != "$(podman image inspect --format '{{.Id}}' "${ref}")" ]]; then
    podman rmi --force "${previous}" >/dev/null 2>&1 || true
  fi
  echo "==> ${target}: ${ref} in $((SECONDS - start)) s, $(podman image inspect --format '{{.Size}}' "${ref}" | awk '{printf "%.0f MB", $1 / 1e6}')" >&2
}

build_pause() {
  local ref src work
  ref="$(ref_of pause)"
  if image_exists "${ref}"; then return 0; fi
  # The node's binaries keep the pause.c of the Kubernetes module they were built from.
  src="$("${HACK_DIR}/build-binaries.sh" --print-dir node)/pause.c"
  [[ -f "${src}" ]] || die 4 "no ${src}; run hack/build-binaries.sh node first"
  work="$(mktemp -d)"
  gcc -Os -Wall -static -DVERSION="${PAUSE_VERSION}" -o "${work}/pause" "${src}" || die 4 "compiling pause.c failed"
  strip "${work}/pause"
  printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' >"${work}/Containerfile"
  podman build --quiet --network none -t "${ref}" -t "${PAUSE_ALIAS}" -f "${work}/Containerfile" "${work}" >/dev/null ||
    die 4 "building the pause image failed"
  rm -rf "${work}"
  echo "==> pause: ${ref}" >&2
}

# Every name an image goes by: the pause image also answers to the tag the examples and
# the dev cluster's pods use (deploy/examples, devcluster.names.PLACEHOLDER_IMAGE).
refs_of() {
  ref_of "$1"
  if [[ "$1" == pause ]]; then echo "${PAUSE_ALIAS}"; fi
}

# The podman image id of IMAGE (the digest of its config, which containerd keeps too).
image_id() { podman image inspect --format '{{.Id}}' "$(ref_of "$1")" 2>/dev/null || die 4 "no $1 image: run '$0 $1'"; }

main() {
  setup_podman
  case "${1:-}" in
    --print-ref)
      [[ $# -eq 2 ]] || die 2 "usage: $0 --print-ref IMAGE"
      ref_of "$2"
      return 0
      ;;
    --id)
      [[ $# -eq 2 ]] || die 2 "usage: $0 --id IMAGE"
      image_id "$2"
      return 0
      ;;
    --save)
      [[ $# -eq 3 ]] || die 2 "usage: $0 --save IMAGE FILE"
      mapfile -t refs < <(refs_of "$2")
      podman save --quiet --multi-image-archive --format docker-archive -o "$3" "${refs[@]}" ||
        die 4 "podman save of $2 failed"
      return 0
      ;;
  esac
  local targets=("$@")
  ((${#targets[@]})) || targets=(scheduler)
  for target in "${targets[@]}"; do
    case "${target}" in
      scheduler | trainer) build_target "${target}" ;;
      pause) build_pause ;;
      *) die 2 "unknown image '${target}'; choose from scheduler, trainer, pause" ;;
    esac
  done
}

main "$@"
