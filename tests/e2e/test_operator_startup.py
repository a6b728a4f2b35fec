"""Started while the API server cannot be reached (a Service whose packets are
dropped until kube-proxy programs it), the scheduler says so in its log, is not
ready, fails ``/healthz`` once ``startup_timeout_s`` has passed, and becomes ready and
binds as soon as the server answers, without a restart."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.support import (
    SchedulerProcess,
    StallingProxy,
    create_pods,
    replace_nodes,
    scratch_namespace,
    wait_for,
)
from tests.e2e.workloads import mixed_nodes, pod

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def core(dev_cluster: Any) -> client.CoreV1Api:
    api = dev_cluster.core_v1()
    replace_nodes(api, mixed_nodes(10))
    return api


@pytest.fixture
def namespace(core: client.CoreV1Api, request: pytest.FixtureRequest) -> Iterator[str]:
    with scratch_namespace(core, "start", request.node.nodeid) as name:
        yield name


def test_a_scheduler_started_while_the_api_server_is_unreachable_recovers_without_a_restart(
    dev_cluster: Any, core: client.CoreV1Api, namespace: str, tmp_path: Path, record_property: Any
) -> None:
    name = "rl-stalled-start"
    proxy = StallingProxy(str(core.api_client.configuration.host))
    kubeconfig = proxy.kubeconfig(dev_cluster.kubeconfig, tmp_path / "kubeconfig.yaml")
    scheduler = SchedulerProcess(
        name,
        kubeconfig,
        tmp_path / f"{name}.log",
        ("--profile", "fgd", "--no-leader-elect"),
        {"RL_SCHEDULER_STARTUP_TIMEOUT_S": "12"},
    ).start()
    started = time.monotonic()
    retries = f"listing the cluster from {proxy.url} failed"
    try:
        wait_for(lambda: _answers(scheduler), 30, "the probes to answer")
        assert scheduler.get("/healthz")[0] == 200  # live while it starts
        assert scheduler.get("/readyz") == (503, "caches not synced")

        # Connect timeout 5 s, then 1 s, 2 s, ... between attempts: two logged attempts.
        wait_for(lambda: scheduler.log().count(retries) >= 2, 60, "two logged retries")
        lines = [line for line in scheduler.log().splitlines() if retries in line]
        print("\n" + "\n".join(lines))
        assert all("WARNING" in line and "timed out" in line for line in lines), lines
        assert re.search(r"\(attempt 1\): .*; retrying in 1 s$", lines[0]), lines
        assert re.search(r"\(attempt 2\): .*; retrying in 2 s$", lines[1]), lines
        assert scheduler.get("/readyz")[0] == 503
        # startup_timeout_s (12 s) after start, /healthz fails: a kubelet would restart it.
        wait_for(lambda: scheduler.get("/healthz")[0] == 503, 30, "/healthz to fail")
        assert time.monotonic() - started > 12
        status, why = scheduler.get("/healthz")
        assert status == 503, why
        assert re.fullmatch(r"caches not synced \d+ s after start \(startup_timeout_s: 12\)", why), why

        proxy.forward()
        forwarded = time.monotonic()
        scheduler.wait_ready(timeout_s=60)
        ready_s = time.monotonic() - forwarded
        print(f"ready {ready_s:.1f} s after the API server became reachable")
        record_property("ready_after_forward_seconds", round(ready_s, 1))
        assert scheduler.get("/healthz") == (200, "ok")
        create_pods(core, [pod("after-stall", namespace, name)])
        wait_for(
            lambda: bool(core.read_namespaced_pod("after-stall", namespace).spec.node_name),
            60,
            "the pod to bind",
        )
        assert scheduler.process is not None
        assert scheduler.process.poll() is None  # the same process: never restarted
    finally:
        scheduler.stop()
        proxy.close()


def _answers(scheduler: SchedulerProcess) -> bool:
    try:
        scheduler.get("/readyz")
    except OSError:
        return False
    return True
