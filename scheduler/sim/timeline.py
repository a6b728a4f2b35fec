"""Replay an openb trace in time: pods arrive at their own creation time and leave after
their own lifetime, both on one clock.

The FGD replay (``replay``) shuffles the pods and never lets one leave; here foresight
pays, because room freed later can be waited for.

- One clock (the default): pod ``i`` arrives at ``creation_time / s`` and lives
  ``lifetime / s``, ``max_wait_s / s`` the most it may wait, with one scale ``s``
  (``time_scale``, 1: the trace's own clock; a scale only changes units, and every
  metric is given in the trace's seconds). The load is met by sizing the cluster
  instead (``cluster_size``): on one clock the pods offer a fixed GPU load, and the
  cluster is the seed's nested sample of the node list whose GPUs are closest to that
  load over ``load``; a spec that fixes ``node_fraction`` takes the nested sample of
  that fraction and the log reports the load it gets.
- Compressed arrivals (``compress_arrivals``, the earlier mode, kept to measure what it
  does): pod ``i`` arrives at ``creation_time / k`` and lives its own lifetime, so a pod
  of 10 minutes outlives the next ``k`` x 10 minutes of arrivals. ``k`` is chosen so that
  the offered GPU load equals ``load`` x ``node_fraction`` of the node list's GPU capacity
  (``offered_load``), by bisection; a spec may fix ``k`` instead (``compression``). The
  cluster is ``sample_nodes(nodes, node_fraction, seed)`` (at least one node of each
  shape; 1 by default: the whole list), one ``k`` for every seed.
- The busy window, over which the load and the time-weighted metrics average, runs from
  ``busy_from``, the arrival of the pod at the 1st percentile of arrival order, to the
  last arrival: the openb pod lists are snapshots, with a few long-lived pods created
  long before the rest. Those earlier pods are replayed from their own arrival (time 0
  for the first) and hold their room while they run.
- Lifetimes: ``deletion_time - creation_time``, at least ``MIN_LIFETIME_S``, counted
  from when the pod is placed; then it leaves (``ClusterState.remove``). A censored pod
  (still running when the list was taken: ``timed_workload``) never leaves.
- Each arriving pod gets one scheduling cycle at once, even while older pods are
  pending (kube-scheduler's active queue). A pod that fits nowhere joins a FIFO
  pending queue.
- At one time, first every departure of that time, then one pass over the pending
  queue, then the arrivals of that time in trace order, then the failures. The pass
  goes through the pending pods in FIFO order; a pod that now passes the profile's
  filters on one of the nodes a pod just left (kube-scheduler's queueing hints: only
  those nodes changed) gets a full scheduling cycle over all nodes, and is placed.
  Room taken by a pod placed earlier in the pass counts for the pods after it.
- A pod still pending its max wait after its arrival fails (at that time, after that
  time's pass and arrivals: a pod may be placed by a departure at the very moment its
  wait runs out, and with a max wait of 0 a pod that fits nowhere on arrival fails at
  once, as in the FGD replay).
- Seeds: the cluster is the seed's sample, so each seed is a cluster of its own and
  every policy replayed with that seed sees the same one; the nodes' priority order is
  ``node_priority_order`` of a fresh ``GoRand(seed)``, and the profile and its
  tie-break rng are seeded as the FGD replay seeds them (``seeded_profile``). The same
  spec gives the same log, decision for decision.
- The replay ends at the last arrival plus the max wait; pods still running then are
  left running.
- Reservations (``spec.reservations``, off by default: then none of what follows
  runs): after the events of each time, the oldest pending pods asking K GPUs or more
  reserve a node each (at most R), and a Filter run last keeps other pods from breaking
  a reservation; the rules are ``reservations``' and ``timeline_reservations``'.

After the events of each time the log records the GPU allocated, the pods pending and,
per GPU count of node, the nodes with every GPU free; per pod, its wait (placement minus
arrival) or that it failed.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from scheduler.framework.plugin import CycleContext
from scheduler.framework.profile import Profile, run_filters, schedule_pod
from scheduler.objects.node import Node
from scheduler.plugins.remaining_lifetimes import ResidentClock
from scheduler.sim.catalog import DEFAULT_NODE_LIST
from scheduler.sim.cluster_size import cluster_for_load, nested_sample
from scheduler.sim.gorand import GoRand
from scheduler.sim.offered_load import busy_from_index
from scheduler.sim.replay import gpu_capacity_milli, node_priority_order, trace_typical_pods
from scheduler.sim.reservations import ReservationConfig, to_reserve
from scheduler.sim.timed_workload import MIN_LIFETIME_S, TimedWorkload, lifetime_s, load_timed_workload
from scheduler.sim.timeline_lifetimes import LifetimeSource, lifetime_profile, lifetime_source, spec_label
from scheduler.sim.timeline_reservations import ReservationBook, ReservationFilter, remaining_ends
from scheduler.sim.timeline_starts import StartRecorder, StartRecords, start_recorder
from scheduler.sim.trace import TraceRow
from scheduler.state.cluster_state import ClusterState

__all__ = [
    "DEFAULT_MAX_WAIT_S",
    "MIN_LIFETIME_S",
    "TimedWorkload",
    "TimelineLog",
    "TimelineSpec",
    "lifetime_s",
    "load_timed_workload",
    "replay_timeline",
]
DEFAULT_MAX_WAIT_S = 3600.0
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class TimelineSpec:
    trace: str
    policy: str
    seed: int
    nodes: str = DEFAULT_NODE_LIST
    load: float = 1.0  # offered GPU load, x the cluster's GPUs (compressed: x node_fraction of the list's)
    max_wait_s: float = DEFAULT_MAX_WAIT_S  # seconds of the trace's clock
    checkpoint: str | None = None  # the learned policy's checkpoint (profile gnn)
    compression: float | None = None  # compressed arrivals: k itself, instead of finding it from load
    # share of the node list; None: sized for ``load`` (one clock), 1 (compressed arrivals)
    node_fraction: float | None = None
    compress_arrivals: bool = False  # the earlier mode: arrivals / k, lifetimes as they are
    time_scale: float = 1.0  # one clock: every time / time_scale (only units change)
    trace_end_s: float | None = None  # pods deleted at or after it are censored; None: the latest deletion
    # What lifetime-aware plugins are told (``timeline_lifetimes``).
    lifetimes: LifetimeSource = "hidden"
    # The lifetime-aware plugins' args (``FgdReserveLifetime``'s: weight, blocked, ...).
    lifetime_args: tuple[tuple[str, str], ...] = ()
    # Start forecasts for the pods that fail their first cycle (``timeline_starts``'
    # variants: ``model``, ``oracle+queue``, ...); they never change what the replay does.
    predict_starts: tuple[str, ...] = ()
    # Reservations for waiting multi-GPU pods with backfill (``timeline_reservations``;
    # None: off, the replay as without them), and what they are told of lifetimes.
    reservations: ReservationConfig | None = None
    reservation_lifetimes: LifetimeSource = "hidden"

    @property
    def label(self) -> str:
        """The policy as reports name it: with the lifetimes and args when set, and the
        reservations (``+reserve4[model]``) when on."""
        label = spec_label(self.policy, self.lifetimes, self.lifetime_args)
        if self.reservations is None:
            return label
        return f"{label}+{self.reservations.tag()}[{self.reservation_lifetimes}]"


@dataclass
class TimelineLog:
    """What a timeline replay did, in the replay's seconds (``time_scale`` of the
    trace's each). Rows of ``times``, ``allocated_milli``, ``pending`` and
    ``whole_free`` are taken after all events of a time; per-pod arrays are in arrival
    order."""

    spec: TimelineSpec
    node_names: list[str]  # the nodes replayed (the seed's sample), in the node list's order
    node_fraction: float  # the share of the node list they are (the nested sample's fraction)
    capacity_milli: int  # their GPU capacity
    compression: float  # how much faster arrivals run than lifetimes (1: one clock)
    time_scale: float  # trace seconds per replay second
    offered_load: float  # share of capacity_milli
    times: FloatArray
    allocated_milli: IntArray
    pending: IntArray
    gpu_counts: tuple[int, ...]  # the GPU counts of the cluster's GPU nodes, ascending
    gpu_nodes: IntArray  # the cluster's nodes of each of gpu_counts
    whole_free: IntArray  # per row and each of gpu_counts: nodes with every GPU free
    pod_names: list[str]
    arrival_s: FloatArray
    lifetime_s: FloatArray  # observed (a censored pod's is a lower bound)
    censored: BoolArray  # still running when the list was taken: never left
    gpu_milli: IntArray
    wait_s: FloatArray  # placement minus arrival; NaN for a pod that failed
    placed_on: list[str]  # the node each pod was placed on ("" for a pod that failed)
    seconds: float
    issues: list[str]
    # Per variant, the start forecasts held against actual starts (``timeline_starts``).
    starts: dict[str, StartRecords] = field(default_factory=dict)

    @property
    def failed(self) -> npt.NDArray[np.bool_]:
        return np.isnan(self.wait_s)

    @property
    def max_wait_s(self) -> float:
        """The max wait in the replay's seconds."""
        return self.spec.max_wait_s / self.time_scale

    @property
    def end_s(self) -> float:
        return float(self.arrival_s[-1]) + self.max_wait_s

    @property
    def busy_from_s(self) -> float:
        """When the busy window opens: the arrival of the pod at the 1st percentile of
        arrival order (``offered_load``)."""
        return float(self.arrival_s[busy_from_index(self.arrival_s.size)])


def next_event_time(
    arrival: FloatArray,
    arrived: int,
    departures: list[tuple[float, int]],
    pending: dict[int, None],
    max_wait: float,
) -> float:
    """When the replay's next event comes: the next arrival (``arrived`` pods have come),
    the soonest departure (a heap of ``(time, pod)``) or the oldest pending pod's max wait
    running out; infinite when none is left."""
    candidates = []
    if arrived < arrival.size:
        candidates.append(float(arrival[arrived]))
    if departures:
        candidates.append(departures[0][0])
    if pending:
        candidates.append(float(arrival[next(iter(pending))]) + max_wait)
    return min(candidates, default=math.inf)


def expire_pending(pending: dict[int, None], arrival: FloatArray, max_wait: float, now: float) -> bool:
    """Fails the pending pods (FIFO) whose max wait has run out by ``now``, the oldest
    first; whether any did."""
    expired = False
    while pending:
        oldest = next(iter(pending))
        if arrival[oldest] + max_wait > now:
            break
        del pending[oldest]
        expired = True
    return expired


@dataclass(frozen=True)
class _Clock:
    """Divisors of the trace's times: arrivals by ``arrivals``, lifetimes and the max wait
    by ``lifetimes``."""

    arrivals: float
    lifetimes: float


class _Run:
    """The event loop's state: the cluster, the queues and what is recorded."""

    def __init__(self, workload: TimedWorkload, nodes: list[Node], spec: TimelineSpec, clock: _Clock) -> None:
        self.pods = workload.pods
        self.rows: list[TraceRow] = [p.row for p in self.pods]
        self.arrival = workload.creation_s / clock.arrivals
        self.lifetime = workload.replay_lifetime_s / clock.lifetimes  # infinite: censored
        self.gpu = np.array([p.pod.gpu.total_milli for p in self.pods], np.int64)
        self.max_wait = spec.max_wait_s / clock.lifetimes
        self.state = ClusterState(node_priority_order(nodes, GoRand(spec.seed), 0))
        typical = trace_typical_pods([p.pod for p in self.pods])
        # When each placed pod started, for what lifetime-aware plugins are told.
        self.clock = ResidentClock()
        keys = [p.pod.key for p in self.pods]
        lifetimes = lifetime_source(spec.lifetimes, spec.trace, keys, self.lifetime, self.clock)
        self.profile: Profile
        self.profile, self.rng = lifetime_profile(
            spec.policy, spec.seed, typical, spec.checkpoint, lifetimes, spec.lifetime_args
        )
        self.book: ReservationBook | None = None
        self.released: list[int] = []  # node rows whose reservation ended since the last pass
        if spec.reservations is not None:
            ends = remaining_ends(spec.reservation_lifetimes, spec.trace, keys, self.lifetime, self.clock)
            base = self.profile
            self.book = ReservationBook(
                spec.reservations, self.state, self.clock, ends, base.filters, base.gpu_selector
            )
            self.profile = dataclasses.replace(base, filters=[*base.filters, ReservationFilter(self.book)])
        self.starts: StartRecorder | None = None
        if spec.predict_starts:
            self.starts = start_recorder(spec.predict_starts, spec.trace, keys, self.lifetime, self.clock)
        self.departures: list[tuple[float, int]] = []  # (time, pod index)
        self.pending: dict[int, None] = {}  # pod indices, FIFO (dicts keep insertion order)
        self.wait = np.full(len(self.pods), np.nan)
        self.placed_on = [""] * len(self.pods)
        self.allocated = 0
        # Whole free GPU nodes: GPU milli in use per node row, and per GPU count the nodes
        # with none in use.
        node_gpus = self.state.gpu_count[: len(self.state)]
        self.node_gpus = np.asarray(node_gpus, np.int64).copy()
        self.gpu_counts = tuple(sorted({int(g) for g in self.node_gpus if g > 0}))
        self.count_column = {g: j for j, g in enumerate(self.gpu_counts)}
        self.node_used = np.zeros(self.node_gpus.size, np.int64)
        self.free_now = [int((self.node_gpus == g).sum()) for g in self.gpu_counts]
        self.gpu_nodes = np.array(self.free_now, np.int64)
        self.times: list[float] = []
        self.allocated_rows: list[int] = []
        self.pending_rows: list[int] = []
        self.whole_free_rows: list[list[int]] = []

    def _use(self, row: int, milli: int) -> None:
        """``milli`` more (or fewer) GPU in use on node ``row``."""
        before = self.node_used[row]
        self.node_used[row] = before + milli
        column = self.count_column.get(int(self.node_gpus[row]))
        if column is None:
            return
        if before == 0 and milli > 0:
            self.free_now[column] -= 1
        elif before > 0 and self.node_used[row] == 0:
            self.free_now[column] += 1

    def schedule(self, i: int, now: float) -> bool:
        """One full cycle for pod ``i``; places it if it fits."""
        pod = self.pods[i].pod
        self.clock.advance(now)
        decision = schedule_pod(self.state, pod, self.profile, self.rng)
        if not decision.scheduled:
            return False
        self.state.place(pod, decision.node, decision.gpu_indices)
        self.clock.start(pod.key)
        if decision.gpu_indices:
            self.allocated += int(self.gpu[i])
            self._use(self.state.node_index[decision.node], int(self.gpu[i]))
        self.wait[i] = now - self.arrival[i]
        self.placed_on[i] = decision.node
        if self.book is not None:
            released = self.book.release(i, decision.node_index)
            if released is not None and released != decision.node_index:
                self.released.append(released)
        if math.isfinite(self.lifetime[i]):
            heapq.heappush(self.departures, (now + float(self.lifetime[i]), i))
        return True

    def depart(self, now: float) -> list[int]:
        """Removes the pods whose lifetime ends at ``now``; the node rows they left."""
        left: list[int] = []
        while self.departures and self.departures[0][0] <= now:
            i = heapq.heappop(self.departures)[1]
            placement = self.state.remove(self.pods[i].pod.key)
            self.clock.end(placement.pod.key)
            row = self.state.node_index[placement.node]
            if placement.gpu_indices:
                self.allocated -= int(self.gpu[i])
                self._use(row, -int(self.gpu[i]))
            if row not in left:
                left.append(row)
        return left

    def retry_pending(self, changed: list[int], now: float) -> None:
        """The pass over the pending queue after departures from ``changed``. Pods of one
        trace row pass or fail the filters alike on a node that has not changed since,
        so each (row, node, node version) is filtered once."""
        fits: dict[tuple[TraceRow | int, int, int], bool] = {}
        if self.book is not None:
            self.clock.advance(now)  # the reservations' filter reads ages
        for i in list(self.pending):
            if self._fits_one_of(i, changed, fits) and self.schedule(i, now):
                del self.pending[i]

    def _fits_one_of(
        self, i: int, nodes: list[int], fits: dict[tuple[TraceRow | int, int, int], bool]
    ) -> bool:
        versions = self.state.node_version
        # With reservations a pod's own lifetime and reservation decide too: one per pod.
        who: TraceRow | int = self.rows[i] if self.book is None else i
        for node in nodes:
            key = (who, node, int(versions[node]))
            if key not in fits:
                ctx = CycleContext(self.state, self.pods[i].pod)
                decision = run_filters(ctx, self.profile.filters, np.array([node], np.int64))
                fits[key] = decision.feasible.size > 0
            if fits[key]:
                return True
        return False

    def _forecast_start(self, i: int, now: float) -> None:
        """Pod ``i`` fits nowhere on arrival: its start forecasts, the pending pods
        before it (FIFO) ahead of it, each until its max wait runs out."""
        assert self.starts is not None
        before = list(self.pending)
        deadlines = [float(self.arrival[j]) + self.max_wait - now for j in before]
        ahead = [self.pods[j].pod for j in before]
        self.starts.record(i, self.state, self.pods[i].pod, self.profile.filters, ahead, deadlines)

    def expire(self, now: float) -> None:
        """Fails the pending pods whose wait has run out (the oldest come first)."""
        expire_pending(self.pending, self.arrival, self.max_wait, now)

    def reserve(self, now: float) -> None:
        """Ends the reservations whose pod is no longer pending (failed at its max wait),
        gives the pending pods a pass on the nodes released since the last one, then
        reserves nodes for the oldest waiting multi-GPU pods without one."""
        assert self.book is not None
        self.clock.advance(now)
        for i in self.book.held():
            if i not in self.pending or self.book.by_pod[i].expired(now):
                row = self.book.release(i)
                if row is not None:
                    self.released.append(row)
        if self.released:
            rows, self.released = list(dict.fromkeys(self.released)), []
            if self.pending:
                self.retry_pending(rows, now)
        for i in to_reserve(list(self.pending), self.gpu, self.book.config, self.book.held()):
            if len(self.book.by_pod) >= self.book.config.max_reservations:
                break
            self.book.reserve(i, self.pods[i].pod, now, float(self.arrival[i]) + self.max_wait)

    def record(self, now: float) -> None:
        self.times.append(now)
        self.allocated_rows.append(self.allocated)
        self.pending_rows.append(len(self.pending))
        self.whole_free_rows.append(list(self.free_now))

    def next_time(self, arrived: int) -> float:
        return next_event_time(self.arrival, arrived, self.departures, self.pending, self.max_wait)

    def run(self, progress: Callable[[int, int], None] | None) -> None:
        end = float(self.arrival[-1]) + self.max_wait
        arrived = 0
        while (now := self.next_time(arrived)) <= end:
            changed = self.depart(now)
            if changed and self.pending:
                self.retry_pending(changed, now)
            while arrived < len(self.pods) and self.arrival[arrived] <= now:
                if not self.schedule(arrived, now):
                    if self.starts is not None:
                        self._forecast_start(arrived, now)
                    self.pending[arrived] = None
                arrived += 1
                if progress is not None:
                    progress(arrived, len(self.pods))
            self.expire(now)
            if self.book is not None:
                self.reserve(now)
            self.record(now)


def cluster_and_clock(workload: TimedWorkload, spec: TimelineSpec) -> tuple[list[Node], float, _Clock]:
    """The nodes a spec replays, the share of the node list they are, and its clock."""
    if spec.compress_arrivals:
        fraction = 1.0 if spec.node_fraction is None else spec.node_fraction
        k = (
            spec.compression
            if spec.compression is not None
            else workload.compression_for(spec.load, fraction)
        )
        return workload.cluster(fraction, spec.seed), fraction, _Clock(k, 1.0)
    clock = _Clock(spec.time_scale, spec.time_scale)
    if spec.node_fraction is not None:
        return nested_sample(workload.nodes, spec.node_fraction, spec.seed), spec.node_fraction, clock
    sized = cluster_for_load(workload.nodes, workload.offered_on_trace_clock_milli(), spec.load, spec.seed)
    return sized.nodes, sized.fraction, clock


def replayed_cluster(spec: TimelineSpec, replay: str) -> tuple[TimedWorkload, list[Node], float, _Clock]:
    """The spec's timed workload, then ``cluster_and_clock``'s nodes, share and clock for
    it; ``ValueError`` naming the ``replay`` when the trace has no pod."""
    workload = load_timed_workload(spec.trace, spec.nodes, spec.trace_end_s)
    if not workload.pods:
        raise ValueError(f"{replay} replay of {spec.trace}: the trace has no pod to replay")
    return (workload, *cluster_and_clock(workload, spec))


def replay_timeline(spec: TimelineSpec, progress: Callable[[int, int], None] | None = None) -> TimelineLog:
    workload, nodes, fraction, clock = replayed_cluster(spec, "timeline")
    capacity = gpu_capacity_milli(nodes)
    run = _Run(workload, nodes, spec, clock)
    started = time.perf_counter()
    run.run(progress)
    seconds = time.perf_counter() - started
    starts: dict[str, StartRecords] = {}
    if run.starts is not None:
        # A pod never started was seen waiting until it failed (or the replay ended).
        seen = np.minimum(run.max_wait, float(run.arrival[-1]) + run.max_wait - run.arrival)
        starts = run.starts.score(run.wait, seen, run.gpu)
    return TimelineLog(
        spec=spec,
        node_names=[n.name for n in nodes],
        node_fraction=fraction,
        capacity_milli=capacity,
        compression=clock.arrivals / clock.lifetimes,
        time_scale=clock.lifetimes,
        offered_load=workload.offered_load(clock.arrivals / clock.lifetimes, capacity),
        times=np.array(run.times, np.float64),
        allocated_milli=np.array(run.allocated_rows, np.int64),
        pending=np.array(run.pending_rows, np.int64),
        gpu_counts=run.gpu_counts,
        gpu_nodes=run.gpu_nodes,
        whole_free=np.array(run.whole_free_rows, np.int64).reshape(len(run.times), len(run.gpu_counts)),
        pod_names=[p.pod.name for p in workload.pods],
        arrival_s=run.arrival,
        lifetime_s=workload.lifetime_s / clock.lifetimes,
        censored=workload.censored,
        gpu_milli=run.gpu,
        wait_s=run.wait,
        placed_on=run.placed_on,
        seconds=seconds,
        issues=workload.issues,
        starts=starts,
    )
