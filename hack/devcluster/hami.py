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

import json
import logging
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

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


# Threads playing Allocate: a node's pods go to one of them, in order, as one plugin per
# node would see them; different nodes proceed in parallel, as their plugins do. Nodes
# are dealt to the threads in turn as they first need one, so no two share a thread until
# more nodes than threads have pods in Allocate (hashing the name made a few threads
# serve two or three busy nodes each, and doubled those nodes' wait). They
# mostly wait for the API server (a 1,000-node burst: 90% of py-spy's samples of 8 threads
# were in their requests, and the scheduler's binds waited for them).
WORKERS = 128
# One watch lasts this long before it is resumed from its last resourceVersion.
WATCH_TIMEOUT_S = 300
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


def lock_path() -> str:
    """JSON-pointer path of the node lock annotation ("/" escaped as "~1")."""
    return "/metadata/annotations/" + NODE_LOCK_ANNOTATION.replace("~", "~0").replace("/", "~1")


class DevicePluginStandIn:
    """Allocate for HAMi pods bound to the nodes ``serves`` accepts.

    It reads the pods as plain JSON (no client models: with 5,000 pods a relist or a
    watch decoded into models costs seconds of CPU that a real plugin, one per node,
    never spends) and keeps one watch open, resuming it where it ended."""

    def __init__(self, core: client.CoreV1Api, serves: Callable[[str], bool]) -> None:
        self.core = core
        self.core.api_client.rest_client.pool_manager.connection_pool_kw["maxsize"] = WORKERS + 1
        self.serves = serves
        self.allocated: list[str] = []  # namespace/name, in order
        self._queues = [queue.SimpleQueue[dict[str, Any] | None]() for _ in range(WORKERS)]
        self._pending: set[str] = set()  # namespace/name handed to a worker, not yet done
        self._worker_of: dict[str, int] = {}  # node -> its thread, dealt in turn
        self._guard = threading.Lock()

    def allocate(self, pod: Mapping[str, Any]) -> bool:
        """Play Allocate for ``pod`` (its JSON) if it waits for it; True if it did."""
        metadata = pod.get("metadata") or {}
        annotations = metadata.get("annotations") or {}
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or annotations.get(BIND_PHASE) != BIND_PHASE_ALLOCATING or not self.serves(node):
            return False
        namespace, name = metadata["namespace"], metadata["name"]
        patch = {
            "metadata": {
                "annotations": {
                    BIND_PHASE: BIND_PHASE_SUCCESS,
                    DEVICES_TO_ALLOCATE: erased(annotations.get(DEVICES_TO_ALLOCATE, "")),
                }
            }
        }
        try:
            self.core.patch_namespaced_pod(
                name, namespace, patch, _preload_content=False, _content_type=MERGE_PATCH
            )
        except ApiException as error:
            if error.status == 404:
                return False
            raise
        self.release(node, namespace, name)
        with self._guard:
            self.allocated.append(f"{namespace}/{name}")
        return True

    def release(self, node: str, namespace: str, pod: str) -> None:
        """Remove the node lock if it names the pod (HAMi's ``ReleaseNodeLock``): read
        it, then a JSON patch that tests its value before removing it (no retries on a
        node that changed meanwhile for another reason)."""
        try:
            response: Any = self.core.read_node(node, _preload_content=False)
            current = json.loads(response.data)
        except ApiException as error:
            if error.status == 404:
                return
            raise
        lock = ((current.get("metadata") or {}).get("annotations") or {}).get(NODE_LOCK_ANNOTATION)
        if lock is None or not lock.endswith(f",{namespace},{pod}"):
            return
        operations = [
            {"op": "test", "path": lock_path(), "value": lock},
            {"op": "remove", "path": lock_path()},
        ]
        try:
            self.core.patch_node(node, operations, _preload_content=False, _content_type=JSON_PATCH)
        except ApiException as error:
            if error.status not in (404, 409, 422):  # gone, or another lock by now
                raise

    def _submit(self, pod: dict[str, Any]) -> None:
        """Hand a pod waiting for Allocate to its node's worker, once."""
        metadata = pod.get("metadata") or {}
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or (metadata.get("annotations") or {}).get(BIND_PHASE) != BIND_PHASE_ALLOCATING:
            return
        key = f"{metadata.get('namespace')}/{metadata.get('name')}"
        with self._guard:
            if key in self._pending:
                return
            self._pending.add(key)
            worker = self._worker_of.setdefault(node, len(self._worker_of) % WORKERS)
        self._queues[worker].put(pod)

    def _work(self, inbox: queue.SimpleQueue[dict[str, Any] | None]) -> None:
        while (pod := inbox.get()) is not None:
            metadata = pod.get("metadata") or {}
            try:
                self.allocate(pod)
            except Exception as error:  # the API server restarts in some tests; carry on
                log.warning(
                    "HAMi device plugin stand-in: %s/%s: %s",
                    metadata.get("namespace"),
                    metadata.get("name"),
                    error,
                )
            finally:
                with self._guard:
                    self._pending.discard(f"{metadata.get('namespace')}/{metadata.get('name')}")

    def _list(self) -> str:
        """Every HAMi pod now; the listing's resourceVersion."""
        response: Any = self.core.list_pod_for_all_namespaces(
            label_selector=VGPU_NODE, _preload_content=False
        )
        listing = json.loads(response.data)
        for pod in listing.get("items") or []:
            self._submit(pod)
        return str(listing["metadata"]["resourceVersion"])

    def _watch(self, version: str, stop: threading.Event) -> str | None:
        """Events after ``version`` until the watch ends; the last version seen, or None
        when it is too old (410) and a new listing is needed."""
        response: Any = self.core.list_pod_for_all_namespaces(
            label_selector=VGPU_NODE,
            watch=True,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=WATCH_TIMEOUT_S,
            _preload_content=False,
        )
        try:
            for line in iter_resp_lines(response):  # type: ignore[no-untyped-call]
                event = json.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    return None if obj.get("code") == 410 else version
                version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                if kind in ("ADDED", "MODIFIED"):
                    self._submit(obj)
                if stop.is_set():
                    break
        finally:
            response.release_conn()
        return version

    def run(self, stop: threading.Event) -> None:
        """Watch HAMi pods (the ``hami.io/vgpu-node`` label) until ``stop``."""
        workers = [
            threading.Thread(target=self._work, args=(inbox,), name=f"hami-allocate-{i}", daemon=True)
            for i, inbox in enumerate(self._queues)
        ]
        for worker in workers:
            worker.start()
        version: str | None = None
        try:
            while not stop.is_set():
                try:
                    version = self._watch(version, stop) if version else self._list()
                except Exception as error:  # the API server restarts in some tests; carry on
                    log.warning("HAMi device plugin stand-in: %s", error)
                    version = None
                    stop.wait(1.0)
        finally:
            for inbox in self._queues:
                inbox.put(None)


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
