#!/usr/bin/env bash
# Builds the dev-cluster binaries (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, kwok, kwokctl, helm, and for a real node kubelet,
# kube-proxy, containerd with its runc shim, and Kubernetes' DRA test driver) from
# their Go modules, pinned in hack/versions.env and hack/tools/*/go.{mod,sum}.
#
#   hack/build-binaries.sh            # everything
#   hack/build-binaries.sh etcd kwok  # only these groups (kubernetes, node, dra, containerd, etcd, kwok, helm)
#   hack/build-binaries.sh --print-dir kubernetes   # where a group's binaries live
#
#   hack/build-binaries.sh --keep-go-caches ...     # keep Go's caches after the build
#
# Binaries land in .cache/bin/<group>-<version>/ and are reused: a group whose
# directory is complete is not rebuilt, so the binaries are the cache. Go's module and
# build caches (.cache/go/, about 6 GB for every group) are removed once the requested
# groups are built, unless --keep-go-caches (or RL_KEEP_GO_CACHES=1) is given: a CI
# machine then needs room for one build at a time, not for the build and everything
# after it. The node group also keeps the Kubernetes module's pause.c, which
# hack/images.sh compiles into the pause image. Exit codes: 0 ok, 2 bad usage,
# 3 no usable Go toolchain, 4 build or version check failed.
set -euo pipefail

HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT_DIR="$(cd "${HACK_DIR}/.." && pwd)"
# shellcheck source=/dev/null  # plain KEY=VALUE lines
source "${HACK_DIR}/versions.env"

CACHE_DIR="${RL_DEVCLUSTER_CACHE:-${ROOT_DIR}/.cache}"
BIN_ROOT="${CACHE_DIR}/bin"
export GOMODCACHE="${GOMODCACHE_OVERRIDE:-${CACHE_DIR}/go/mod}"
export GOCACHE="${GOCACHE_OVERRIDE:-${CACHE_DIR}/go/build}"
# Never fetch another toolchain behind our back, and build static binaries as the
# upstream releases do. -mod=readonly makes a go.mod/go.sum drift a hard error.
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"

ALL_GROUPS=(kubernetes node dra containerd etcd kwok helm)
# Half-built output directories, removed on any exit so a failed build leaves no debris.
TMP_DIRS=()
cleanup() { ((${#TMP_DIRS[@]} == 0)) || rm -rf "${TMP_DIRS[@]}"; }
trap cleanup EXIT

group_version() {
  case "$1" in
    kubernetes | node | dra) echo "${KUBERNETES_VERSION}" ;;
    containerd) echo "${CONTAINERD_VERSION}" ;;
    etcd) echo "${ETCD_VERSION}" ;;
    kwok) echo "${KWOK_VERSION}" ;;
    helm) echo "${HELM_VERSION}" ;;
  esac
}

group_packages() {
  case "$1" in
    kubernetes) echo "k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl" ;;
    node) echo "k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy" ;;
    # The DRA driver of Kubernetes' own end-to-end tests: a kubelet plugin that
    # publishes a ResourceSlice and writes a CDI spec per prepared claim.
    dra) echo "k8s.io/kubernetes/test/e2e/dra/test-driver" ;;
    # Debian 12's containerd (1.6) has no CDI, which DRA needs to reach a container.
    containerd) echo "github.com/containerd/containerd/cmd/containerd github.com/containerd/containerd/cmd/containerd-shim-runc-v2" ;;
    etcd) echo "go.etcd.io/etcd/server/v3" ;;
    kwok) echo "sigs.k8s.io/kwok/cmd/kwok sigs.k8s.io/kwok/cmd/kwokctl" ;;
    helm) echo "helm.sh/helm/v${HELM_VERSION:1:1}/cmd/helm" ;;
  esac
}

group_binaries() {
  case "$1" in
    kubernetes) echo "kube-apiserver kube-controller-manager kube-scheduler kubectl" ;;
    node) echo "kubelet kube-proxy" ;;
    dra) echo "dra-test-driver" ;;
    containerd) echo "containerd containerd-shim-runc-v2" ;;
    etcd) echo "etcd" ;;
    kwok) echo "kwok kwokctl" ;;
    helm) echo "helm" ;;
  esac
}

# The version each binary must print, so a stale or mislabelled cache is caught.
version_command() {
  case "$1" in
    kubectl) echo "version --client" ;;
    helm) echo "version" ;;
    containerd-shim-runc-v2) echo "-v" ;;
    *) echo "--version" ;;
  esac
}

group_dir() { echo "${BIN_ROOT}/$1-$(group_version "$1")"; }

# The Go module a group builds from: the node's binaries come from the Kubernetes one.
group_module_dir() {
  case "$1" in
    node | dra) echo "${HACK_DIR}/tools/kubernetes" ;;
    *) echo "${HACK_DIR}/tools/$1" ;;
  esac
}

die() {
  local code="$1"; shift
  echo "build-binaries: error: $*" >&2
  exit "${code}"
}

check_go() {
  command -v go >/dev/null 2>&1 ||
    die 3 "no Go toolchain on PATH; install Go >= ${GO_MIN_VERSION} (https://go.dev/dl/) and retry"
  local have
  have="$(go env GOVERSION 2>/dev/null || true)"
  have="${have#go}"
  have="${have%%[-+ ]*}"
  [[ -n "${have}" ]] || die 3 "could not read the Go version from 'go env GOVERSION'"
  if [[ "$(printf '%s\n%s\n' "${GO_MIN_VERSION}" "${have}" | sort -V | head -1)" != "${GO_MIN_VERSION}" ]]; then
    die 3 "Go ${have} is too old; the pinned modules need Go >= ${GO_MIN_VERSION}"
  fi
}

# Release time of a module, used as the build date so a rebuild is byte-identical.
module_time() { # module-dir module-path
  (cd "$1" && go list -m -json "$2" | sed -n 's/.*"Time": "\(.*\)".*/\1/p' | head -1)
}

group_ldflags() {
  local group="$1" dir v
  dir="$(group_module_dir "$1")"
  case "${group}" in
    kubernetes | node | dra)
      v="${KUBERNETES_VERSION#v}"
      local date minor="${v#*.}"
      minor="${minor%%.*}"
      date="$(module_time "${dir}" k8s.io/kubernetes)"
      # The same -X pairs as upstream's hack/lib/version.sh. The module zip carries no
      # git metadata, so the commit is named for what it is rather than invented.
      local kv
      for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
        for kv in "gitVersion=${KUBERNETES_VERSION}" "gitMajor=${v%%.*}" "gitMinor=${minor}" \
          "gitCommit=unknown-go-module" "gitTreeState=archive" "buildDate=${date}"; do
          printf -- "-X '%s.%s' " "${pkg}" "${kv}"
        done
      done
      ;;
    containerd)
      printf -- "-X 'github.com/containerd/containerd/version.Version=%s' -X 'github.com/containerd/containerd/version.Revision=go-module'" \
        "${CONTAINERD_VERSION}"
      ;;
    etcd)
      printf -- "-X 'go.etcd.io/etcd/api/v3/version.GitSHA=go-module-%s'" "${ETCD_VERSION}"
      ;;
    kwok)
      printf -- "-X 'sigs.k8s.io/kwok/pkg/consts.Version=%s' -X 'sigs.k8s.io/kwok/pkg/consts.KubeVersion=%s'" \
        "${KWOK_VERSION#v}" "${KUBERNETES_VERSION#v}"
      ;;
    helm)
      local p="helm.sh/helm/v${HELM_VERSION:1:1}/internal/version"
      printf -- "-X '%s.version=%s' -X '%s.gitTreeState=clean' -X '%s.gitCommit=go-module'" \
        "${p}" "${HELM_VERSION}" "${p}" "${p}"
      ;;
  esac
}

group_is_built() {
  local out b
  out="$(group_dir "$1")"
  [[ -f "${out}/.complete" ]] || return 1
  for b in $(group_binaries "$1"); do [[ -x "${out}/${b}" ]] || return 1; done
  [[ "$1" != node || -f "${out}/pause.c" ]]
}

check_versions() { # group dir
  local group="$1" out="$2" want b got
  want="$(group_version "${group}")"
  want="${want#v}"
  for b in $(group_binaries "${group}"); do
    if [[ "${b}" == dra-test-driver ]]; then
      # It has no --version: the Kubernetes module it was built from, as Go recorded it.
      got="$(go version -m "${out}/${b}" | awk '($1 == "mod" || $1 == "dep") && $2 == "k8s.io/kubernetes" {print $2, $3}')"
      [[ -n "${got}" ]] || die 4 "${b}: no k8s.io/kubernetes in its build information"
    # shellcheck disable=SC2046
    elif ! got="$("${out}/${b}" $(version_command "${b}") 2>&1)"; then
      die 4 "${b} $(version_command "${b}") failed: ${got}"
    fi
    # Match the version as a whole word so "v3.6.16" never passes for "3.6.1".
    grep -Eq -- "(^|[^0-9.])v?${want//./\\.}([^0-9]|$)" <<<"${got}" ||
      die 4 "${b} does not report version ${want}; it printed: ${got}"
    echo "  ${b}: $(head -1 <<<"${got}")"
  done
}

build_group() {
  local group="$1" dir out tmp start total n=0 line
  dir="$(group_module_dir "$1")"
  out="$(group_dir "${group}")"
  if group_is_built "${group}"; then
    echo "==> ${group} $(group_version "${group}"): cached in ${out}"
    return 0
  fi
  start=${SECONDS}
  echo "==> ${group} $(group_version "${group}"): downloading modules"
  (cd "${dir}" && go mod download) || die 4 "downloading the ${group} modules failed"
  # shellcheck disable=SC2046
  total="$(cd "${dir}" && go list -deps $(group_packages "${group}") | wc -l)"
  echo "==> ${group}: compiling up to ${total} packages (cached ones are skipped)"
  mkdir -p "${BIN_ROOT}"
  tmp="$(mktemp -d "${BIN_ROOT}/.${group}.XXXXXX")"
  TMP_DIRS+=("${tmp}")
  # One package: name the file (etcd's main is its module root, which go build would
  # call "server"); several: go build names each after its directory.
  local target="${tmp}/"
  [[ "$(group_binaries "${group}")" == *" "* ]] || target="${tmp}/$(group_binaries "${group}")"
  # -v names each package as it is compiled: count them for a progress line.
  # shellcheck disable=SC2046
  # No DWARF in the compiled packages: -w drops it from the binaries anyway, and without
  # it the build cache is a fifth smaller and the build a fifth faster (etcd: 258 MB in
  # 41 s against 330 MB in 54 s).
  if ! (cd "${dir}" && go build -v -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w $(group_ldflags "${group}")" \
    -o "${target}" $(group_packages "${group}") 2>&1) |
    while IFS= read -r line; do
      if [[ "${line}" == *" "* || "${line}" == *:* ]]; then
        echo "${line}" # a compiler message, not a package name
        continue
      fi
      n=$((n + 1))
      if ((n % 100 == 0)); then
        echo "    ${group}: ${n}/${total} packages compiled, $((SECONDS - start)) s"
      fi
    done; then
    die 4 "building ${group} failed (see the messages above)"
  fi
  check_versions "${group}" "${tmp}"
  if [[ "${group}" == node ]]; then
    cp "$(cd "${dir}" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c" "${tmp}/" ||
      die 4 "no pause.c in the Kubernetes module"
  fi
  touch "${tmp}/.complete"
  chmod 755 "${tmp}" # mktemp made it private
  rm -rf "${out}"
  mv "${tmp}" "${out}"
  echo "==> ${group}: built in $((SECONDS - start)) s -> ${out}"
}

main() {
  local groups=() g keep_caches="${RL_KEEP_GO_CACHES:-0}"
  if [[ "${1:-}" == "--keep-go-caches" ]]; then
    keep_caches=1
    shift
  fi
  if [[ "${1:-}" == "--print-dir" ]]; then
    [[ $# -eq 2 ]] || die 2 "usage: $0 --print-dir GROUP"
    [[ -n "$(group_version "$2")" ]] || die 2 "unknown group '$2'"
    group_dir "$2"
    return 0
  fi
  for g in "$@"; do
    [[ -n "$(group_version "${g}")" ]] || die 2 "unknown group '${g}'; choose from: ${ALL_GROUPS[*]}"
    groups+=("${g}")
  done
  ((${#groups[@]})) || groups=("${ALL_GROUPS[@]}")
  # Only a build needs Go; a fully cached set of binaries does not.
  for g in "${groups[@]}"; do
    group_is_built "${g}" || { check_go; break; }
  done
  local start=${SECONDS} built=0
  for g in "${groups[@]}"; do
    group_is_built "${g}" || built=1
    build_group "${g}"
  done
  echo "==> all requested binaries ready in $((SECONDS - start)) s"
  if ((built)) && [[ "${keep_caches}" != 1 ]]; then drop_go_caches; fi
}

# Only this cache's own Go caches (never a GOCACHE_OVERRIDE or GOMODCACHE_OVERRIDE, which
# may be the user's). The module cache is read-only by Go's design: made writable first.
drop_go_caches() {
  local d freed=0
  for d in "${GOCACHE}" "${GOMODCACHE}"; do
    [[ -d "${d}" && "${d}" == "${CACHE_DIR}/go/"* ]] || continue
    freed=$((freed + $(du -sm "${d}" | cut -f1)))
    chmod -R u+w "${d}"
    rm -rf "${d}"
  done
  echo "==> removed Go's build and module caches (${freed} MB; --keep-go-caches keeps them)"
}

main "$@"
