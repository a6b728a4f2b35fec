#!/usr/bin/env bash
# The dev cluster from a shell:
#   hack/cluster.sh up [--port 6443] [--no-kube-scheduler]   # prints the kubeconfig path
#   hack/cluster.sh down
#   hack/cluster.sh nodes --count 100 [--mix cpu-small=3,gpu-t4=1] [--wait 60]
#   hack/cluster.sh workload --scheduler rl-scheduler --target-cpu 0.6
#   hack/cluster.sh view | clean | status | kubeconfig | build
# A thin wrapper around `python -m devcluster`, run with the repo's .venv if it exists.
set -euo pipefail
HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT_DIR="$(cd "${HACK_DIR}/.." && pwd)"
PYTHON="${PYTHON:-}"
if [[ -z "${PYTHON}" ]]; then
  if [[ -x "${ROOT_DIR}/.venv/bin/python" ]]; then PYTHON="${ROOT_DIR}/.venv/bin/python"; else PYTHON=python3; fi
fi
export PYTHONPATH="${HACK_DIR}${PYTHONPATH:+:${PYTHONPATH}}"
exec "${PYTHON}" -m devcluster "$@"
