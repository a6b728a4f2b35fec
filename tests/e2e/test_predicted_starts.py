"""A pod that waits behind pods is told when it is likely to start, on the local control
plane: its FailedScheduling event carries the forecast after kube's message, the
scheduler exposes it as a gauge (gone once the pod binds), the lifetime model in use is
named, and ``rl-scheduler pending`` lists the pod with the same kind of forecast."""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from devcluster import nodes as devnodes
from scheduler.k8s.scheduling.lifetimes_starts import SUFFIX, kube_part
from tests.e2e.support import (
    create_pods,
    pod_events,
    replace_nodes,
    running_scheduler,
    scratch_namespace,
    wait_for,
)
from tests.e2e.workloads import pod

pytestmark = pytest.mark.cluster
SCHEDULER = "rl-scheduler-starts"
NODE = "starts-gpu"
GAUGE = "rl_scheduler_pending_pod_predicted_start_seconds"


@pytest.fixture(scope="module")
def core(dev_cluster: Any) -> client.CoreV1Api:
    api = dev_cluster.core_v1()
    # One node, two whole GPUs (the plain device plugin's): two 1-GPU pods fill it.
    size = devnodes.NodeType(16_000, 65_536, 2, "T4")
    replace_nodes(api, [devnodes.NodeSpec(NODE, size, "zone-a", "zone-a-rack-0", hami=False)])
    return api


@pytest.fixture
def namespace(core: client.CoreV1Api, request: pytest.FixtureRequest) -> Iterator[str]:
    with scratch_namespace(core, "e2e-starts", request.node.nodeid) as name:
        yield name


def running(core: client.CoreV1Api, namespace: str, names: set[str]) -> bool:
    items = core.list_namespaced_pod(namespace).items
    return {p.metadata.name for p in items if p.status.phase == "Running"} >= names


def test_a_waiting_pod_is_told_when_it_is_likely_to_start(
    dev_cluster: Any, core: client.CoreV1Api, namespace: str, tmp_path: Path
) -> None:
    with running_scheduler(
        dev_cluster.kubeconfig, SCHEDULER, tmp_path, "--profile", "fgd-reserve"
    ) as scheduler:
        assert (
            scheduler.metric(
                "rl_scheduler_lifetime_model_info", {"source": "shipped", "version": "openb-default"}
            )
            == 1
        )
        create_pods(core, [pod(f"holder-{i}", namespace, SCHEDULER, cpu="1", gpus=1) for i in range(2)])
        wait_for(lambda: running(core, namespace, {"holder-0", "holder-1"}), 60, "the holders to run")
        create_pods(core, [pod("waiter", namespace, SCHEDULER, cpu="1", gpus=1)])

        def messages() -> list[str]:
            return [
                e.message or ""
                for e in pod_events(core, namespace, "waiter")
                if e.reason == "FailedScheduling"
            ]

        wait_for(lambda: bool(messages()), 60, "the waiter's FailedScheduling")
        message = messages()[0]
        print(f"FailedScheduling: {message}")
        # kube's message first and intact, then when it is likely to start.
        assert kube_part(message).startswith("0/1 nodes are available: 1 Insufficient nvidia.com/gpu."), (
            message
        )
        assert SUFFIX in message, message
        assert message.endswith(")"), message
        labels = {"namespace": namespace, "pod": "waiter"}
        p50 = scheduler.metric(GAUGE, {**labels, "quantile": "0.5"})
        p90 = scheduler.metric(GAUGE, {**labels, "quantile": "0.9"})
        assert 0 < p50 <= p90 < math.inf, (p50, p90)
        assert scheduler.metric("rl_scheduler_start_forecast_duration_seconds_count") >= 1

        # rl-scheduler pending, from a listing: the waiter, with its p50 and p90.
        listed = subprocess.run(
            [
                sys.executable,
                "-m",
                "scheduler.cli",
                "pending",
                "--kubeconfig",
                str(dev_cluster.kubeconfig),
                "--scheduler-name",
                SCHEDULER,
                "--namespace",
                namespace,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert listed.returncode == 0, listed.stderr
        lines = [line for line in listed.stdout.splitlines() if "waiter" in line]
        assert len(lines) == 1, listed.stdout
        assert "never" not in lines[0], listed.stdout
        assert "gated" not in lines[0], listed.stdout
        assert "lifetime model: shipped openb-default" in listed.stdout
        print(listed.stdout)

        # A holder leaves: the waiter binds and its series go.
        core.delete_namespaced_pod("holder-0", namespace, grace_period_seconds=0)
        wait_for(
            lambda: bool(core.read_namespaced_pod("waiter", namespace).spec.node_name),
            60,
            "the waiter to bind",
        )
        wait_for(lambda: scheduler.metric(GAUGE, labels) == 0, 30, "the waiter's series to go")
        assert 'pod="waiter"' not in scheduler.get("/metrics")[1]
        log = scheduler.log()
    assert "Traceback" not in log
