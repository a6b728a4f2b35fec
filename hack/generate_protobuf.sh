#!/usr/bin/env bash
# Generates scheduler/k8s/client/generated/ (Python classes for Kubernetes' protobuf
# encoding, read by scheduler/k8s/client/node_protobuf.py) from the generated.proto
# files of k8s.io/api and k8s.io/apimachinery in the Go module cache (hack/tools pins
# them; `go mod download` there fills the cache).
#
# protoc comes from grpcio-tools, installed into a throwaway folder, not the project:
#   .venv/bin/pip install --target /tmp/gt grpcio-tools==1.85.1
#   PROTOC_PYTHONPATH=/tmp/gt hack/generate_protobuf.sh
#
# The .proto files are copied flat (core_v1.proto, meta_v1.proto, ...) with their
# imports renamed to match, because protoc names a Python module after its file's path
# and "k8s.io/..." is not a Python package path. Messages, packages and field numbers
# are Kubernetes' own, unchanged.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
version="${K8S_PROTO_VERSION:-v0.36.4}"
mod="${GOMODCACHE:-$root/.cache/go/mod}/k8s.io"
python="${PYTHON:-$root/.venv/bin/python}"
package=scheduler/k8s/client/generated
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT

declare -A sources=(
    [core_v1]="api@$version/core/v1"
    [meta_v1]="apimachinery@$version/pkg/apis/meta/v1"
    [runtime]="apimachinery@$version/pkg/runtime"
    [runtime_schema]="apimachinery@$version/pkg/runtime/schema"
    [resource]="apimachinery@$version/pkg/api/resource"
    [intstr]="apimachinery@$version/pkg/util/intstr"
)
mkdir -p "$stage/$package" "$stage/out"
renames=()
for name in "${!sources[@]}"; do
    cp "$mod/${sources[$name]}/generated.proto" "$stage/$package/$name.proto"
    upstream="k8s.io/${sources[$name]/@$version/}/generated.proto"
    renames+=(-e "s#\"$upstream\"#\"$package/$name.proto\"#")
done
sed -i "${renames[@]}" "$stage/$package"/*.proto

(cd "$stage" && PYTHONPATH="${PROTOC_PYTHONPATH:-}" "$python" -m grpc_tools.protoc -I. \
    --python_out=out --pyi_out=out "$package"/*.proto)

protoc_version="$(PYTHONPATH="${PROTOC_PYTHONPATH:-}" "$python" -m grpc_tools.protoc --version)"
for name in "${!sources[@]}"; do
    for suffix in py pyi; do
        {
            echo "# Generated from k8s.io/${sources[$name]}/generated.proto"
            echo "# (Copyright The Kubernetes Authors, Apache License 2.0) by hack/generate_protobuf.sh"
            echo "# with $protoc_version (grpcio-tools). Do not edit."
            cat "$stage/out/$package/${name}_pb2.$suffix"
        } >"$root/$package/${name}_pb2.$suffix"
    done
done
echo "generated $package from k8s.io api and apimachinery $version ($protoc_version)"
