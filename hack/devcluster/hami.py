"""HAMi on fake nodes: KWOK nodes registered as HAMi's device plugin registers GPUs,
and the Allocate side of that plugin, played for nodes that have no real one.

KWOK fakes the kubelet; nothing fakes HAMi's device plugin. Yet a scheduler speaking
HAMi's protocol takes the node lock ``hami.io/mutex.lock`` before each GPU bind and
leaves it for the plugin to release after Allocate. ``DevicePluginStandIn`` does what
the plugin does then (``pkg/device-plugin/nvidiadevice/nvinternal/plugin/server.go``):
for a bound pod in ``hami.io/bind-phase: allocating`` it erases the pod's
``hami.io/vgpu-devices-to-allocate`` entries, marks it ``success`` and releases the node
lock that names it. ``up`` runs it for the cluster's KWOK nodes (component
``hami-device-plugin``); tests run it for a real node that has no device plugin.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from devcluster import kube, names
from scheduler.resources.hami import (
    BIND_PHASE,
    BIND_PHASE_ALLOCATING,
    BIND_PHASE_SUCCESS,
    DEVICES_TO_ALLOCATE,
    NODE_LOCK_ANNOTATION,
    VGPU_NODE,
    Device,
    format_register,
)
from scheduler.sim.openb_hami import DEFAULT_GPU_MEMORY_MIB, OPENB_GPU_MEMORY_MIB, gpu_type

log = logging.getLogger(__name__)
# vGPU slots per GPU: HAMi's chart default (deviceSplitCount).
SPLIT_COUNT = 10


def devices(node: str, count: int, model: str | None, split: int = SPLIT_COUNT) -> list[Device]:
    """The node's GPUs as HAMi's plugin registers them (type ``NVIDIA-<model>``, memory
    of the openb model, see ``scheduler.sim.openb_hami``)."""
    memory = OPENB_GPU_MEMORY_MIB.get(model or "", DEFAULT_GPU_MEMORY_MIB)
    kind = gpu_type(model) if model else "NVIDIA"
    return [Device(f"GPU-{node}-{i}", i, split, memory, 100, kind) for i in range(count)]


def register_annotation(node: str, count: int, model: str | None, split: int = SPLIT_COUNT) -> str:
    return format_register(devices(node, count, model, split))


def erased(allocation: str) -> str:
    """``hami.io/vgpu-devices-to-allocate`` once every container has had its devices."""
    return ";" * allocation.count(";")


def is_kwok_node(core: client.CoreV1Api) -> Callable[[str], bool]:
    """Whether a node is a KWOK one (looked up once per node)."""
    known: dict[str, bool] = {}

    def check(name: str) -> bool:
        if name not in known:
            try:
                node: Any = core.read_node(name)
                labels = node.metadata.labels or {}
            except ApiException:
                return False
            known[name] = labels.get(names.KWOK_TYPE_LABEL) == names.KWOK_TYPE_VALUE
        return known[name]

    return check


class DevicePluginStandIn:
    """Allocate for HAMi pods bound to the nodes ``serves`` accepts."""

    def __init__(self, core: client.CoreV1Api, serves: Callable[[str], bool]) -> None:
        self.core = core
        self.serves = serves
        self.allocated: list[str] = []  # namespace/name, in order

    def allocate(self, pod: Any) -> bool:
        """Play Allocate for ``pod`` (a V1Pod) if it waits for it; True if it did."""
        annotations = pod.metadata.annotations or {}
        node = pod.spec.node_name
        if not node or annotations.get(BIND_PHASE) != BIND_PHASE_ALLOCATING or not self.serves(node):
            return False
        namespace, name = pod.metadata.namespace, pod.metadata.name
        patch = {
            "metadata": {
                "annotations": {
                    BIND_PHASE: BIND_PHASE_SUCCESS,
                    DEVICES_TO_ALLOCATE: erased(annotations.get(DEVICES_TO_ALLOCATE, "")),
                }
            }
        }
        try:
            self.core.patch_namespaced_pod(name, namespace, patch)
        except ApiException as error:
            if error.status == 404:
                return False
            raise
        self.release(node, namespace, name)
        self.allocated.append(f"{namespace}/{name}")
        return True

    def release(self, node: str, namespace: str, pod: str) -> None:
        """Remove the node lock if it names the pod (HAMi's ``ReleaseNodeLock``)."""
        for _ in range(5):
            current: Any = self.core.read_node(node).metadata
            lock = (current.annotations or {}).get(NODE_LOCK_ANNOTATION)
            if lock is None or not lock.endswith(f",{namespace},{pod}"):
                return
            version = current.resource_version
            patch = {"metadata": {"annotations": {NODE_LOCK_ANNOTATION: None}, "resourceVersion": version}}
            try:
                self.core.patch_node(node, patch)
                return
            except ApiException as error:
                if error.status != 409:
                    raise

    def run(self, stop: threading.Event) -> None:
        """Watch HAMi pods (the ``hami.io/vgpu-node`` label) until ``stop``."""
        while not stop.is_set():
            try:
                listing: Any = self.core.list_pod_for_all_namespaces(label_selector=VGPU_NODE)
                for pod in listing.items:
                    self.allocate(pod)
                stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
                    self.core.list_pod_for_all_namespaces,
                    label_selector=VGPU_NODE,
                    resource_version=listing.metadata.resource_version,
                    timeout_seconds=5,
                )
                for event in stream:
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self.allocate(event["object"])
                    if stop.is_set():
                        break
            except Exception as error:  # the API server restarts in some tests; carry on
                log.warning("HAMi device plugin stand-in: %s", error)
                stop.wait(1.0)


def serve(kubeconfig: Path, stop: threading.Event | None = None, nodes: Iterable[str] = ()) -> None:
    """Run the stand-in for ``nodes`` (default: the cluster's KWOK nodes) until ``stop``
    (forever by default)."""
    core = kube.core_v1(kubeconfig)
    wanted = set(nodes)
    serves = wanted.__contains__ if wanted else is_kwok_node(core)
    DevicePluginStandIn(core, serves).run(stop or threading.Event())


def start_in_thread(
    core: client.CoreV1Api, nodes: Iterable[str]
) -> tuple[DevicePluginStandIn, threading.Event]:
    """The stand-in for ``nodes``, in a daemon thread; set the event to stop it."""
    wanted = set(nodes)
    stand_in = DevicePluginStandIn(core, wanted.__contains__)
    stop = threading.Event()
    threading.Thread(target=stand_in.run, args=(stop,), name="hami-device-plugin", daemon=True).start()
    return stand_in, stop


COMPONENT = "hami-device-plugin"


def start_component(workdir: Path, kubeconfig: Path) -> int:
    """Run ``serve`` for the cluster in ``workdir`` as one of its components: detached,
    its pid in ``pids/``, its log in ``logs/``, stopped with the cluster (its command
    line names the workdir, as ``processes`` requires)."""
    hack = Path(__file__).resolve().parent.parent
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(hack), os.environ.get("PYTHONPATH")])),
    }
    (workdir / "logs").mkdir(exist_ok=True)
    (workdir / "pids").mkdir(exist_ok=True)
    command = [sys.executable, "-m", "devcluster", "hami-plugin", "--kubeconfig", str(kubeconfig)]
    with (workdir / "logs" / f"{COMPONENT}.log").open("ab") as log_file:
        process = subprocess.Popen(
            command, env=env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True
        )
    (workdir / "pids" / f"{COMPONENT}.pid").write_text(f"{process.pid}\n")
    return process.pid
