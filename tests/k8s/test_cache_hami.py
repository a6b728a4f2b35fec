"""GPU usage rebuilt from the pods already placed, as HAMi's scheduler counts it: from
``hami.io/vgpu-devices-allocated`` of every pod whose ``hami.io/vgpu-node`` is the node,
whoever scheduled it (what a restarted scheduler sees)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.k8s.scheduling.cache import PodChange, SchedulerCache
from scheduler.resources.hami import DEVICES_ALLOCATED, VGPU_NODE
from tests.builders import make_pod, node_manifest, pod_manifest

# n1: GPU-n1-0 and GPU-n1-1, 16384 MiB and 10 vGPU slots each.
FREE = (1000, 16384, 10)


def placed(
    name: str,
    allocated: str | None,
    *,
    node: str = "n1",
    vgpu_node: str = "n1",
    init_containers: int = 0,
    init_done: bool = False,
    phase: str = "Running",
) -> dict[str, Any]:
    """A pod bound to ``node`` by some scheduler, with HAMi's allocation annotations."""
    manifest = pod_manifest(name, gpus=1, gpu_milli=100)
    manifest["spec"]["nodeName"] = node
    manifest["spec"]["schedulerName"] = "hami-scheduler"
    if allocated is not None:
        manifest["metadata"]["annotations"].update({VGPU_NODE: vgpu_node, DEVICES_ALLOCATED: allocated})
    manifest["spec"]["initContainers"] = [
        {"name": f"init{i}", "image": "busybox"} for i in range(init_containers)
    ]
    statuses = [
        {"name": f"init{i}", "state": {"terminated": {"exitCode": 0}}} for i in range(init_containers)
    ]
    manifest["status"] = {"phase": phase, "initContainerStatuses": statuses if init_done else []}
    return manifest


def gpus(cache: SchedulerCache) -> list[tuple[int, int, int]]:
    """(free milli, free MiB, free slots) of n1's two GPUs."""
    state = cache.state
    return [
        (int(state.gpu_free_milli[0, g]), int(state.gpu_free_memory[0, g]), int(state.gpu_free_slots[0, g]))
        for g in range(2)
    ]


@pytest.mark.parametrize(
    ("pods", "expected"),
    [
        pytest.param(
            [placed("a", "GPU-n1-1,NVIDIA,4915,30:;")],
            [FREE, (700, 16384 - 4915, 9)],
            id="one share: 30% cores, 4915 MiB, a slot of GPU 1",
        ),
        pytest.param(
            [placed("a", ";GPU-n1-0,NVIDIA,1000,10:;GPU-n1-0,NVIDIA,2000,20:GPU-n1-1,NVIDIA,2000,20:;")],
            [(700, 16384 - 3000, 8), (800, 16384 - 2000, 9)],
            id="app containers add up, a slot each",
        ),
        pytest.param(
            [placed("a", "GPU-n1-0,NVIDIA,8000,50:;GPU-n1-0,NVIDIA,2000,20:;", init_containers=1)],
            [(500, 16384 - 8000, 10 - 1), FREE],
            id="an init container: the larger of its peak and the app sum, one slot",
        ),
        pytest.param(
            [
                placed(
                    "a",
                    "GPU-n1-0,NVIDIA,8000,50:;GPU-n1-0,NVIDIA,2000,20:;",
                    init_containers=1,
                    init_done=True,
                )
            ],
            [(800, 16384 - 2000, 9), FREE],
            id="init containers done: the app containers only",
        ),
        pytest.param(
            [placed("a", "GPU-n1-1,NVIDIA,4915,30:;", vgpu_node="n2")],
            [FREE, FREE],
            id="an allocation for another node counts nowhere here",
        ),
        pytest.param([placed("a", None)], [FREE, FREE], id="no allocation annotation: HAMi counts nothing"),
        pytest.param(
            [placed("a", "GPU-gone,NVIDIA,4915,30:;")], [FREE, FREE], id="a GPU the node no longer has"
        ),
        pytest.param([placed("a", "lots of GPUs")], [FREE, FREE], id="an annotation with no device in it"),
        pytest.param(
            [placed("a", "GPU-n1-1,NVIDIA,4915,30:;", phase="Failed")], [FREE, FREE], id="a pod that ended"
        ),
        pytest.param(
            [placed("a", "GPU-n1-1,NVIDIA,1000,100:;"), placed("b", "GPU-n1-1,NVIDIA,1000,30:;")],
            [FREE, (-300, 16384 - 2000, 8)],
            id="over-committed by others: counted as written",
        ),
    ],
)
def test_gpu_usage_comes_from_the_allocation_annotation(
    pods: list[dict[str, Any]], expected: list[tuple[int, int, int]]
) -> None:
    cache = SchedulerCache("rl-scheduler")
    cache.on_node("ADDED", node_manifest("n1", gpus=2))
    for manifest in pods:
        cache.on_pod("ADDED", manifest)
    assert gpus(cache) == expected


def test_init_containers_ending_shrink_the_usage_on_the_next_event() -> None:
    cache = SchedulerCache("rl-scheduler")
    cache.on_node("ADDED", node_manifest("n1", gpus=2))
    allocation = "GPU-n1-0,NVIDIA,8000,50:;GPU-n1-0,NVIDIA,2000,20:;"
    cache.on_pod("ADDED", placed("a", allocation, init_containers=1))
    assert gpus(cache)[0] == (500, 16384 - 8000, 9)
    event = cache.on_pod("MODIFIED", placed("a", allocation, init_containers=1, init_done=True))
    assert event.change is PodChange.BOUND
    assert gpus(cache)[0] == (800, 16384 - 2000, 9)
    assert len(cache.state.placements) == 1


def test_usage_follows_the_gpu_when_the_node_loses_another_one() -> None:
    cache = SchedulerCache("rl-scheduler")
    cache.on_node("ADDED", node_manifest("n1", gpus=2))
    cache.on_pod("ADDED", placed("a", "GPU-n1-1,NVIDIA,4915,30:;"))
    registered = node_manifest("n1", gpus=2)
    # GPU 0 turns unhealthy: the node now has one GPU, GPU-n1-1, at index 0.
    text = registered["metadata"]["annotations"]["hami.io/node-nvidia-register"]
    unhealthy = text.replace(',"health":true}', "}", 1)
    registered["metadata"]["annotations"]["hami.io/node-nvidia-register"] = unhealthy
    assert cache.on_node("MODIFIED", registered) is not None
    state = cache.state
    assert int(state.gpu_count[0]) == 1
    assert (int(state.gpu_free_milli[0, 0]), int(state.gpu_free_slots[0, 0])) == (700, 9)
    assert state.placements["default/a"].gpu_indices == (0,)


def test_an_assumed_pod_keeps_its_gpus_when_its_annotated_bind_comes_back() -> None:
    cache = SchedulerCache("rl-scheduler")
    cache.on_node("ADDED", node_manifest("n1", gpus=2))
    pod = make_pod("p", gpus=1, gpu_milli=300)
    cache.assume(pod, "n1", (1,))
    manifest = placed("p", "GPU-n1-1,NVIDIA,4915,30:;")
    manifest["spec"]["schedulerName"] = "rl-scheduler"
    assert cache.on_pod("MODIFIED", manifest).change is PodChange.BOUND
    assert gpus(cache) == [FREE, (700, 16384 - 4915, 9)]
    assert not cache.assumed
