"""The cases of kube's scheduler_perf that measure a metric window (its event-handling
cases) as kube's harness runs them: every operation in order, each run from an empty
cluster, the scheduler under test running throughout.

- ``createNodes``: KWOK nodes from the template (its own names, ``node-low-capacity-{{.Index}}``),
  waited for until Ready without the not-ready taint (kube's harness has no lifecycle
  controller to add it), with their CSINodes;
- ``createPods``: pods named as their template names them (``updateAny`` finds them so),
  claims ``pvc-<i>`` as kube names them; waited for until bound unless
  ``skipWaitToCompletion``;
- ``barrier``: until the pods made so far in its namespaces (those since the last
  ``Scheduled`` barrier there, kube's count), with its labels, are bound or (``Attempted``)
  have a PodScheduled condition;
- ``updateAny``: object i of the template written over object i, ``per_second`` a second. A
  node is replaced as the template says (with the benchmark's KWOK labels), then its
  status. A pod is changed where the template changes it: its labels, what its spec sets
  (tolerations added, container resources, through ``resize`` when asked), and its
  scheduling gates removed when the template has none; what admission added (the
  service account's volume, default tolerations) stays, since the API server refuses an
  update that removes it. kube's harness then writes the template's status over the
  pod's, which only erases the scheduler's PodScheduled condition; that write is left
  out;
- ``deletePods``: the namespace's pods with the labels, ``per_second`` a second, in the
  background unless waited for;
- ``start``/``stopCollectingMetrics``: the window; its pods are ``PodsOp.measured``.

The rate is that of the window's pods bound inside it (by the API server when it closes,
at the time the watch saw each bind), (bound - 1) / (last - first bind), as for every
case of this benchmark; kube's harness averages one-second samples, leaving
out the seconds without a bind.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from null_binder import raw_list
from scheduler_perf_background import attempted
from scheduler_perf_objects import (
    PERF_LABEL,
    ROLE_LABEL,
    PodObjects,
    create_all,
    node_manifest,
    node_objects,
    perf_nodes,
    pod_manifest,
    pod_objects,
)
from scheduler_perf_ops import BarrierOp, DeletePodsOp, MetricsOp, NodesOp, Plan, PodsOp, UpdateOp
from scheduler_perf_plan import fill, instance, matches
from throughput_cluster import NOT_READY_TAINT, is_ready, lift_not_ready_taints

from devcluster import kube  # on the path scheduler_perf_objects sets

Json = dict[str, Any]
POLL_S = 0.2
CONFLICT_RETRIES = 20


@dataclass
class Window:
    """What one run of a case in sequence measured."""

    opened: float = float("nan")  # wall-clock time the metric window opened
    closed: float = float("nan")
    measured: list[tuple[str, str]] = field(default_factory=list)  # (namespace, name) of its pods
    # those of them the API server had bound when it closed (the watch may tell a bind
    # a little later than a barrier's listing saw it)
    bound_when_closed: set[tuple[str, str]] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)  # of background deletions


def pod_name(op: PodsOp, index: int, run: str, op_index: int) -> str:
    """The template's own name for pod ``index`` (kube's, ``updateAny`` names pods so),
    else one of the run's."""
    metadata = instance(op.template, index, op.count, op.text).get("metadata") or {}
    if metadata.get("name") and "generateName" not in metadata:
        return str(metadata["name"])
    return f"{run}-{op_index}-{index}"


def pods_of(op: PodsOp, op_index: int, run: str, scheduler_name: str) -> list[PodObjects]:
    made = []
    for i in range(op.count):
        pod = pod_objects(op, i, pod_name(op, i, run, op_index), scheduler_name, run, claim_name=f"pvc-{i}")
        if not op.measured:
            pod.pod["metadata"]["labels"][ROLE_LABEL] = "background" if op.background else "unmeasured"
        made.append(pod)
    return made


def updated_pod(current: Json, desired: Json) -> Json:
    """``current`` changed where ``desired`` (a rendered template) changes it (module doc)."""
    body: Json = {**current, "metadata": dict(current["metadata"]), "spec": dict(current["spec"])}
    role = (current["metadata"].get("labels") or {}).get(ROLE_LABEL)
    body["metadata"]["labels"] = {**desired["metadata"]["labels"], **({ROLE_LABEL: role} if role else {})}
    spec = body["spec"]
    for key, value in desired["spec"].items():
        if key == "tolerations":
            spec[key] = (spec.get(key) or []) + [t for t in value if t not in (spec.get(key) or [])]
        elif key == "containers":
            by_name = {c["name"]: c for c in value}
            spec[key] = [
                {**c, "resources": by_name[c["name"]].get("resources") or {}} if c["name"] in by_name else c
                for c in spec[key]
            ]
        else:
            spec[key] = value
    if "schedulingGates" not in desired["spec"]:
        spec.pop("schedulingGates", None)
    return body


def actuated(pod: Json) -> Json:
    """``pod`` with each running container's ``status.containerStatuses[].resources`` as
    its spec asks, as a kubelet that resizes in place reports them (and as the API server
    wants them before it takes a resize: KWOK reports none)."""
    resources = {c["name"]: c.get("resources") or {} for c in pod["spec"].get("containers") or []}
    statuses = [
        {**status, "resources": resources.get(status.get("name"), {})}
        for status in (pod.get("status") or {}).get("containerStatuses") or []
    ]
    return {**pod, "status": {**(pod.get("status") or {}), "containerStatuses": statuses}}


class Sequence:
    """One run of a case in sequence, for the scheduler ``scheduler_name``."""

    def __init__(self, core: client.CoreV1Api, plan: Plan, run: str, scheduler_name: str, timeout_s: float):
        self.core = core
        self.plan = plan
        self.run = run
        self.scheduler_name = scheduler_name
        self.timeout_s = timeout_s
        self.window = Window()
        # namespace -> pods made there without a wait since its last Scheduled barrier
        self.pods_since: dict[str, int] = {}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def execute(self) -> Window:
        """Every operation in order; raises ``TimeoutError`` when a wait outlasts the timeout."""
        handlers: dict[type, Callable[[Any, int], None]] = {
            NodesOp: self._nodes,
            PodsOp: self._pods,
            BarrierOp: self._barrier,
            UpdateOp: self._update,
            DeletePodsOp: self._deletions,
            MetricsOp: self._metrics,
        }
        try:
            for op_index, op in enumerate(self.plan.ops):
                handler = handlers.get(type(op))
                if handler is None:
                    raise ValueError(f"{type(op).__name__} in a case run in sequence")
                handler(op, op_index)
        finally:
            self._stop.set()
            for thread in self._threads:
                thread.join(timeout=60)
        if math.isnan(self.window.closed):  # never stopped: the window ends with the case
            self.window.closed = time.time()
            self._note_bound()
        return self.window

    # ---- operations -------------------------------------------------------------------

    def _nodes(self, op: NodesOp, op_index: int) -> None:
        manifests, csi_nodes = node_objects([op], made_by=self.run, first=op_index)
        storage = client.StorageV1Api(self.core.api_client)
        for csi in csi_nodes:
            storage.create_csi_node(kube.body(csi))
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda m: self.core.create_node(kube.body(m)), manifests))
        wanted = {m["metadata"]["name"] for m in manifests}
        self._until(lambda: self._not_ready(wanted), f"{len(wanted)} nodes Ready")

    def _not_ready(self, wanted: set[str]) -> int:
        nodes = perf_nodes(self.core, self.run)
        waiting = [
            n
            for n in nodes
            if n["metadata"]["name"] in wanted
            and (
                not is_ready(n) or any(t.get("key") == NOT_READY_TAINT for t in n["spec"].get("taints") or [])
            )
        ]
        lift_not_ready_taints(self.core, [n for n in waiting if is_ready(n)])
        return len(waiting) + len(wanted - {n["metadata"]["name"] for n in nodes})

    def _pods(self, op: PodsOp, op_index: int) -> None:
        made = pods_of(op, op_index, self.run, self.scheduler_name)
        create_all(self.core, made)
        if op.measured:
            self.window.measured += [(p.namespace, p.pod["metadata"]["name"]) for p in made]
        if op.background:  # kube counts only these for its barriers
            self.pods_since[op.namespace] = self.pods_since.get(op.namespace, 0) + op.count
        else:  # kube's wait: as many pods of the namespace bound as this made
            self._until(
                lambda: op.count - sum(1 for p in self._pods_in(op.namespace) if _bound(p)),
                f"{op.count} pods of {op.namespace} bound",
                op.namespace,
            )

    def _metrics(self, op: MetricsOp, _index: int) -> None:
        if op.collecting:
            self.window.opened = time.time()
            return
        self.window.closed = time.time()
        self._note_bound()

    def _note_bound(self) -> None:
        measured = set(self.window.measured)
        for namespace in {namespace for namespace, _ in measured}:
            for pod in self._pods_in(namespace):
                key = (namespace, pod["metadata"]["name"])
                if key in measured and _bound(pod):
                    self.window.bound_when_closed.add(key)

    def _barrier(self, op: BarrierOp, _index: int) -> None:
        """kube's: in each namespace, as many of its pods with the labels bound (or tried)
        as were made there without a wait since its last ``Scheduled`` barrier."""
        namespaces = list(op.namespaces) or sorted(self.pods_since)

        def done(pod: Json) -> bool:
            return _bound(pod) or (op.stage == "Attempted" and attempted(pod))

        def waiting() -> int:
            return sum(
                max(
                    0,
                    self.pods_since.get(namespace, 0)
                    - sum(
                        1
                        for p in self._pods_in(namespace)
                        if matches(p["metadata"].get("labels") or {}, op.selector) and done(p)
                    ),
                )
                for namespace in namespaces
            )

        self._until(waiting, f"barrier ({op.stage}) on {', '.join(namespaces)}", *namespaces)
        if op.stage != "Attempted":
            for namespace in namespaces:
                self.pods_since.pop(namespace, None)

    def _update(self, op: UpdateOp, _index: int) -> None:
        for index in range(op.count):
            started = time.monotonic()
            desired: Json = yaml.safe_load(fill(op.text, index, op.count))
            if op.kind == "Node":
                self._update_node(desired)
            else:
                self._update_pod(op, desired)
            if op.per_second > 0:
                time.sleep(max(0.0, 1 / op.per_second - (time.monotonic() - started)))

    def _update_node(self, desired: Json) -> None:
        name = desired["metadata"]["name"]
        node = node_manifest(desired, name, {PERF_LABEL: self.run})
        self.core.replace_node(name, kube.body(node))
        self.core.replace_node_status(name, kube.body(node))

    def _update_pod(self, op: UpdateOp, desired: Json) -> None:
        name = desired["metadata"]["name"]
        wanted = pod_manifest(desired, name, self.scheduler_name, self.run)
        if op.subresource == "resize":
            self._write_pod(name, op.namespace, actuated)  # what a kubelet that resizes reports
            self._write_pod(name, op.namespace, lambda pod: updated_pod(pod, wanted), "resize")
            self._write_pod(name, op.namespace, actuated)  # and the resize done at once
        else:
            self._write_pod(name, op.namespace, lambda pod: updated_pod(pod, wanted))

    def _write_pod(
        self, name: str, namespace: str, change: Callable[[Json], Json], subresource: str = ""
    ) -> None:
        """``change`` of the pod as it is now written to it (``status`` when ``change``
        is ``actuated``), read anew after a conflict with another writer."""
        writers = {
            "": self.core.replace_namespaced_pod,
            "resize": self.core.replace_namespaced_pod_resize,
        }
        write = self.core.replace_namespaced_pod_status if change is actuated else writers[subresource]
        for _ in range(CONFLICT_RETRIES):
            response: Any = self.core.read_namespaced_pod(name, namespace, _preload_content=False)
            try:
                write(name, namespace, kube.body(change(json.loads(response.data))))
                return
            except ApiException as error:
                if error.status != 409:
                    raise
        raise RuntimeError(f"pod {namespace}/{name}: {CONFLICT_RETRIES} conflicts in a row on update")

    def _deletable(self, op: DeletePodsOp) -> list[str]:
        return [
            p["metadata"]["name"]
            for p in self._pods_in(op.namespace)
            if matches(p["metadata"].get("labels") or {}, op.selector)
            and not p["metadata"].get("deletionTimestamp")
        ]

    def _delete(self, op: DeletePodsOp) -> None:
        names = self._deletable(op)
        for name in names:
            if self._stop.is_set():
                return
            try:
                self.core.delete_namespaced_pod(name, op.namespace)
            except ApiException as error:
                if error.status != 404:
                    raise
            if op.per_second > 0:
                self._stop.wait(1 / op.per_second)
        if op.wait:
            gone = set(names)
            self._until(
                lambda: sum(1 for p in self._pods_in(op.namespace) if p["metadata"]["name"] in gone),
                f"{len(names)} pods of {op.namespace} deleted",
            )

    def _deletions(self, op: DeletePodsOp, _index: int) -> None:
        if op.wait:
            self._delete(op)
            return
        thread = threading.Thread(target=self._delete_in_background, args=(op,), daemon=True)
        thread.start()
        self._threads.append(thread)

    def _delete_in_background(self, op: DeletePodsOp) -> None:
        try:
            self._delete(op)
        except Exception as error:  # reported with the run, never lost in a thread
            self.window.errors.append(f"deletePods {op.namespace}: {type(error).__name__}: {error}")

    # ---- waiting ----------------------------------------------------------------------

    def _pods_in(self, namespace: str) -> list[Json]:
        items: list[Json] = raw_list(self.core, namespace, label_selector=f"{PERF_LABEL}={self.run}")["items"]
        return items

    def _until(self, waiting: Callable[[], int], what: str, *namespaces: str) -> None:
        """Until ``waiting()`` is 0, or raise ``TimeoutError`` naming ``what`` and why a
        pending pod of ``namespaces`` is pending."""
        deadline = time.monotonic() + self.timeout_s
        while (left := waiting()) > 0:
            if time.monotonic() > deadline:
                why = self._why_pending(namespaces)
                raise TimeoutError(f"{what}: {left} still waiting after {self.timeout_s:.0f} s{why}")
            time.sleep(POLL_S)

    def _why_pending(self, namespaces: tuple[str, ...]) -> str:
        for namespace in namespaces:
            for pod in self._pods_in(namespace):
                if not _bound(pod):
                    conditions = (pod.get("status") or {}).get("conditions") or []
                    message = next(
                        (c.get("message") for c in conditions if c.get("type") == "PodScheduled"), None
                    )
                    return f"; e.g. {namespace}/{pod['metadata']['name']}: {message or 'not tried'}"
        return ""


def _bound(pod: Json) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))
