"""The plain manifests in ``deploy/``, rendered from the Helm chart.

``deploy/rl-scheduler.yaml`` is ``helm template`` of ``helm/rl-scheduler`` with the
default values in namespace ``rl-scheduler``, after a Namespace that enforces the
``restricted`` Pod Security Standard (the chart's pods meet it). The dashboard is in
its own file (``deploy/grafana-dashboard.yaml``, from ``hack/dashboard``), so users
without Grafana can leave it out. Run ``python -m manifests`` (``make generate``)
after changing the chart; a test checks the committed file is up to date.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "helm" / "rl-scheduler"
MANIFESTS = REPO / "deploy" / "rl-scheduler.yaml"
RELEASE = "rl-scheduler"
NAMESPACE = "rl-scheduler"

HEADER = f"""\
# Generated from helm/rl-scheduler by hack/manifests (make generate): do not edit.
# The chart's default values, release {RELEASE} in namespace {NAMESPACE}:
#   kubectl apply -f deploy/rl-scheduler.yaml
#   kubectl apply -f deploy/grafana-dashboard.yaml      # optional: Grafana's sidecar imports it
apiVersion: v1
kind: Namespace
metadata:
  name: {NAMESPACE}
  labels:
    pod-security.kubernetes.io/enforce: restricted
"""


def helm_template(helm: Path, *extra: str, namespace: str = NAMESPACE, release: str = RELEASE) -> str:
    """``helm template`` of the chart; ``extra`` are more flags (``--set k=v``)."""
    command = [str(helm), "template", release, str(CHART), "--namespace", namespace, *extra]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


def render(helm: Path) -> str:
    return HEADER + helm_template(helm, "--set", "dashboards.enabled=false")
