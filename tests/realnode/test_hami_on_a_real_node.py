"""GPU shares on a real kubelet, through HAMi's device protocol.

The node is advertised as HAMi's device plugin would advertise it (two GPUs, split
count 10: ``nvidia.com/gpu: 20`` on its status and the ``hami.io/node-nvidia-register``
annotation, kept fresh by the test), and the test plays the plugin's Allocate side
(``devcluster.hami.DevicePluginStandIn``: marks a bound pod ``success`` and releases
the node lock naming it), since no real plugin runs there. What only a node decides:
the kubelet admits six 30% pods and runs their containers. Then the scheduler pod is
deleted (its Deployment makes a new one, which knows nothing but what the pods carry):
a seventh pod asking 40% fits no GPU (each holds 90%) until one of the six is deleted,
and then goes to the GPU that pod freed.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from devcluster import hami
from scheduler.resources.hami import BIND_PHASE, DEVICES_ALLOCATED, REGISTER_ANNOTATION, VGPU_NODE
from tests.realnode.conftest import RELEASE
from tests.realnode.support import RealCluster, is_ready, lease_holder, scheduler_pods, wait_for

pytestmark = pytest.mark.realnode
GPUS, SPLIT, MODEL = 2, 10, "A10"  # an A10 has 24 GiB: 24576 MiB
GPU_MEMORY_MIB = 24576
REFRESH_S = 5.0


def advertise(core: client.CoreV1Api, node: str, register: str | None) -> None:
    """The node's GPUs as HAMi's plugin advertises them (None: as if it were gone)."""
    count = str(GPUS * SPLIT) if register is not None else None
    gpus = {"nvidia.com/gpu": count}
    core.patch_node_status(node, {"status": {"capacity": gpus, "allocatable": gpus}})
    core.patch_node(node, {"metadata": {"annotations": {REGISTER_ANNOTATION: register}}})


@pytest.fixture
def hami_node(real_cluster: RealCluster, core: client.CoreV1Api) -> Iterator[str]:
    """The real node with two HAMi GPUs, kept advertised, and the plugin's Allocate played."""
    node = real_cluster.node_name
    register = hami.register_annotation(node, GPUS, MODEL, SPLIT)
    stop = threading.Event()

    def keep_fresh() -> None:
        while not stop.is_set():
            current = core.read_node(node)
            allocatable = (current.status.allocatable or {}).get("nvidia.com/gpu")
            annotation = (current.metadata.annotations or {}).get(REGISTER_ANNOTATION)
            if allocatable != str(GPUS * SPLIT) or annotation != register:
                advertise(core, node, register)
            stop.wait(REFRESH_S)

    advertise(core, node, register)
    refresher = threading.Thread(target=keep_fresh, name="hami-advertise", daemon=True)
    refresher.start()
    stand_in, stand_in_stop = hami.start_in_thread(core, [node])
    try:
        yield node
    finally:
        stop.set()
        stand_in_stop.set()
        refresher.join(timeout=REFRESH_S + 5)
        advertise(core, node, None)
    assert stand_in.allocated, "the stand-in allocated nothing"


def share(name: str, namespace: str, percent: int, image: str) -> dict[str, Any]:
    gpu = {
        "nvidia.com/gpu": "1",
        "nvidia.com/gpucores": str(percent),
        "nvidia.com/gpumem-percentage": str(percent),
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedulerName": "rl-scheduler",
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "c",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "command": ["sleep", "3600"],
                    "resources": {
                        "requests": {"cpu": "20m", "memory": "16Mi", **gpu},
                        "limits": {"memory": "64Mi", **gpu},
                    },
                }
            ],
        },
    }


def running(core: client.CoreV1Api, namespace: str, name: str) -> Any:
    pod = core.read_namespaced_pod(name, namespace)
    statuses = pod.status.container_statuses or []
    return pod if statuses and statuses[0].state.running is not None else None


def held(pod: Any) -> tuple[str, int, int]:
    """(GPU UUID, memory MiB, cores %) the pod's allocation annotation names (one GPU)."""
    annotations = pod.metadata.annotations or {}
    entry = annotations[DEVICES_ALLOCATED]
    uuid, kind, memory, cores = entry.rstrip(":;").split(",")
    assert kind == "NVIDIA", entry
    return uuid, int(memory), int(cores)


def per_gpu(pods: list[Any]) -> dict[str, tuple[int, int]]:
    total: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for pod in pods:
        uuid, memory, cores = held(pod)
        total[uuid][0] += cores
        total[uuid][1] += memory
    return {uuid: (cores, memory) for uuid, (cores, memory) in total.items()}


def test_six_30_percent_pods_run_and_after_a_restart_a_40_percent_pod_takes_the_freed_gpu(
    real_cluster: RealCluster,
    core: client.CoreV1Api,
    release: str,
    scratch: str,
    images: dict[str, str],
    hami_node: str,
) -> None:
    image = images["scheduler"]
    names = [f"share-{i}" for i in range(6)]
    started = time.monotonic()
    for name in names:
        core.create_namespaced_pod(scratch, share(name, scratch, 30, image))
    pods = [wait_for(lambda n=name: running(core, scratch, n), 180, f"{name} running") for name in names]
    print(f"\nsix 30% pods running {time.monotonic() - started:.1f} s after they were created")

    uuids = {f"GPU-{hami_node}-{i}" for i in range(GPUS)}
    for pod in pods:
        assert pod.spec.node_name == hami_node
        annotations = pod.metadata.annotations
        assert annotations[VGPU_NODE] == hami_node
        assert pod.metadata.labels[VGPU_NODE] == hami_node
        uuid, memory, cores = held(pod)
        assert uuid in uuids
        assert (memory, cores) == (GPU_MEMORY_MIB * 30 // 100, 30)
    settled = [core.read_namespaced_pod(n, scratch) for n in names]
    assert all(p.metadata.annotations.get(BIND_PHASE) == "success" for p in settled)
    usage = per_gpu(settled)
    print(f"per GPU (cores %, MiB of {GPU_MEMORY_MIB}): {usage}")
    # 3 x 30% per GPU: no GPU over 100% of its cores or its memory.
    assert usage == dict.fromkeys(uuids, (90, 3 * (GPU_MEMORY_MIB * 30 // 100))), usage

    # Restart the scheduler: its Deployment makes a new pod, which must lead. One
    # replica only, so no standby with a warm cache takes over.
    def the_only_one() -> list[Any]:
        pods = scheduler_pods(core, release, RELEASE)
        return pods if len(pods) == 1 and is_ready(pods[0]) else []

    [old] = wait_for(the_only_one, 120, "one Ready scheduler pod")
    core.delete_namespaced_pod(old.metadata.name, release)

    def new_leader() -> str:
        ready = [p for p in scheduler_pods(core, release, RELEASE) if is_ready(p)]
        fresh = [p.metadata.name for p in ready if p.metadata.name != old.metadata.name]
        holder = lease_holder(real_cluster, release, "rl-scheduler")
        return next((n for n in fresh if holder.startswith(n + "_")), "")

    restarted = wait_for(new_leader, 180, "a new scheduler pod leading")
    print(f"\nscheduler restarted: {old.metadata.name} -> {restarted}")

    # It knows every GPU holds 90%: the 40% pod waits ...
    core.create_namespaced_pod(scratch, share("share-40", scratch, 40, image))

    def refused() -> str:
        events = core.list_namespaced_event(scratch, field_selector="involvedObject.name=share-40").items
        return next((e.message for e in events if e.reason == "FailedScheduling"), "")

    message = wait_for(refused, 60, "the 40% pod to be refused")
    assert "Insufficient nvidia.com/gpu" in message, message
    assert not core.read_namespaced_pod("share-40", scratch).spec.node_name

    # ... until a 30% pod leaves; then it goes to the GPU that pod freed.
    freed, _, _ = held(settled[0])
    core.delete_namespaced_pod(names[0], scratch, grace_period_seconds=1)
    deleted = time.monotonic()
    seventh = wait_for(lambda: running(core, scratch, "share-40"), 180, "the 40% pod running")
    uuid, memory, cores = held(seventh)
    print(f"40% pod refused ({message}), then on {uuid} (freed by {names[0]}) and running "
          f"{time.monotonic() - deleted:.1f} s after the delete")  # fmt: skip
    assert (uuid, memory, cores) == (freed, GPU_MEMORY_MIB * 40 // 100, 40)
    now = [p for p in core.list_namespaced_pod(scratch).items if p.metadata.deletion_timestamp is None]
    usage = per_gpu(now)
    assert all(cores <= 100 and memory <= GPU_MEMORY_MIB for cores, memory in usage.values()), usage
    assert usage[freed] == (100, 2 * (GPU_MEMORY_MIB * 30 // 100) + GPU_MEMORY_MIB * 40 // 100)
