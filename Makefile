# The two commands of the README:
#   make simulate   replays the openb default trace under rl-scheduler's own policy (gnn,
#                   the shipped checkpoint), kube-scheduler's default profile and the FGD
#                   paper's six policies (10 seeds) and compares them
#   make test       everything CI checks: lint, types, unit and simulator tests, the tests
#                   against a local control plane (built from Go modules on first use), and
#                   the chart's image on a real kubelet node (Debian packages, as root)
# Both set up what they need (a virtualenv in .venv, the binaries and images in .cache/).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Keep pip's and Go's caches in ignored folders, so a machine that keeps them rebuilds nothing.
export PIP_CACHE_DIR ?= $(CURDIR)/.cache/pip
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: setup simulate test lint typecheck unit cluster-tests real-node-tests binaries all-binaries \
	prometheus real-node-deps images generate clean

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[operator,learn,ray,tune,dev]'
	touch $@

setup: $(VENV)/.installed

simulate: setup
	$(BIN)/rl-scheduler simulate --out runs/simulate

binaries:
	hack/build-binaries.sh kubernetes etcd kwok helm

# Debian's Prometheus evaluates every Grafana dashboard query in tests/deploy. CI runs as
# root; elsewhere sudo. The test fails, never skips, when it is missing.
prometheus:
	@command -v prometheus >/dev/null || { \
	  sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  $$sudo apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends prometheus; }

# What a real node and the image builds need, from Debian: runc and the CNI plugins run
# pods, containerd's ctr imports images (containerd itself is built, with CDI: hack/
# build-binaries.sh containerd); podman, mmdebstrap and gcc (the pause binary) build images.
REAL_NODE_PACKAGES := containerd runc containernetworking-plugins iptables iproute2 conntrack \
	podman mmdebstrap gcc libc6-dev
real-node-deps:
	@missing=$$(for p in $(REAL_NODE_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | \
	  grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  $$sudo apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends $$missing; fi

# The images, with podman (hack/images.sh): the scheduler's (no torch) and the trainer's.
# IMAGES=scheduler builds one.
IMAGES ?= scheduler trainer
images: real-node-deps
	hack/images.sh $(IMAGES)

# The dashboard JSON, its ConfigMap and the plain manifests in deploy/ are generated from
# hack/dashboard and the chart, docs/configuration.md's settings table from scheduler/k8s/process/settings.py:
# run this after changing any of them (tests check).
generate: setup
	PYTHONPATH=hack $(BIN)/python -m dashboard
	PYTHONPATH=hack $(BIN)/python -m manifests
	PYTHONPATH=hack $(BIN)/python -m settings_table

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/hadolint Dockerfile

typecheck: setup
	$(BIN)/mypy
	$(BIN)/mypy benchmarks  # scripts, not a package: checked on their own

unit: setup
	$(BIN)/pytest -m "not cluster and not binaries and not realnode" -n 2

cluster-tests: setup binaries prometheus
	$(BIN)/pytest -m "cluster or binaries"

# The chart on a real kubelet: builds the node's binaries and the scheduler image first
# (RL_REAL_NODE_TRAINER=1 also the trainer's, and runs the chart with its sidecar).
real-node-tests: setup binaries real-node-deps
	hack/build-binaries.sh node containerd dra
	$(BIN)/pytest -m realnode

# The binaries first: their build needs Go's caches (about 6 GB, removed once it is
# done), and then nothing else is on the disk yet.
test: all-binaries lint typecheck unit cluster-tests real-node-tests

all-binaries:
	hack/build-binaries.sh kubernetes node containerd dra etcd kwok helm

clean:
	rm -rf runs .pytest_cache .mypy_cache .ruff_cache
