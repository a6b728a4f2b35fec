"""Every panel of the Grafana dashboard returns data: a real Prometheus scrapes a
running rl-scheduler that has bound pods, refused some and fallen back to its heuristic,
and its trainer sidecar, which has refused a candidate, and evaluates each panel's
PromQL as Grafana would send it."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from dashboard.generate import CHART_JSON
from devcluster import kube
from scheduler.policy.checkpoint import load_checkpoint, save_checkpoint
from tests.deploy.chart import only, render
from tests.deploy.cluster import mixed_cluster
from tests.deploy.prometheus import Prometheus, running_prometheus, scrape_config, substitute, wait_scraped
from tests.e2e.support import (
    SchedulerProcess,
    create_pods,
    delete_namespace_pods,
    ensure_namespace,
    running_scheduler,
    running_trainer,
    service_account_token,
    submit_candidate,
    trainer_metric,
    wait_for,
)
from tests.e2e.workloads import pod
from tests.online.test_trainer import anti_fgd

pytestmark = pytest.mark.cluster
SCHEDULER = "rl-dashboard"
NAMESPACE = "rl-dashboard"


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, expr) for every target of the shipped dashboard JSON."""
    panels = json.loads(CHART_JSON.read_text())["panels"]
    return [(p["title"], t["expr"]) for p in panels if p["type"] != "row" for t in p["targets"]]


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The volume the scheduler and the trainer share."""
    return tmp_path_factory.mktemp("shared")


@pytest.fixture(scope="module")
def scheduler(
    dev_cluster: Any, shared: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SchedulerProcess]:
    core = dev_cluster.core_v1()
    # The learned profile with a checkpoint whose manifest is not JSON: the policy cannot
    # load, so the fallback decides and the failure is counted (those panels need data too).
    broken = tmp_path_factory.mktemp("broken-policy")
    (broken / "manifest.json").write_text("{not json")
    logs = tmp_path_factory.mktemp("logs")
    env = {"RL_SCHEDULER_EXPERIENCE_DIR": str(shared / "experience")}
    with (
        mixed_cluster(core),
        running_scheduler(
            dev_cluster.kubeconfig, SCHEDULER, logs, "--profile", "gnn", "--checkpoint", str(broken), env=env
        ) as process,
    ):
        yield process


@pytest.fixture(scope="module")
def trainer(
    dev_cluster: Any, shared: Path, scheduler: SchedulerProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[int]:
    """The sidecar, gating only what is submitted to it (too few arrivals to fine-tune)."""
    log = tmp_path_factory.mktemp("trainer-logs") / "trainer.log"
    args = ("--interval", "2", "--min-new-arrivals", "100000")
    with running_trainer(shared, dev_cluster.kubeconfig, scheduler, log, *args) as port:
        yield port


def submit_a_worse_candidate(shared: Path, folder: Path) -> None:
    """Hands the gate a policy that prefers fragmenting placements (a rejection)."""
    worse = save_checkpoint(anti_fgd(load_checkpoint().model), folder / "worse")
    submit_candidate(shared, worse)


def chart_scrape(helm: Path, kubeconfig: Path, folder: Path) -> dict[str, Any]:
    """The scrape the chart's ServiceMonitor asks of Prometheus (HTTPS, its service
    account token, the self-signed certificate accepted), with the token of a
    ServiceAccount bound to the chart's metrics-reader ClusterRole."""
    docs = render(helm, {"metrics.serviceMonitor.enabled": True})
    (endpoint,) = only(docs, "ServiceMonitor")["spec"]["endpoints"]
    reader = only(docs, "ClusterRole", "-metrics-reader")
    rbac = client.RbacAuthorizationV1Api(kube.api_client(kubeconfig))
    reader["metadata"] = {"name": "rl-dashboard-metrics-reader"}
    with contextlib.suppress(ApiException):  # made by an earlier run
        rbac.create_cluster_role(reader)
    token = service_account_token(kubeconfig, "default", "rl-dashboard-prometheus", allowed_metrics=False)
    binding = {
        "metadata": {"name": "rl-dashboard-prometheus"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "rl-dashboard-metrics-reader",
        },
        "subjects": [{"kind": "ServiceAccount", "name": "rl-dashboard-prometheus", "namespace": "default"}],
    }
    with contextlib.suppress(ApiException):
        rbac.create_cluster_role_binding(binding)
    token_file = folder / "prometheus-token"
    token_file.write_text(token)
    return scrape_config(endpoint, token_file)


def test_every_dashboard_query_returns_data(
    dev_cluster: Any, scheduler: SchedulerProcess, trainer: int, shared: Path, tmp_path: Path, helm: Path
) -> None:
    core: client.CoreV1Api = dev_cluster.core_v1()
    ensure_namespace(core, NAMESPACE)
    targets = [f"127.0.0.1:{scheduler.port}", f"127.0.0.1:{trainer}"]
    scrape = chart_scrape(helm, dev_cluster.kubeconfig, tmp_path)
    assert scrape["scheme"] == "https"
    with running_prometheus(targets, tmp_path, scrape) as prometheus:
        wait_scraped(prometheus, 'up{job="rl-scheduler"} == 1')
        # Two waves: a labelled counter appears at its first increment, and rate() sees
        # an increase only between two scrapes of it, so the second wave must come after
        # Prometheus has scraped the first.
        first = [pod(f"first-{i}", NAMESPACE, SCHEDULER) for i in range(4)]
        first.append(pod("too-big-0", NAMESPACE, SCHEDULER, cpu="1000"))
        second = [pod(f"cpu-{i}", NAMESPACE, SCHEDULER) for i in range(12)]
        second += [pod(f"gpu-{i}", NAMESPACE, SCHEDULER, gpus=1) for i in range(3)]
        second += [pod(f"share-{i}", NAMESPACE, SCHEDULER, gpus=1, gpu_percent=30) for i in range(3)]
        second.append(pod("too-big-1", NAMESPACE, SCHEDULER, cpu="1000"))
        try:
            create_pods(core, first)
            wait_for(lambda: bound(core) == 4, 120, "the first 4 pods to bind")
            wait_scraped(prometheus, 'scheduler_schedule_attempts_total{result="scheduled"} >= 4')
            wait_scraped(prometheus, 'scheduler_schedule_attempts_total{result="unschedulable"} >= 1')
            create_pods(core, second)
            wait_for(lambda: bound(core) == 4 + 18, 120, "the second wave to bind")
            submit_a_worse_candidate(shared, tmp_path)
            wait_for(
                lambda: trainer_metric(trainer, "rl_scheduler_trainer_rejections_total") >= 1,
                180,
                "the trainer's gate to refuse the worse candidate",
            )
            missing = wait_for_every_query(prometheus, timeout_s=90)
        finally:
            delete_namespace_pods(core, NAMESPACE)
    assert missing == [], "panels without data:\n" + "\n".join(missing) + f"\n{scheduler.log()[-2000:]}"


def bound(core: client.CoreV1Api) -> int:
    return sum(1 for p in core.list_namespaced_pod(NAMESPACE).items if p.spec.node_name)


def wait_for_every_query(prometheus: Prometheus, timeout_s: float) -> list[str]:
    """Poll until every query has data (gauges refresh every 5 s, rates need two
    scrapes); returns the panels and queries that never did."""
    queries = dashboard_queries()
    assert len(queries) >= 20
    pending = set(queries)

    def poll() -> bool:
        for title, expr in sorted(pending):
            if prometheus.has_data(substitute(expr)):
                pending.discard((title, expr))
        return not pending

    with contextlib.suppress(AssertionError):  # the caller reports what stayed empty
        wait_for(poll, timeout_s, "every dashboard query to return data", interval_s=2)
    for title, expr in queries:
        series = prometheus.query(substitute(expr))
        print(f"{title}: {len(series)} series, {[s['value'][1] for s in series][:4]}")
    return [f"{title}: {expr}" for title, expr in sorted(pending)]
