"""What goes on while a run's measured pods are scheduled, as kube's harness does it:

- ``deletePods``: the namespace's pods deleted one by one, ``per_second`` a second (all at
  once for 0), with their own grace period;
- ``churn``: every interval, one object of each template (pods for the scheduler under
  test, services, nodes) made, and in ``recreate`` mode the one made ``number`` rounds
  earlier deleted instead;

each in a thread from ``start`` to ``stop``; ``cleanup`` deletes the churned services and
nodes (the churned pods carry the run's label and go with its pods). And ``barrier``'s
wait on the pods made before it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from null_binder import raw_list
from scheduler_perf_objects import PERF_LABEL, ROLE_LABEL, node_manifest, pod_manifest
from scheduler_perf_ops import ChurnOp, DeletePodsOp

Json = dict[str, Any]


def _body(manifest: Json) -> Any:
    """A manifest as a request body (the client sends plain dicts as they are)."""
    return manifest


def _gone_is_fine(delete: Callable[..., object], *args: str) -> None:
    try:
        delete(*args)
    except ApiException as error:
        if error.status != 404:
            raise


class RunActivity:
    """The ``deletePods`` and ``churn`` operations of one run."""

    def __init__(
        self, core: client.CoreV1Api, ops: list[DeletePodsOp | ChurnOp], run: str, scheduler_name: str
    ) -> None:
        self.core = core
        self.ops = ops
        self.run = run
        self.scheduler_name = scheduler_name
        self.errors: list[str] = []
        self.deleted = 0
        self.churned = 0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for index, op in enumerate(self.ops):
            target = self._delete_pods if isinstance(op, DeletePodsOp) else self._churn
            thread = threading.Thread(target=self._guarded, args=(target, op, index), daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)

    def cleanup(self) -> None:
        selector = f"{PERF_LABEL}={self.run}"
        for namespace in {op.namespace for op in self.ops if isinstance(op, ChurnOp)}:
            self.core.delete_collection_namespaced_service(namespace, label_selector=selector)
        self.core.delete_collection_node(label_selector=selector)

    def _guarded(self, target: Callable[[Any, int], None], op: DeletePodsOp | ChurnOp, index: int) -> None:
        try:
            target(op, index)
        except Exception as error:  # reported with the run, never lost in a thread
            self.errors.append(f"{type(op).__name__} {index}: {type(error).__name__}: {str(error)[:300]}")

    def _delete_pods(self, op: DeletePodsOp, _index: int) -> None:
        pods = raw_list(self.core, op.namespace, label_selector=PERF_LABEL)["items"]
        for pod in pods:
            if self._stop.is_set():
                return
            name = pod["metadata"]["name"]
            _gone_is_fine(self.core.delete_namespaced_pod, name, op.namespace)
            self.deleted += 1
            if op.per_second > 0:
                self._stop.wait(1 / op.per_second)

    def _churn(self, op: ChurnOp, index: int) -> None:
        slots: list[list[str]] = [[""] * max(op.number, 1) for _ in op.templates]
        rounds = 0
        next_tick = time.monotonic() + op.interval_s
        while not self._stop.wait(max(0.0, next_tick - time.monotonic())):
            next_tick += op.interval_s
            if op.mode == "create" and op.number and rounds >= op.number:
                continue
            for t, template in enumerate(op.templates):
                slot = rounds % op.number if op.mode == "recreate" else 0
                if op.mode == "recreate" and slots[t][slot]:
                    self._delete(template, op.namespace, slots[t][slot])
                    slots[t][slot] = ""
                else:
                    name = f"{self.run}-churn-{index}-{t}-{rounds}"
                    self._create(template, op.namespace, name)
                    slots[t][slot] = name if op.mode == "recreate" else ""
                    self.churned += 1
            rounds += 1

    def _create(self, template: Json, namespace: str, name: str) -> None:
        kind = template["kind"]
        if kind == "Pod":
            pod = pod_manifest(template, name, self.scheduler_name, self.run)
            pod["metadata"]["labels"][ROLE_LABEL] = "churn"
            self.core.create_namespaced_pod(namespace, _body(pod))
        elif kind == "Service":
            service = {**template, "metadata": {"name": name, "labels": {PERF_LABEL: self.run}}}
            self.core.create_namespaced_service(namespace, _body(service))
        else:
            node = node_manifest(template, name, {})
            node["metadata"]["labels"][PERF_LABEL] = self.run
            self.core.create_node(_body(node))

    def _delete(self, template: Json, namespace: str, name: str) -> None:
        kind = template["kind"]
        if kind == "Pod":
            _gone_is_fine(self.core.delete_namespaced_pod, name, namespace)
        elif kind == "Service":
            _gone_is_fine(self.core.delete_namespaced_service, name, namespace)
        else:
            _gone_is_fine(self.core.delete_node, name)


def attempted(pod: Json) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "PodScheduled" for c in conditions)


def wait_barrier(core: client.CoreV1Api, selector: str, stage: str, timeout_s: float) -> None:
    """Until every pod with ``selector`` is bound (``Scheduled``) or has a ``PodScheduled``
    condition (``Attempted``: a scheduler tried it, or the API server marked it gated)."""
    deadline = time.monotonic() + timeout_s
    while True:
        pods = raw_list(core, label_selector=selector)["items"]
        waiting = [
            p
            for p in pods
            if not (p.get("spec") or {}).get("nodeName") and not (stage == "Attempted" and attempted(p))
        ]
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"barrier ({stage}): {len(waiting)} pods waiting after {timeout_s:.0f} s")
        time.sleep(0.2)
