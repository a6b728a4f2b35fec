"""Two replicas and a Lease: one binds; the other takes over when the leader dies;
a kube-apiserver restart mid-run loses no pod."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from devcluster import processes
from tests.e2e import checker
from tests.e2e.support import (
    create_pods,
    leader_of,
    replace_nodes,
    scheduler_replicas,
    scratch_namespace,
    wait_for,
)
from tests.e2e.workloads import mixed_nodes, pod

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def core(dev_cluster: Any) -> client.CoreV1Api:
    api = dev_cluster.core_v1()
    replace_nodes(api, mixed_nodes(20))
    return api


@pytest.fixture
def namespace(core: client.CoreV1Api, request: pytest.FixtureRequest) -> Iterator[str]:
    with scratch_namespace(core, "ha", request.node.nodeid) as name:
        yield name


def scheduled_events(core: client.CoreV1Api, namespace: str) -> list[Any]:
    return [e for e in core.list_namespaced_event(namespace).items if e.reason == "Scheduled"]


def bound_count(core: client.CoreV1Api, namespace: str) -> int:
    return sum(1 for p in core.list_namespaced_pod(namespace).items if p.spec.node_name)


def test_with_two_replicas_exactly_one_binds(
    dev_cluster: Any, core: client.CoreV1Api, namespace: str, tmp_path: Path
) -> None:
    name = "rl-ha-one"
    with scheduler_replicas(dev_cluster.kubeconfig, name, tmp_path, 2, "--profile", "fgd") as both:
        leader = leader_of(both)
        follower = next(r for r in both if r is not leader)
        create_pods(core, [pod(f"p-{i:03d}", namespace, name) for i in range(100)])
        wait_for(lambda: bound_count(core, namespace) == 100, 180, "100 pods to bind")
        wait_for(lambda: len(scheduled_events(core, namespace)) == 100, 60, "100 Scheduled events")
        instances = Counter(e.reporting_instance for e in scheduled_events(core, namespace))
        assert len(instances) == 1, instances
        assert follower.metric("scheduler_schedule_attempts_total") == 0
        assert leader.metric("scheduler_schedule_attempts_total", {"result": "scheduled"}) == 100


def test_killing_the_leader_hands_over_and_every_pod_binds_once(
    dev_cluster: Any, core: client.CoreV1Api, namespace: str, tmp_path: Path, record_property: Any
) -> None:
    name = "rl-ha-failover"
    with scheduler_replicas(dev_cluster.kubeconfig, name, tmp_path, 2, "--profile", "fgd") as both:
        leader = leader_of(both)
        survivor = next(r for r in both if r is not leader)
        create_pods(core, [pod(f"p-{i:03d}", namespace, name) for i in range(150)])
        wait_for(lambda: bound_count(core, namespace) >= 30, 120, "the first pods to bind")
        leader.kill()  # SIGKILL: no chance to release the Lease
        killed_at = time.monotonic()
        wait_for(lambda: survivor.metric("rl_scheduler_leader") == 1, 60, "the survivor to lead")
        took_over_s = time.monotonic() - killed_at
        wait_for(lambda: bound_count(core, namespace) == 150, 240, "all 150 pods to bind")
        record_property("failover_seconds", round(took_over_s, 1))
        print(f"\nfailover: the survivor led {took_over_s:.1f} s after SIGKILL of the leader")
        per_pod = Counter(e.involved_object.name for e in scheduled_events(core, namespace))
        assert max(per_pod.values()) == 1, [p for p, n in per_pod.items() if n > 1]
        # 15 s lease + 2 s retry, measured from a kill that may come just after a renewal
        assert took_over_s < 40
        pods = [
            core.api_client.sanitize_for_serialization(p) for p in core.list_pod_for_all_namespaces().items
        ]
        nodes = [core.api_client.sanitize_for_serialization(n) for n in core.list_node().items]
        assert checker.check(nodes, pods) == []


def test_an_api_server_restart_loses_no_pod(
    dev_cluster: Any, core: client.CoreV1Api, namespace: str, tmp_path: Path
) -> None:
    name = "rl-api-restart"
    with scheduler_replicas(dev_cluster.kubeconfig, name, tmp_path, 1, "--profile", "fgd") as (scheduler,):
        create_pods(core, [pod(f"p-{i:03d}", namespace, name) for i in range(200)])
        wait_for(lambda: bound_count(core, namespace) >= 20, 120, "the first pods to bind")
        processes.restart(dev_cluster.info.workdir, "kube-apiserver", down_s=3)
        wait_for(lambda: _serving(core), 120, "kube-apiserver to serve again")
        create_pods(core, [pod(f"q-{i:03d}", namespace, name) for i in range(50)])
        wait_for(lambda: bound_count(core, namespace) == 250, 300, "all 250 pods to bind")
        assert scheduler.process is not None
        assert scheduler.process.poll() is None
        pods = [
            core.api_client.sanitize_for_serialization(p) for p in core.list_pod_for_all_namespaces().items
        ]
        nodes = [core.api_client.sanitize_for_serialization(n) for n in core.list_node().items]
        assert checker.check(nodes, pods) == []


def _serving(core: client.CoreV1Api) -> bool:
    try:
        core.list_namespace(limit=1)
    except Exception:
        return False
    return True
