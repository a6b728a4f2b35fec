"""SIGTERM, as a kubelet sends it on ``kubectl delete pod``: the leader stops taking
pods, lets its binds in flight end, gives the Lease up as client-go's
``ReleaseOnCancel`` does and exits 0 within 2 s; the standby leads at its next retry
(2 s) and binds."""

from __future__ import annotations

import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.e2e import checker
from tests.e2e.support import (
    LeaseRecorder,
    create_pods,
    identity,
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
    with scratch_namespace(core, "stop", request.node.nodeid) as name:
        yield name


def bound(core: client.CoreV1Api, namespace: str) -> int:
    return sum(1 for p in core.list_namespaced_pod(namespace).items if p.spec.node_name)


def test_sigterm_releases_the_lease_and_the_standby_leads_within_5_s(
    dev_cluster: Any, core: client.CoreV1Api, namespace: str, tmp_path: Path, record_property: Any
) -> None:
    name = "rl-sigterm"
    lease = LeaseRecorder(dev_cluster.kubeconfig, "default", name)
    try:
        # QPS 20, burst 5: when the signal comes, most of the 80 binds wait for the rate
        # limiter; those that have not gone out within the drain bound are dropped.
        args = ("--profile", "fgd", "--qps", "20", "--burst", "5")
        with scheduler_replicas(dev_cluster.kubeconfig, name, tmp_path, 2, *args) as both:
            leader = leader_of(both)
            standby = next(r for r in both if r is not leader)
            assert leader.process is not None
            create_pods(core, [pod(f"p-{i:03d}", namespace, name) for i in range(80)])
            wait_for(lambda: bound(core, namespace) >= 10, 60, "the first binds", interval_s=0.05)

            leader.process.send_signal(signal.SIGTERM)
            signalled = time.monotonic()
            exited_s = led_s = None
            while time.monotonic() - signalled < 30 and (exited_s is None or led_s is None):
                if exited_s is None and leader.process.poll() is not None:
                    exited_s = time.monotonic() - signalled
                if led_s is None and standby.metric("rl_scheduler_leader") == 1:
                    led_s = time.monotonic() - signalled
                time.sleep(0.02)
            print(f"\nSIGTERM: the leader exited after {exited_s} s; the standby led after {led_s} s")
            record_property("sigterm_exit_seconds", exited_s)
            record_property("sigterm_takeover_seconds", led_s)
            log = leader.log()
            assert exited_s is not None, f"no exit 30 s after SIGTERM: {log[-3000:]}"
            assert exited_s < 2.0, log[-3000:]
            assert leader.process.returncode == 0, log[-3000:]
            assert led_s is not None
            assert led_s < 5.0, standby.log()[-3000:]
            assert "binds or reports in flight dropped" in log, log[-3000:]

            # The standby binds what was left, and a pod created now.
            create_pods(core, [pod("after", namespace, name)])
            wait_for(lambda: bound(core, namespace) == 81, 120, "all 81 pods to bind")
    finally:
        lease.close()
    # What the leader wrote on its way out, before the standby took the Lease.
    releases = lease.released(identity(leader))
    assert releases, lease.records
    assert releases[0]["leaseDurationSeconds"] == 1
    events = [e for e in core.list_namespaced_event(namespace).items if e.reason == "Scheduled"]
    per_pod = Counter(e.involved_object.name for e in events)
    assert max(per_pod.values()) == 1, [p for p, n in per_pod.items() if n > 1]
    after = [e.reporting_instance for e in events if e.involved_object.name == "after"]
    assert after == [identity(standby)]
    pods = [core.api_client.sanitize_for_serialization(p) for p in core.list_pod_for_all_namespaces().items]
    nodes = [core.api_client.sanitize_for_serialization(n) for n in core.list_node().items]
    assert checker.check(nodes, pods) == []
