"""The timeline replay on a cluster without node boundaries: a reference for what any
placement could give.

The pods, the cluster (the seed's sample, sized for the load), the clock, the max wait
and the order of events are the timeline replay's (``scheduler.sim.timeline``), but the
cluster is pooled: one pool of GPU per GPU model, CPU and memory each one pool over
every node. A pod fits when its CPU and memory fit their pools and its GPUs (all of
them, shares summed) fit the pool of a model it accepts; it takes them from the one of
those with the most free. No placement on real nodes can do what this does (an 8-GPU
pod here takes the free GPUs of eight nodes), so the GPU-hours that pods still wait and
lose here are what node boundaries do not explain: a queue that forms because the
cluster is full.

Two queues:

- ``backfill`` (the timeline replay's): each arriving pod is tried at once, even while
  older pods wait; after departures, the pending pods are tried oldest first, each one
  that fits is placed.
- ``fifo``: no pod starts before an older one. An arriving pod waits while any pod is
  pending; after departures, and after the oldest pending pods fail at their max wait,
  the pending pods start oldest first until one does not fit.

It is not a bound in the strict sense: with pods that never leave (censored), starting
more pods sooner can leave less room later, so a seed can lose more here than on nodes.
"""

from __future__ import annotations

import heapq
import math
import time
from typing import Final, Literal

import numpy as np

from scheduler.objects.node import Node
from scheduler.objects.pod import Pod
from scheduler.resources.gpu import type_matches
from scheduler.sim.replay import gpu_capacity_milli
from scheduler.sim.timed_workload import TimedWorkload
from scheduler.sim.timeline import (
    TimelineLog,
    TimelineSpec,
    expire_pending,
    next_event_time,
    replayed_cluster,
)

Queue = Literal["backfill", "fifo"]
QUEUES: Final[tuple[Queue, ...]] = ("backfill", "fifo")


class _Pools:
    """Free GPU milli per GPU model, free CPU (millicores) and memory over the cluster."""

    def __init__(self, nodes: list[Node]) -> None:
        self.gpu: dict[str, int] = {}
        for node in nodes:
            if node.gpu_count:
                self.gpu[node.gpu_model] = self.gpu.get(node.gpu_model, 0) + 1000 * node.gpu_count
        self.cpu = sum(n.allocatable.get("cpu", 0) for n in nodes)
        self.memory = sum(n.allocatable.get("memory", 0) for n in nodes)

    def models_for(self, pod: Pod) -> tuple[str, ...]:
        """The pools a pod's GPUs may come from (none for a pod without GPUs)."""
        if not pod.gpu.total_milli:
            return ()
        return tuple(m for m in self.gpu if type_matches(m, pod.gpu.models, pod.gpu.excluded_models))

    def take(self, pod: Pod, models: tuple[str, ...]) -> str | None:
        """Takes what ``pod`` asks; the GPU pool it took from ("" for none), None if it
        does not fit."""
        cpu, memory, milli = pod.requests.get("cpu", 0), pod.requests.get("memory", 0), pod.gpu.total_milli
        if cpu > self.cpu or memory > self.memory:
            return None
        model = ""
        if milli:
            fitting = [m for m in models if self.gpu[m] >= milli]
            if not fitting:
                return None
            model = max(fitting, key=self.gpu.__getitem__)
            self.gpu[model] -= milli
        self.cpu -= cpu
        self.memory -= memory
        return model

    def give_back(self, pod: Pod, model: str) -> None:
        if model:
            self.gpu[model] += pod.gpu.total_milli
        self.cpu += pod.requests.get("cpu", 0)
        self.memory += pod.requests.get("memory", 0)


class _PooledRun:
    """The timeline replay's event loop (``timeline._Run.run``) over ``_Pools``."""

    def __init__(self, workload: TimedWorkload, nodes: list[Node], spec: TimelineSpec, queue: Queue) -> None:
        self.pods = [p.pod for p in workload.pods]
        self.arrival = workload.creation_s / spec.time_scale
        self.lifetime = workload.replay_lifetime_s / spec.time_scale  # infinite: censored
        self.max_wait = spec.max_wait_s / spec.time_scale
        self.fifo = queue == "fifo"
        self.pools = _Pools(nodes)
        self.models = [self.pools.models_for(p) for p in self.pods]
        self.taken: dict[int, str] = {}  # running pod index -> the GPU pool it took from
        self.placed_on = [""] * len(self.pods)
        self.departures: list[tuple[float, int]] = []
        self.pending: dict[int, None] = {}  # FIFO
        self.wait = np.full(len(self.pods), np.nan)
        self.allocated = 0
        self.times: list[float] = []
        self.allocated_rows: list[int] = []
        self.pending_rows: list[int] = []

    def place(self, i: int, now: float) -> bool:
        model = self.pools.take(self.pods[i], self.models[i])
        if model is None:
            return False
        self.taken[i] = self.placed_on[i] = model
        self.allocated += self.pods[i].gpu.total_milli
        self.wait[i] = now - self.arrival[i]
        if math.isfinite(self.lifetime[i]):
            heapq.heappush(self.departures, (now + float(self.lifetime[i]), i))
        return True

    def depart(self, now: float) -> bool:
        left = False
        while self.departures and self.departures[0][0] <= now:
            i = heapq.heappop(self.departures)[1]
            self.pools.give_back(self.pods[i], self.taken.pop(i))
            self.allocated -= self.pods[i].gpu.total_milli
            left = True
        return left

    def retry_pending(self, now: float) -> None:
        for i in list(self.pending):
            if self.place(i, now):
                del self.pending[i]
            elif self.fifo:
                return

    def run(self) -> None:
        end = float(self.arrival[-1]) + self.max_wait
        arrived = 0
        while (
            now := next_event_time(self.arrival, arrived, self.departures, self.pending, self.max_wait)
        ) <= end:
            if self.depart(now) and self.pending:
                self.retry_pending(now)
            while arrived < len(self.pods) and self.arrival[arrived] <= now:
                waiting_behind = self.fifo and bool(self.pending)
                if waiting_behind or not self.place(arrived, now):
                    self.pending[arrived] = None
                arrived += 1
            expired = expire_pending(self.pending, self.arrival, self.max_wait, now)
            if expired and self.fifo and self.pending:
                self.retry_pending(now)  # a new oldest pod: it may fit now
            self.times.append(now)
            self.allocated_rows.append(self.allocated)
            self.pending_rows.append(len(self.pending))


def replay_pooled(spec: TimelineSpec, queue: Queue = "backfill") -> TimelineLog:
    """The spec's replay on the pooled cluster (its ``policy`` is not used). The log has
    no nodes: no whole free ones, ``placed_on`` the GPU pool ("" without GPUs or failed).
    One clock only."""
    if spec.compress_arrivals:
        raise ValueError("the pooled replay runs on one clock, not with compressed arrivals")
    workload, nodes, fraction, _clock = replayed_cluster(spec, "pooled")
    capacity = gpu_capacity_milli(nodes)
    run = _PooledRun(workload, nodes, spec, queue)
    started = time.perf_counter()
    run.run()
    return TimelineLog(
        spec=spec,
        node_names=[n.name for n in nodes],
        node_fraction=fraction,
        capacity_milli=capacity,
        compression=1.0,
        time_scale=spec.time_scale,
        offered_load=workload.offered_load(1.0, capacity),
        times=np.array(run.times, np.float64),
        allocated_milli=np.array(run.allocated_rows, np.int64),
        pending=np.array(run.pending_rows, np.int64),
        gpu_counts=(),
        gpu_nodes=np.zeros(0, np.int64),
        whole_free=np.zeros((len(run.times), 0), np.int64),
        pod_names=[p.name for p in run.pods],
        arrival_s=run.arrival,
        lifetime_s=workload.lifetime_s / spec.time_scale,
        censored=workload.censored,
        gpu_milli=np.array([p.gpu.total_milli for p in run.pods], np.int64),
        wait_s=run.wait,
        placed_on=run.placed_on,
        seconds=time.perf_counter() - started,
        issues=workload.issues,
    )
