"""The scheduler's metrics port against a real API server: an unauthenticated scrape
is refused (401), a token the API server authenticates but RBAC does not allow gets
403, an allowed one the metrics; 2,000 idle connections leave /healthz answered and
the scheduler binding pods."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.support import (
    SchedulerProcess,
    create_pods,
    replace_nodes,
    running_scheduler,
    scratch_namespace,
    service_account_token,
    wait_for,
)
from tests.e2e.workloads import mixed_nodes, pod

pytestmark = pytest.mark.cluster
SCHEDULER = "rl-serving"
IDLE_CONNECTIONS = 2000


@pytest.fixture(scope="module")
def scheduler(dev_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SchedulerProcess]:
    logs = tmp_path_factory.mktemp("serving-logs")
    replace_nodes(dev_cluster.core_v1(), mixed_nodes(3))
    with running_scheduler(dev_cluster.kubeconfig, SCHEDULER, logs, "--no-leader-elect") as process:
        yield process


def test_metrics_need_a_token_allowed_to_get_them(dev_cluster: Any, scheduler: SchedulerProcess) -> None:
    stranger = service_account_token(
        dev_cluster.kubeconfig, "default", "rl-no-metrics", allowed_metrics=False
    )
    assert scheduler.get("/healthz", token="")[0] == 200
    assert scheduler.get("/readyz", token="")[0] == 200
    status, why = scheduler.get("/metrics", token="")
    assert (status, why) == (401, "a bearer token is required")
    assert scheduler.get("/metrics", token="not-a-token")[0] == 401
    status, why = scheduler.get("/metrics", token=stranger)
    assert status == 403
    assert why == 'user "system:serviceaccount:default:rl-no-metrics" may not get path "/metrics"'
    status, text = scheduler.get("/metrics")  # the reader's token
    assert status == 200
    assert "scheduler_schedule_attempts_total" in text or "rl_scheduler_leader" in text


def test_idle_connections_leave_probes_and_binds_working(
    dev_cluster: Any, scheduler: SchedulerProcess, request: pytest.FixtureRequest
) -> None:
    core: client.CoreV1Api = dev_cluster.core_v1()
    with (
        scratch_namespace(core, "rl-serving", request.node.nodeid) as namespace,
        idle_connections(scheduler.port, IDLE_CONNECTIONS) as opened,
    ):
        assert len(opened) == IDLE_CONNECTIONS
        for _ in range(5):
            assert scheduler.get("/healthz", token="")[0] == 200
        assert scheduler.get("/metrics")[0] == 200  # delegated authentication still reaches the API
        create_pods(core, [pod(f"p-{i}", namespace, SCHEDULER) for i in range(3)])

        def bound() -> bool:
            return all(p.spec.node_name for p in core.list_namespaced_pod(namespace).items)

        wait_for(bound, 60, "the pods to bind while the port is flooded")
        assert scheduler.process is not None
        assert scheduler.process.poll() is None


@contextlib.contextmanager
def idle_connections(port: int, count: int) -> Iterator[list[socket.socket]]:
    """``count`` TCP connections to the port that never send a byte (the server closes
    most of them: past its cap, the one idle longest gives way)."""
    opened: list[socket.socket] = []
    try:
        for _ in range(count):
            opened.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        yield opened
    finally:
        for sock in opened:
            sock.close()
