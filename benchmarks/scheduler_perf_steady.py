"""kube's ``createPods`` with ``steadyState``: the cluster kept at one level of use while
the scheduler works, as kube's ``createPodsSteadily`` keeps it: ``count`` pods are made;
once every one is bound they are deleted (grace period 0, not waited for) and ``count``
more are made, until the operation's duration is over. The batch under way then is let
finish, so that every pod made is bound or pending for a reason; kube's harness cuts it
at the deadline. Binds are read from the run's watch (``BindWatcher``)."""

from __future__ import annotations

import time

from kubernetes import client
from scheduler_perf_objects import PERF_LABEL, ROLE_LABEL, create_all, pod_objects
from scheduler_perf_ops import PodsOp
from throughput_cluster import BindWatcher

POLL_S = 0.01  # the watch is in process: a batch's last bind is seen within this


def run_steadily(
    core: client.CoreV1Api,
    op: PodsOp,
    op_index: int,
    run: str,
    scheduler_name: str,
    watcher: BindWatcher,
    finish_s: float,
) -> int:
    """Batches of ``op.count`` pods for ``op.steady_s`` seconds (the last one given at most
    ``finish_s`` more to be bound); how many pods were made. The watcher must key binds
    ``namespace/name``."""
    end = time.monotonic() + op.steady_s
    made = 0
    batch = 0
    while time.monotonic() < end:
        pods = [
            pod_objects(op, i, f"{run}-{op_index}-{batch}-{i}", scheduler_name, run) for i in range(op.count)
        ]
        create_all(core, pods)
        made += len(pods)
        keys = {f"{op.namespace}/{p.pod['metadata']['name']}" for p in pods}
        deadline = max(end, time.monotonic()) + finish_s
        while not keys <= watcher.bound_at.keys():
            if time.monotonic() > deadline:
                return made
            time.sleep(POLL_S)
        if time.monotonic() >= end:
            break
        core.delete_collection_namespaced_pod(
            op.namespace, label_selector=f"{PERF_LABEL}={run},!{ROLE_LABEL}", grace_period_seconds=0
        )
        batch += 1
    return made
