"""Replay an openb trace in time: pods arrive at their own creation time, compressed, and
leave after their own lifetime.

The FGD replay (``replay``) shuffles the pods and never lets one leave; here foresight
pays, because room freed later can be waited for.

- Arrivals: pod ``i`` arrives at ``creation_time / k``. ``k`` is chosen so that the
  offered GPU load equals ``load`` x the cluster's GPU capacity (``offered_load``: the
  time-average over the compressed busy window of the GPU requested by the pods that
  would be alive if each were placed on arrival and stayed its lifetime), by bisection;
  a spec may fix ``k`` instead (``compression``). The busy window runs from
  ``busy_from``, the arrival of the pod at the 1st percentile of arrival order, to the
  last arrival: the openb pod lists are snapshots, with a few long-lived pods created
  long before the rest. Those earlier pods are replayed from their own arrival (time 0
  for the first) and hold their room while they run; they only do not stretch the
  window that the load and the metrics average over.
- Lifetimes: ``deletion_time - creation_time``, at least ``MIN_LIFETIME_S``, counted
  from when the pod is placed; then it leaves (``ClusterState.remove``). Lifetimes are
  not compressed.
- Each arriving pod gets one scheduling cycle at once, even while older pods are
  pending (kube-scheduler's active queue). A pod that fits nowhere joins a FIFO
  pending queue.
- At one time, first every departure of that time, then one pass over the pending
  queue, then the arrivals of that time in trace order, then the failures. The pass
  goes through the pending pods in FIFO order; a pod that now passes the profile's
  filters on one of the nodes a pod just left (kube-scheduler's queueing hints: only
  those nodes changed) gets a full scheduling cycle over all nodes, and is placed.
  Room taken by a pod placed earlier in the pass counts for the pods after it.
- A pod still pending ``max_wait_s`` after its arrival fails (at that time, after that
  time's pass and arrivals: a pod may be placed by a departure at the very moment its
  wait runs out, and with ``max_wait_s`` 0 a pod that fits nowhere on arrival fails at
  once, as in the FGD replay).
- Cluster: ``node_fraction`` of the node list, the stratified sample the training
  episodes draw (``sample_nodes(nodes, node_fraction, seed)``: about that share of each
  node shape, at least one of each), so each seed is a cluster of its own and every
  policy replayed with that seed sees the same one; 1 keeps the whole list. ``load`` is
  a multiple of ``node_fraction`` x the node list's GPUs (``nominal_capacity_milli``),
  one ``k`` for every seed, so all seeds share one arrival process; a seed's sample
  holds a few GPUs more or fewer, and its log records the load offered to its own.
- Seeds: the nodes' priority order is ``node_priority_order`` of a fresh
  ``GoRand(seed)`` (with no extra draws: there is no shuffle before it here), and the
  profile and its tie-break rng are seeded as the FGD replay seeds them
  (``seeded_profile``). The same spec gives the same log, decision for decision.
- The replay ends at the last arrival plus ``max_wait_s``; pods still running then
  are left running.

After the events of each time the log records the GPU allocated and the pods pending;
per pod, its wait (placement minus arrival) or that it failed.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scheduler.errors import SchedulerInputError
from scheduler.framework.plugin import CycleContext
from scheduler.framework.profile import Profile, run_filters, schedule_pod
from scheduler.objects.node import Node
from scheduler.sim.catalog import DEFAULT_NODE_LIST, node_list_path, pod_list_path
from scheduler.sim.gorand import GoRand
from scheduler.sim.node_sample import sample_nodes
from scheduler.sim.offered_load import (
    busy_from,
    busy_from_index,
    compression_for_load,
    most_offered_gpu_milli,
    offered_gpu_milli,
)
from scheduler.sim.replay import gpu_capacity_milli, node_priority_order, seeded_profile, trace_typical_pods
from scheduler.sim.trace import (
    TimedPod,
    TraceIssues,
    TraceRow,
    check_pods_against_nodes,
    load_nodes,
    load_timed_pods,
)
from scheduler.state.cluster_state import ClusterState

MIN_LIFETIME_S = 1.0
DEFAULT_MAX_WAIT_S = 3600.0
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class TimelineSpec:
    trace: str
    policy: str
    seed: int
    nodes: str = DEFAULT_NODE_LIST
    load: float = 1.0  # offered GPU load, x node_fraction of the node list's GPU capacity
    max_wait_s: float = DEFAULT_MAX_WAIT_S
    checkpoint: str | None = None  # the learned policy's checkpoint (profile gnn)
    compression: float | None = None  # k itself, instead of finding it from ``load``
    node_fraction: float = 1.0  # share of the node list, sampled by shape with ``seed``


@dataclass(frozen=True)
class TimedWorkload:
    """A trace's pods (sorted by creation time, ties in file order) and the node list."""

    pods: list[TimedPod]
    nodes: list[Node]
    issues: list[str]

    @property
    def capacity_milli(self) -> int:
        return gpu_capacity_milli(self.nodes)

    @property
    def creation_s(self) -> FloatArray:
        return np.array([p.creation_s for p in self.pods], np.float64)

    @property
    def lifetime_s(self) -> FloatArray:
        return np.array([lifetime_s(p) for p in self.pods], np.float64)

    @property
    def gpu_milli(self) -> FloatArray:
        return np.array([p.pod.gpu.total_milli for p in self.pods], np.float64)

    def cluster(self, fraction: float, seed: int) -> list[Node]:
        """The nodes a replay with ``seed`` runs on: ``fraction`` of the list, by shape."""
        return sample_nodes(self.nodes, fraction, seed)

    def nominal_capacity_milli(self, fraction: float) -> float:
        """The GPU capacity ``load`` is a multiple of: ``fraction`` of the node list's."""
        return min(fraction, 1.0) * self.capacity_milli

    def describe_capacity(self, fraction: float) -> str:
        gpus = self.capacity_milli // 1000
        if fraction >= 1.0:
            return f"the cluster's {gpus} GPUs"
        nominal = self.nominal_capacity_milli(fraction) / 1000
        return f"the {nominal:g} GPUs of {fraction:g} of the node list's {gpus}"

    def compression_for(self, load: float, fraction: float = 1.0) -> float:
        """The ``k`` whose offered GPU load is ``load`` x ``fraction`` of the node list's
        capacity; a load no compression reaches is an error that says how much the trace
        can offer."""
        creation, lifetime, gpu = self.creation_s, self.lifetime_s, self.gpu_milli
        capacity = max(self.nominal_capacity_milli(fraction), 1.0)
        most = most_offered_gpu_milli(creation, lifetime, gpu) / capacity
        if load > most:
            raise SchedulerInputError(
                "offered load",
                "load",
                f"{load:g} is out of reach: at any compression this trace offers at most {most:.3f} x "
                f"{self.describe_capacity(fraction)} (every pod alive from its arrival, "
                "or the busy window's start, to the last arrival)",
            )
        return compression_for_load(creation, lifetime, gpu, load * capacity)

    def offered_load(self, compression: float, capacity_milli: float) -> float:
        """The offered GPU load at ``compression``, as a share of ``capacity_milli``; NaN
        when the busy window is a single instant (no span to average over)."""
        creation = self.creation_s
        if creation[-1] <= busy_from(creation):
            return math.nan
        offered = offered_gpu_milli(creation, self.lifetime_s, self.gpu_milli, compression)
        return offered / max(capacity_milli, 1.0)


def lifetime_s(pod: TimedPod) -> float:
    return max(pod.deletion_s - pod.creation_s, MIN_LIFETIME_S)


def load_timed_workload(trace: str, nodes: str = DEFAULT_NODE_LIST) -> TimedWorkload:
    """The trace's timed pods and the node list; a pod named twice keeps its first row
    (the others are reported)."""
    issues = TraceIssues()
    cluster = load_nodes(node_list_path(nodes), issues)
    pods: list[TimedPod] = []
    first_row: dict[str, str] = {}
    for timed in load_timed_pods(pod_list_path(trace), issues):
        seen = first_row.setdefault(timed.pod.name, timed.pod.source)
        if seen != timed.pod.source:
            issues.add(f"{timed.pod.source}: name: pod {timed.pod.name} again (first at {seen}); skipped")
            continue
        pods.append(timed)
    check_pods_against_nodes([p.pod for p in pods], cluster, issues)
    pods.sort(key=lambda p: p.creation_s)  # stable: equal times keep file order
    return TimedWorkload(pods, cluster, issues.messages)


@dataclass
class TimelineLog:
    """What a timeline replay did. Rows of ``times``, ``allocated_milli`` and
    ``pending`` are taken after all events of a time; per-pod arrays are in arrival
    order."""

    spec: TimelineSpec
    node_names: list[str]  # the nodes replayed (the seed's sample), in the node list's order
    capacity_milli: int  # their GPU capacity
    compression: float
    offered_load: float  # share of capacity_milli
    times: FloatArray
    allocated_milli: IntArray
    pending: IntArray
    pod_names: list[str]
    arrival_s: FloatArray
    lifetime_s: FloatArray
    gpu_milli: IntArray
    wait_s: FloatArray  # placement minus arrival; NaN for a pod that failed
    placed_on: list[str]  # the node each pod was placed on ("" for a pod that failed)
    seconds: float
    issues: list[str]

    @property
    def failed(self) -> npt.NDArray[np.bool_]:
        return np.isnan(self.wait_s)

    @property
    def end_s(self) -> float:
        return float(self.arrival_s[-1]) + self.spec.max_wait_s

    @property
    def busy_from_s(self) -> float:
        """When the busy window opens: the arrival of the pod at the 1st percentile of
        arrival order (``offered_load``)."""
        return float(self.arrival_s[busy_from_index(self.arrival_s.size)])


class _Run:
    """The event loop's state: the cluster, the queues and what is recorded."""

    def __init__(
        self, workload: TimedWorkload, nodes: list[Node], spec: TimelineSpec, compression: float
    ) -> None:
        self.pods = workload.pods
        self.rows: list[TraceRow] = [p.row for p in self.pods]
        self.arrival = workload.creation_s / compression
        self.lifetime = workload.lifetime_s
        self.gpu = np.array([p.pod.gpu.total_milli for p in self.pods], np.int64)
        self.max_wait = spec.max_wait_s
        self.state = ClusterState(node_priority_order(nodes, GoRand(spec.seed), 0))
        typical = trace_typical_pods([p.pod for p in self.pods])
        self.profile: Profile
        self.profile, self.rng = seeded_profile(spec.policy, spec.seed, typical, spec.checkpoint)
        self.departures: list[tuple[float, int]] = []  # (time, pod index)
        self.pending: dict[int, None] = {}  # pod indices, FIFO (dicts keep insertion order)
        self.wait = np.full(len(self.pods), np.nan)
        self.placed_on = [""] * len(self.pods)
        self.allocated = 0
        self.times: list[float] = []
        self.allocated_rows: list[int] = []
        self.pending_rows: list[int] = []

    def schedule(self, i: int, now: float) -> bool:
        """One full cycle for pod ``i``; places it if it fits."""
        pod = self.pods[i].pod
        decision = schedule_pod(self.state, pod, self.profile, self.rng)
        if not decision.scheduled:
            return False
        self.state.place(pod, decision.node, decision.gpu_indices)
        self.allocated += int(self.gpu[i]) if decision.gpu_indices else 0
        self.wait[i] = now - self.arrival[i]
        self.placed_on[i] = decision.node
        heapq.heappush(self.departures, (now + float(self.lifetime[i]), i))
        return True

    def depart(self, now: float) -> list[int]:
        """Removes the pods whose lifetime ends at ``now``; the node rows they left."""
        left: list[int] = []
        while self.departures and self.departures[0][0] <= now:
            i = heapq.heappop(self.departures)[1]
            placement = self.state.remove(self.pods[i].pod.key)
            self.allocated -= int(self.gpu[i]) if placement.gpu_indices else 0
            row = self.state.node_index[placement.node]
            if row not in left:
                left.append(row)
        return left

    def retry_pending(self, changed: list[int], now: float) -> None:
        """The pass over the pending queue after departures from ``changed``. Pods of one
        trace row pass or fail the filters alike on a node that has not changed since,
        so each (row, node, node version) is filtered once."""
        fits: dict[tuple[TraceRow, int, int], bool] = {}
        for i in list(self.pending):
            if self._fits_one_of(i, changed, fits) and self.schedule(i, now):
                del self.pending[i]

    def _fits_one_of(self, i: int, nodes: list[int], fits: dict[tuple[TraceRow, int, int], bool]) -> bool:
        versions = self.state.node_version
        for node in nodes:
            key = (self.rows[i], node, int(versions[node]))
            if key not in fits:
                ctx = CycleContext(self.state, self.pods[i].pod)
                decision = run_filters(ctx, self.profile.filters, np.array([node], np.int64))
                fits[key] = decision.feasible.size > 0
            if fits[key]:
                return True
        return False

    def expire(self, now: float) -> None:
        """Fails the pending pods whose wait has run out (the oldest come first)."""
        while self.pending:
            oldest = next(iter(self.pending))
            if self.arrival[oldest] + self.max_wait > now:
                break
            del self.pending[oldest]

    def record(self, now: float) -> None:
        self.times.append(now)
        self.allocated_rows.append(self.allocated)
        self.pending_rows.append(len(self.pending))

    def next_time(self, arrived: int) -> float:
        candidates = []
        if arrived < len(self.pods):
            candidates.append(float(self.arrival[arrived]))
        if self.departures:
            candidates.append(self.departures[0][0])
        if self.pending:
            candidates.append(float(self.arrival[next(iter(self.pending))]) + self.max_wait)
        return min(candidates, default=np.inf)

    def run(self, progress: Callable[[int, int], None] | None) -> None:
        end = float(self.arrival[-1]) + self.max_wait
        arrived = 0
        while (now := self.next_time(arrived)) <= end:
            changed = self.depart(now)
            if changed and self.pending:
                self.retry_pending(changed, now)
            while arrived < len(self.pods) and self.arrival[arrived] <= now:
                if not self.schedule(arrived, now):
                    self.pending[arrived] = None
                arrived += 1
                if progress is not None:
                    progress(arrived, len(self.pods))
            self.expire(now)
            self.record(now)


def replay_timeline(spec: TimelineSpec, progress: Callable[[int, int], None] | None = None) -> TimelineLog:
    workload = load_timed_workload(spec.trace, spec.nodes)
    if not workload.pods:
        raise ValueError(f"timeline replay of {spec.trace}: the trace has no pod to replay")
    nodes = workload.cluster(spec.node_fraction, spec.seed)
    capacity = gpu_capacity_milli(nodes)
    compression = (
        spec.compression
        if spec.compression is not None
        else workload.compression_for(spec.load, spec.node_fraction)
    )
    run = _Run(workload, nodes, spec, compression)
    started = time.perf_counter()
    run.run(progress)
    seconds = time.perf_counter() - started
    return TimelineLog(
        spec=spec,
        node_names=[n.name for n in nodes],
        capacity_milli=capacity,
        compression=compression,
        offered_load=workload.offered_load(compression, capacity),
        times=np.array(run.times, np.float64),
        allocated_milli=np.array(run.allocated_rows, np.int64),
        pending=np.array(run.pending_rows, np.int64),
        pod_names=[p.pod.name for p in workload.pods],
        arrival_s=run.arrival,
        lifetime_s=run.lifetime,
        gpu_milli=run.gpu,
        wait_s=run.wait,
        placed_on=run.placed_on,
        seconds=seconds,
        issues=workload.issues,
    )
