"""HAMi's device protocol against a real API server with KWOK nodes registered as HAMi's
device plugin registers GPUs (``hami.io/node-nvidia-register``, ``nvidia.com/gpu`` as
GPUs x 10), the cluster's ``hami-device-plugin`` component playing the plugin's
Allocate: the decision is on the pod before its Binding, the node lock is taken and
honoured, a restarted scheduler rebuilds every GPU's usage from the pods'
annotations, and what rl-scheduler does not place gets a reason."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from devcluster import kube
from devcluster import nodes as devnodes
from scheduler.k8s.scheduling.lifetimes_starts import kube_part
from scheduler.resources.hami import (
    BIND_PHASE,
    DEVICES_ALLOCATED,
    DEVICES_TO_ALLOCATE,
    NODE_LOCK_ANNOTATION,
    VGPU_NODE,
)
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
SCHEDULER = "rl-scheduler-hami"
T4_NODE, V100_NODE, CPU_NODE = "hami-t4", "hami-v100", "hami-cpu"
NODES = [
    devnodes.NodeSpec(T4_NODE, devnodes.NodeType(32_000, 131_072, 4, "T4"), "zone-a", "zone-a-rack-0"),
    devnodes.NodeSpec(V100_NODE, devnodes.NodeType(32_000, 131_072, 2, "V100M32"), "zone-a", "zone-a-rack-0"),
    devnodes.NodeSpec(CPU_NODE, devnodes.NodeType(16_000, 65_536), "zone-b", "zone-b-rack-0"),
]
ON_T4 = {"nodeSelector": {"kubernetes.io/hostname": T4_NODE}}


@pytest.fixture(scope="module")
def core(dev_cluster: Any) -> client.CoreV1Api:
    api = dev_cluster.core_v1()
    replace_nodes(api, NODES)
    return api


@pytest.fixture
def namespace(core: client.CoreV1Api, request: pytest.FixtureRequest) -> Iterator[str]:
    with scratch_namespace(core, "e2e-hami", request.node.nodeid) as name:
        yield name


@pytest.fixture
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("logs")


class Recorder:
    """Every version of the namespace's pods and of the nodes' lock, in order (raw
    watches in threads)."""

    def __init__(self, kubeconfig: Path, namespace: str) -> None:
        self.core = client.CoreV1Api(kube.api_client(kubeconfig))
        self.pods: list[dict[str, Any]] = []
        self.locks: list[tuple[str, str | None]] = []
        self._stop = threading.Event()
        pods = self.core.list_namespaced_pod(namespace)
        nodes = self.core.list_node()
        self._threads = [
            threading.Thread(
                target=self._watch,
                args=(
                    self.core.list_namespaced_pod,
                    (namespace,),
                    str(pods.metadata.resource_version),
                    self._pod,
                ),
                daemon=True,
            ),
            threading.Thread(
                target=self._watch,
                args=(self.core.list_node, (), str(nodes.metadata.resource_version), self._node),
                daemon=True,
            ),
        ]
        for thread in self._threads:
            thread.start()

    def _watch(self, lister: Any, args: tuple[str, ...], version: str, handle: Any) -> None:
        while not self._stop.is_set():
            response = lister(
                *args, watch=True, resource_version=version, timeout_seconds=2, _preload_content=False
            )
            for line in response:
                event = json.loads(line)
                version = event["object"]["metadata"].get("resourceVersion", version)
                handle(event["object"])

    def _pod(self, manifest: dict[str, Any]) -> None:
        self.pods.append(manifest)

    def _node(self, manifest: dict[str, Any]) -> None:
        name = manifest["metadata"]["name"]
        lock = (manifest["metadata"].get("annotations") or {}).get(NODE_LOCK_ANNOTATION)
        if not self.locks or self.locks[-1] != (name, lock):
            self.locks.append((name, lock))

    def stop(self) -> None:
        self._stop.set()


def share(name: str, namespace: str, percent: int, **extra: Any) -> dict[str, Any]:
    return pod(name, namespace, SCHEDULER, gpus=1, gpu_percent=percent, extra=extra or None)


def bound(core: client.CoreV1Api, namespace: str, name: str) -> Any:
    item = core.read_namespaced_pod(name, namespace)
    return item if item.spec.node_name else None


def allocated_gpu(item: Any) -> str:
    """The UUID the pod's allocation annotation names (one GPU)."""
    text = item.metadata.annotations[DEVICES_ALLOCATED]
    return str(text.split(",")[0])


def test_the_decision_comes_with_the_pods_binding_under_the_node_lock(
    dev_cluster: Any, core: client.CoreV1Api, namespace: str, logs: Path
) -> None:
    recorder = Recorder(dev_cluster.kubeconfig, namespace)
    try:
        with running_scheduler(dev_cluster.kubeconfig, SCHEDULER, logs, "--profile", "fgd") as scheduler:
            create_pods(core, [share("s30", namespace, 30, **ON_T4)])
            item = wait_for_value(lambda: bound(core, namespace, "s30"), 60, "s30 to be bound")
            wait_for(
                lambda: (
                    core.read_namespaced_pod("s30", namespace).metadata.annotations.get(BIND_PHASE)
                    == "success"
                ),
                30,
                "the device plugin stand-in's Allocate",
            )
            log = scheduler.log()
    finally:
        recorder.stop()
    uuid = allocated_gpu(item)
    assert uuid.startswith(f"GPU-{T4_NODE}-")
    # 30% of the cores, 30% of 16384 MiB floored
    assert item.metadata.annotations[DEVICES_ALLOCATED] == f"{uuid},NVIDIA,4915,30:;"
    assert item.metadata.labels[VGPU_NODE] == T4_NODE
    versions = [p for p in recorder.pods if p["metadata"]["name"] == "s30"]
    first_annotated = next(p for p in versions if VGPU_NODE in (p["metadata"].get("annotations") or {}))
    first_bound = next(p for p in versions if p["spec"].get("nodeName"))
    # One write: the Binding carried the annotations and the label, so no version of the
    # pod has the node without its devices (nor the devices without the node).
    assert first_annotated is first_bound
    assert first_bound["metadata"]["labels"][VGPU_NODE] == T4_NODE
    annotations = first_bound["metadata"]["annotations"]
    assert annotations[VGPU_NODE] == T4_NODE
    assert annotations[DEVICES_TO_ALLOCATE] == annotations[DEVICES_ALLOCATED] == f"{uuid},NVIDIA,4915,30:;"
    assert annotations[BIND_PHASE] == "allocating"
    assert int(annotations["hami.io/bind-time"]) == pytest.approx(time.time(), abs=120)
    # The node lock named the pod while it was bound, then the stand-in released it.
    t4_locks = [lock for node, lock in recorder.locks if node == T4_NODE]
    assert any(lock and lock.endswith(f",{namespace},s30") for lock in t4_locks), t4_locks
    assert core.read_node(T4_NODE).metadata.annotations.get(NODE_LOCK_ANNOTATION) is None
    assert "Traceback" not in log


def wait_for_value(get: Any, timeout_s: float, what: str) -> Any:
    holder: list[Any] = []

    def got() -> bool:
        value = get()
        if value:
            holder.append(value)
        return bool(value)

    wait_for(got, timeout_s, what)
    return holder[-1]


def set_lock(core: client.CoreV1Api, node: str, value: str | None) -> None:
    core.patch_node(node, {"metadata": {"annotations": {NODE_LOCK_ANNOTATION: value}}})


def test_another_pods_lock_is_honoured_until_released_and_a_dead_ones_taken_over(
    dev_cluster: Any, core: client.CoreV1Api, namespace: str, logs: Path
) -> None:
    create_pods(core, [pod("holder", namespace, "nobody")])  # exists, never scheduled
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    set_lock(core, T4_NODE, f"{now},{namespace},holder")
    try:
        with running_scheduler(dev_cluster.kubeconfig, SCHEDULER, logs, "--profile", "fgd") as scheduler:
            create_pods(core, [share("waits", namespace, 20, **ON_T4)])
            time.sleep(8)  # the pod is decided at once, then waits for the lock
            assert bound(core, namespace, "waits") is None
            assert not [e for e in pod_events(core, namespace, "waits") if e.reason == "FailedScheduling"]
            released = time.monotonic()
            set_lock(core, T4_NODE, None)
            wait_for(lambda: bound(core, namespace, "waits") is not None, 30, "the pod to bind once released")
            waited = time.monotonic() - released
            wait_for(
                lambda: (
                    core.read_namespaced_pod("waits", namespace).metadata.annotations.get(BIND_PHASE)
                    == "success"
                ),
                30,
                "the stand-in to allocate it and release its lock",
            )
            # A lock whose pod is gone is taken over at once.
            set_lock(core, T4_NODE, f"{now},{namespace},gone")
            create_pods(core, [share("takes-over", namespace, 20, **ON_T4)])
            wait_for(
                lambda: bound(core, namespace, "takes-over") is not None, 30, "a dead lock to be taken over"
            )
            log = scheduler.log()
    finally:
        set_lock(core, T4_NODE, None)
    assert waited < 10, f"bound {waited:.1f} s after the lock went"
    assert "Traceback" not in log


def test_a_restarted_scheduler_rebuilds_gpu_usage_from_the_pods_annotations(
    dev_cluster: Any, core: client.CoreV1Api, namespace: str, logs: Path
) -> None:
    """Three GPUs of the T4 node get a 60% pod from rl-scheduler, the fourth one from
    "another scheduler" (a pod created bound, with HAMi's annotations). After a restart,
    a 50% pod fits no GPU of the node; once one 60% pod is deleted, it goes to that GPU."""
    with running_scheduler(dev_cluster.kubeconfig, SCHEDULER, logs, "--profile", "fgd"):
        create_pods(core, [share(f"s60-{i}", namespace, 60, **ON_T4) for i in range(3)])
        wait_for(
            lambda: all(bound(core, namespace, f"s60-{i}") for i in range(3)), 90, "three 60% pods to bind"
        )
    gpus = {allocated_gpu(bound(core, namespace, f"s60-{i}")): f"s60-{i}" for i in range(3)}
    assert len(gpus) == 3  # 60% + 60% > 100%: one GPU each
    free_gpu = next(f"GPU-{T4_NODE}-{i}" for i in range(4) if f"GPU-{T4_NODE}-{i}" not in gpus)
    theirs = share("theirs", namespace, 60)
    theirs["spec"]["nodeName"] = T4_NODE
    theirs["spec"]["schedulerName"] = "hami-scheduler"
    theirs["metadata"]["annotations"] = {
        VGPU_NODE: T4_NODE,
        DEVICES_ALLOCATED: f"{free_gpu},NVIDIA,9830,60:;",
    }
    create_pods(core, [theirs])
    with running_scheduler(dev_cluster.kubeconfig, SCHEDULER, logs, "--profile", "fgd") as scheduler:
        create_pods(core, [share("s50", namespace, 50, **ON_T4)])

        def refused() -> bool:
            return any(e.reason == "FailedScheduling" for e in pod_events(core, namespace, "s50"))

        wait_for(refused, 60, "the 50% pod to be refused on a node whose GPUs hold 60% each")
        message = next(
            e.message for e in pod_events(core, namespace, "s50") if e.reason == "FailedScheduling"
        )
        # kube's words, preemption included: the T4 node's pods are of the same priority
        # (then, ours, when the pod is likely to start).
        assert kube_part(message) == (
            "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, "
            "2 node(s) didn't match Pod's node affinity/selector. no new claims to deallocate, "
            "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, "
            "2 Preemption is not helpful for scheduling."
        )
        freed = next(uuid for uuid, name in gpus.items() if name == "s60-1")
        core.delete_namespaced_pod("s60-1", namespace, grace_period_seconds=0)
        item = wait_for_value(
            lambda: bound(core, namespace, "s50"), 60, "the 50% pod to bind once a GPU is freed"
        )
        log = scheduler.log()
    assert allocated_gpu(item) == freed
    assert "Traceback" not in log


def gpu_memory(gpus: int, memory_mib: int) -> dict[str, Any]:
    """A pod spec's containers: one asking ``gpus`` GPUs of ``memory_mib`` MiB each."""
    limits = {"nvidia.com/gpu": str(gpus), "nvidia.com/gpumem": str(memory_mib)}
    return {"containers": [{"name": "c", "image": "pause", "resources": {"limits": limits}}]}


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        pytest.param(
            {"annotations": {"nvidia.com/vgpu-mode": "mig"}},
            'nvidia.com/vgpu-mode "mig": MIG is not implemented by rl-scheduler',
            id="MIG",
        ),
        pytest.param(
            {"annotations": {"nvidia.com/use-gputype": "H100"}},
            'no GPU is of the pod\'s type (nvidia.com/use-gputype "H100"); '
            "GPU types in the cluster: NVIDIA-T4, NVIDIA-V100M32",
            id="unknown type",
        ),
        pytest.param(
            {"extra": gpu_memory(1, 100_000)},
            "the pod asks 100000 MiB of GPU memory (nvidia.com/gpumem); "
            "the largest GPU it may use has 32768 MiB",
            id="larger than any GPU",
        ),
        pytest.param(
            {"extra": gpu_memory(3, 20_000)},
            "no node has 3 GPUs with 20000 MiB each (nvidia.com/gpumem)",
            id="several GPUs no node has",
        ),
        pytest.param(
            {"gpus": 5},
            "the pod asks 5 GPUs (nvidia.com/gpu); no node has more than 4 that it may use",
            id="more GPUs than any node",
        ),
        pytest.param(
            {"annotations": {"rl-scheduler.io/gpu-milli": "500"}},
            "the annotation rl-scheduler.io/gpu-milli is retired",
            id="retired annotation",
        ),
    ],
)
def test_what_is_not_supported_says_so_and_the_scheduler_goes_on(
    dev_cluster: Any, core: client.CoreV1Api, namespace: str, logs: Path, changes: dict[str, Any], reason: str
) -> None:
    changes = {"gpus": 1, **changes}
    with running_scheduler(dev_cluster.kubeconfig, SCHEDULER, logs, "--profile", "fgd") as scheduler:
        create_pods(core, [pod("refused", namespace, SCHEDULER, **changes), share("fine", namespace, 10)])
        expected = f"0/3 nodes are available: {reason}"

        def reported() -> bool:
            return any(
                e.reason == "FailedScheduling" and (e.message or "").startswith(expected)
                for e in pod_events(core, namespace, "refused")
            )

        try:
            wait_for(reported, 60, f"FailedScheduling starting {expected!r}")
        except AssertionError as error:
            seen = [(e.reason, e.message) for e in pod_events(core, namespace, "refused")]
            raise AssertionError(f"{error}; events: {seen}") from None
        wait_for(lambda: bound(core, namespace, "fine") is not None, 60, "the next pod to bind")
        assert bound(core, namespace, "refused") is None
        assert scheduler.process is not None
        assert scheduler.process.poll() is None
