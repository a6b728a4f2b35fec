"""The throughput benchmark's cluster side: KWOK nodes sized from the openb node list,
the benchmark's pods, and a watch that notes when each pod was bound."""

from __future__ import annotations

import contextlib
import json
import math
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from null_binder import raw_list, raw_watch
from throughput_schedulers import REPO

sys.path.insert(0, str(REPO / "hack"))
from devcluster import kube, names
from devcluster import nodes as devnodes
from devcluster.workload import PodRequest, pod_manifest

NAMESPACE = "rl-bench"
NODE_PREFIX = "bench-node"
PLAIN_NODE_PREFIX = "bench-plain"


class RunTimeoutError(RuntimeError):
    """Not every pod was bound within the run's time limit."""


# ---- nodes and pods ---------------------------------------------------------------


def bench_node_specs(
    rows: list[tuple[str, devnodes.NodeType]], count: int, hami: bool = True
) -> list[devnodes.NodeSpec]:
    """Node i gets the size of a fixed shuffle of the openb rows (cycled past its end),
    so 100 nodes are the first 100 of 1,000 and each prefix keeps the list's mix. GPUs
    are HAMi's (``hami``) or the plain NVIDIA device plugin's, under another name so a
    kept cluster's nodes are replaced rather than reused."""
    order = np.random.default_rng(0).permutation(len(rows))
    topology = devnodes.Topology()
    prefix = NODE_PREFIX if hami else PLAIN_NODE_PREFIX
    return [
        devnodes.NodeSpec(f"{prefix}-{i:05d}", rows[order[i % len(rows)]][1], *topology.place(i), hami=hami)
        for i in range(count)
    ]


def pod_requests(count: int, shares: bool = True) -> list[PodRequest]:
    """A fixed mix: 1 in 5 asks for a whole GPU, 1 in 5 for half a GPU (a whole one
    without ``shares``: the plain device plugin has no shares), the rest CPU only."""
    shapes = (
        PodRequest(500, 1024, gpu_count=1),
        PodRequest(500, 1024, gpu_count=1, gpu_milli=500 if shares else 1000),
        PodRequest(500, 1024),
        PodRequest(500, 1024),
        PodRequest(500, 1024),
    )
    return [shapes[i % len(shapes)] for i in range(count)]


def check_fits(specs: list[devnodes.NodeSpec], requests: list[PodRequest]) -> None:
    """Refuse a run whose pods cannot all fit (totals, with a GPU share counted as a
    whole GPU): unschedulable pods would measure retries, not binds."""
    need = {
        "cpu": sum(r.cpu_milli for r in requests),
        "memory": sum(r.memory_mib for r in requests),
        "gpus": sum(r.gpu_count for r in requests),
        "pods": len(requests),
    }
    have = {
        "cpu": sum(s.size.cpu_milli for s in specs),
        "memory": sum(s.size.memory_mib for s in specs),
        "gpus": sum(s.size.gpu_count for s in specs),
        "pods": sum(s.pods for s in specs),
    }
    short = [f"{k} {need[k]} > {have[k]}" for k in need if need[k] > have[k]]
    if short:
        raise SystemExit(f"{len(requests)} pods do not fit on {len(specs)} nodes: {', '.join(short)}")


def generated_node_names(core: client.CoreV1Api) -> set[str]:
    response: Any = core.list_node(label_selector=names.GENERATED_SELECTOR, _preload_content=False)
    return {item["metadata"]["name"] for item in json.loads(response.data)["items"]}


def ensure_nodes(core: client.CoreV1Api, specs: list[devnodes.NodeSpec], timeout_s: float) -> None:
    """The cluster's generated nodes become exactly ``specs``, Ready and untainted."""
    wanted = {spec.name for spec in specs}
    existing = generated_node_names(core)
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(core.delete_node, sorted(existing - wanted)))
    started = time.monotonic()
    created = devnodes.create_nodes(core, [s for s in specs if s.name not in existing], workers=16)
    print(f"  created {len(created.created)} nodes in {time.monotonic() - started:.1f} s", flush=True)
    wait_nodes_schedulable(core, wanted, timeout_s)
    print(f"  {len(wanted)} nodes Ready and untainted after {time.monotonic() - started:.1f} s", flush=True)


NOT_READY_TAINT = "node.kubernetes.io/not-ready"


def is_ready(node: dict[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def lifecycle_taints(node: dict[str, Any]) -> list[dict[str, Any]]:
    taints: list[dict[str, Any]] = (node.get("spec") or {}).get("taints") or []
    return [t for t in taints if t.get("key", "").startswith("node.kubernetes.io/")]


def lift_not_ready_taints(core: client.CoreV1Api, nodes: list[dict[str, Any]]) -> None:
    """Drop the not-ready taint (the NodeTaint admission plugin puts it on every new
    node) from nodes KWOK already reports Ready. The node lifecycle controller would do
    the same, but at its client's 20 QPS among its other work: 5,000 nodes took over
    10 minutes. A conflict with the controller is left for the next round."""

    def lift(node: dict[str, Any]) -> None:
        taints = [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("key") != NOT_READY_TAINT]
        with contextlib.suppress(ApiException):
            core.patch_node(node["metadata"]["name"], {"spec": {"taints": taints or None}})

    due = [
        n for n in nodes if is_ready(n) and any(t.get("key") == NOT_READY_TAINT for t in lifecycle_taints(n))
    ]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lift, due))


def wait_nodes_schedulable(core: client.CoreV1Api, wanted: set[str], timeout_s: float) -> None:
    """Wait until every wanted node is Ready and has no node lifecycle taint."""
    deadline = time.monotonic() + timeout_s
    while True:
        response: Any = core.list_node(label_selector=names.GENERATED_SELECTOR, _preload_content=False)
        items = json.loads(response.data)["items"]
        waiting = wanted - {n["metadata"]["name"] for n in items if is_ready(n) and not lifecycle_taints(n)}
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise RunTimeoutError(
                f"{len(waiting)} of {len(wanted)} nodes not Ready and untainted after {timeout_s:.0f} s "
                f"(e.g. {sorted(waiting)[:3]})"
            )
        lift_not_ready_taints(core, [n for n in items if n["metadata"]["name"] in waiting])
        time.sleep(1.0)


def run_manifests(run_id: str, scheduler_name: str, count: int, shares: bool = True) -> list[dict[str, Any]]:
    return [
        pod_manifest(f"{run_id}-{i:05d}", NAMESPACE, request, scheduler_name=scheduler_name, run_id=run_id)
        for i, request in enumerate(pod_requests(count, shares))
    ]


def create_pods(
    core: client.CoreV1Api, run_id: str, scheduler_name: str, count: int, shares: bool = True
) -> None:
    manifests = run_manifests(run_id, scheduler_name, count, shares)
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda m: core.create_namespaced_pod(NAMESPACE, kube.body(m)), manifests))


class PacedCreator:
    """Creates a run's pods at a steady ``rate`` a second from a thread of its own (at
    most 16 requests in flight), recording when each request was sent: the creation
    time of each pod to the millisecond (an object's creationTimestamp has seconds).
    When the API server cannot keep up, the offered rate is lower than asked:
    ``offered_per_s`` says what it was."""

    def __init__(
        self, core: client.CoreV1Api, run_id: str, scheduler_name: str, count: int, rate: float,
        shares: bool = True,
    ) -> None:  # fmt: skip
        self.manifests = run_manifests(run_id, scheduler_name, count, shares)
        self.core = core
        self.rate = rate
        self.created_at: dict[str, float] = {}
        self.errors: list[str] = []
        self._thread = threading.Thread(target=self._run, name="paced-creator", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout_s: float) -> None:
        self._thread.join(timeout_s)

    @property
    def offered_per_s(self) -> float:
        times = sorted(self.created_at.values())
        if len(times) < 2 or times[-1] <= times[0]:
            return math.nan
        return (len(times) - 1) / (times[-1] - times[0])

    def _create(self, manifest: dict[str, Any]) -> None:
        name = manifest["metadata"]["name"]
        self.created_at[name] = time.time()
        try:
            self.core.create_namespaced_pod(NAMESPACE, kube.body(manifest))
        except ApiException as error:
            self.created_at.pop(name, None)
            self.errors.append(f"{name}: {error.status} {error.reason}")

    def _run(self) -> None:
        started = time.monotonic()
        with ThreadPoolExecutor(16) as pool:
            for i, manifest in enumerate(self.manifests):
                delay = started + i / self.rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                pool.submit(self._create, manifest)


def delete_pods(core: client.CoreV1Api, timeout_s: float = 300.0) -> None:
    """Delete every pod (and event) of the benchmark's namespace and wait until gone.
    A busy API server may time out a collection delete (504): it is asked again."""
    deadline = time.monotonic() + timeout_s
    deleted = False
    while True:
        try:
            if not deleted:
                core.delete_collection_namespaced_pod(NAMESPACE, grace_period_seconds=0)
                core.delete_collection_namespaced_event(NAMESPACE)
                deleted = True
            if not raw_list(core, namespace=NAMESPACE, limit=1)["items"]:
                return
        except (ApiException, OSError) as error:
            if isinstance(error, ApiException) and error.status is not None and error.status < 500:
                raise
            print(
                f"  deleting pods: {type(error).__name__} {getattr(error, 'status', '')}; again", flush=True
            )
            deleted = False
        if time.monotonic() > deadline:
            raise RunTimeoutError(f"pods of namespace {NAMESPACE} still there after {timeout_s:.0f} s")
        time.sleep(1.0)


# ---- watching binds ---------------------------------------------------------------


RELABEL_LABEL = "rl-bench.io/relabelled"


class NodeRelabeller:
    """Patches a label onto the generated nodes, one at a time, at ``per_s`` a second
    while a run goes on: what the node lifecycle controller does to a fresh cluster
    (``beta.kubernetes.io/os`` and ``arch``, node by node), or an operator labelling
    its nodes. A label changes no node's fit, only what a scheduler's cache must take in."""

    def __init__(self, core: client.CoreV1Api, value: str, per_s: float) -> None:
        self.core, self.value, self.per_s = core, value, per_s
        self.patched = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="relabeller", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        started = time.monotonic()
        for name in sorted(generated_node_names(self.core)):
            if self._stop.is_set():
                return
            with contextlib.suppress(ApiException):  # a node gone meanwhile
                self.core.patch_node(name, {"metadata": {"labels": {RELABEL_LABEL: self.value}}})
                self.patched += 1
            self._stop.wait(max(0.0, started + (self.patched + 1) / self.per_s - time.monotonic()))


class BindWatcher:
    """Wall-clock time at which the watch first showed each pod with a nodeName."""

    def __init__(self, core: client.CoreV1Api, selector: str) -> None:
        self.core = core
        self.selector = selector
        self.bound_at: dict[str, float] = {}
        self._stop = threading.Event()

    def start(self) -> None:
        resource_version = self._list()
        threading.Thread(target=self._follow, args=(resource_version,), daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    @property
    def bound(self) -> int:
        return len(self.bound_at)

    def _record(self, pod: dict[str, Any]) -> None:
        key = pod["metadata"]["name"]
        if (pod.get("spec") or {}).get("nodeName") and key not in self.bound_at:
            self.bound_at[key] = time.time()

    def _list(self) -> str:
        listing = raw_list(self.core, namespace=NAMESPACE, label_selector=self.selector)
        for item in listing["items"]:
            self._record(item)
        return str(listing["metadata"]["resourceVersion"])

    def _follow(self, resource_version: str) -> None:
        while not self._stop.is_set():
            try:
                for event in raw_watch(
                    self.core, resource_version, namespace=NAMESPACE, label_selector=self.selector
                ):
                    if self._stop.is_set():
                        return
                    if event.get("type") == "ERROR":
                        raise RuntimeError(f"watch error: {event.get('object')}")
                    resource_version = event["object"]["metadata"]["resourceVersion"]
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        self._record(event["object"])
            except Exception as error:  # expired or dropped: list again (late binds get "now")
                print(f"  watch restarted: {type(error).__name__}: {str(error)[:200]}", flush=True)
                time.sleep(0.5)
                resource_version = self._list()
