"""Reservations in the timeline replay (``--reserve``): the book of reserved nodes, the
Filter that keeps other pods from breaking a reservation, and what the replay tells it
of remaining lifetimes. The rules are ``scheduler.sim.reservations``'.

- ``ReservationBook`` holds the reservations (pod index -> node row), makes them
  (``reserve``: among the nodes the profile's own filters reject for room at most,
  ``room_candidates``, not reserved already, with at least the pod's GPU count) and
  answers, for a pod and a reserved node, whether placing it there keeps the
  reservation intact (``allows``: the GPUs the profile's GPU selector would give it
  there, its predicted end, the residents' predicted ends).
- ``ReservationFilter`` is that answer as the profile's last Filter (kube counts a
  nominated pod in other pods' Filter the same way); a pod is never kept off its own
  reserved node.
- Lifetimes (``remaining_ends``): ``hidden`` (none: no backfill, the node with the
  most free GPUs), ``oracle`` (the replay's own lifetimes less each resident's age),
  ``model`` (the cross-fitted lifetime model's quantiles at each pod's age,
  ``timeline_model``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import ClassVar

import numpy as np

from scheduler.framework.plugin import CycleContext, FilterPlugin, GpuSelector, Rejection
from scheduler.framework.status import SKIP, SUCCESS, Status
from scheduler.lifetimes.start_forecast import room_candidates
from scheduler.objects.pod import CPU, MEMORY, Pod
from scheduler.plugins.remaining_lifetimes import OracleLifetimes, ResidentClock, gpu_residents
from scheduler.resources.gpu import MILLI_PER_GPU
from scheduler.sim.reservations import (
    BEYOND_HORIZON,
    NEVER,
    UNKNOWN_END,
    FloatArray,
    IntArray,
    Reservation,
    ReservationConfig,
    choose_node,
    gpu_free_in,
    keeps_room,
    leaves_intact,
    start_in,
)
from scheduler.sim.timeline_lifetimes import LifetimeSource
from scheduler.state.cluster_state import ClusterState

# (pods, a quantile level) -> their remaining lifetimes in seconds from now (inf: never).
RemainingEnds = Callable[[Sequence[Pod], float], FloatArray]
RESERVED = "node(s) were reserved for a waiting pod"


def remaining_ends(
    source: LifetimeSource,
    trace: str,
    pod_keys: Sequence[str],
    lifetimes_s: Iterable[float],
    clock: ResidentClock,
) -> RemainingEnds | None:
    """What the reservations are told of remaining lifetimes; None when hidden."""
    if source == "hidden":
        return None
    if source == "oracle":
        oracle = OracleLifetimes(dict(zip(pod_keys, (float(t) for t in lifetimes_s), strict=True)), clock)
        return lambda pods, _level: oracle.remaining_s(pods)
    if source == "model":
        from scheduler.sim.timeline_model import cross_fitted  # noqa: PLC0415 - scipy, only when asked

        model = cross_fitted(trace)

        def ends(pods: Sequence[Pod], level: float) -> FloatArray:
            if not pods:
                return np.zeros(0, np.float64)
            ages = clock.ages_s([p.key for p in pods])
            return model.quantiles(pods, ages, np.array([level]))[:, 0]

        return ends
    raise ValueError(f"unknown lifetime source {source!r}")


class ReservationBook:
    """The reservations of one replay and the decisions that read them."""

    def __init__(
        self,
        config: ReservationConfig,
        state: ClusterState,
        clock: ResidentClock,
        ends: RemainingEnds | None,
        filters: Sequence[FilterPlugin],
        gpu_selector: GpuSelector,
    ) -> None:
        self.config = config
        self.state = state
        self.clock = clock
        self.ends = ends
        self.filters = filters  # the profile's own, to find where only room is missing
        self.gpu_selector = gpu_selector
        self.by_pod: dict[int, Reservation] = {}
        self.by_node: dict[int, Reservation] = {}
        self.by_key: dict[str, Reservation] = {}
        self.pods: dict[int, Pod] = {}
        self._free: dict[tuple[int, int, float], tuple[FloatArray, IntArray]] = {}
        self._free_at = -math.inf
        self.columns = np.array([state.resource_index[CPU], state.resource_index[MEMORY]], np.int64)
        self.made = 0  # reservations made over the replay
        self.started_on_node = 0  # reserved pods placed on their reserved node

    def held(self) -> list[int]:
        return list(self.by_pod)

    def holds_other(self, pod: Pod) -> bool:
        """Whether some reservation is held by a pod other than ``pod``."""
        return len(self.by_pod) > (1 if pod.key in self.by_key else 0)

    # The node's future, by the lifetimes told.
    def _gpu_free(self, row: int, made_s: float) -> tuple[FloatArray, IntArray]:
        """Per GPU of node ``row``, seconds until it is free (``reservations``' rules for
        residents before and after ``made_s``), and the CPU and memory held by the pods
        placed after ``made_s`` that stay past the start (all of them when hidden)."""
        if self._free_at != self.clock.now:  # ages moved on: every prediction changes
            self._free.clear()
            self._free_at = self.clock.now
        key = (row, int(self.state.node_version[row]), made_s)
        cached = self._free.get(key)
        if cached is not None:
            return cached
        count = int(self.state.gpu_count[row])
        residents = gpu_residents(self.state, np.array([row], np.int64))
        started = self.clock.started
        after = np.array([started.get(p.key, -math.inf) > made_s for p in residents.pods], np.bool_)
        end = np.empty(len(residents.pods), np.float64)
        if self.ends is None:
            end[:] = np.where(after, NEVER, UNKNOWN_END)
        else:
            before_pods = [p for p, a in zip(residents.pods, after, strict=True) if not a]
            after_pods = [p for p, a in zip(residents.pods, after, strict=True) if a]
            end[~after] = np.minimum(self.ends(before_pods, self.config.start_quantile), BEYOND_HORIZON)
            end[after] = self.ends(after_pods, self.config.backfill_quantile)
        free = gpu_free_in(count, residents.entry_gpu, end[residents.entry_pod])
        start = start_in(free, count)
        staying = np.zeros(self.columns.size, np.int64)
        for key_, pod in self.state.pods_on_node[row].items():
            began = self.clock.started.get(key_, -math.inf)
            if began <= made_s:
                continue
            if self.ends is None or float(self.ends([pod], self.config.backfill_quantile)[0]) > start:
                staying += self.state.request_vector(pod)[self.columns]
        self._free[key] = (free, staying)
        return free, staying

    def allows(self, ctx: CycleContext, row: int) -> bool:
        """Whether ``ctx.pod`` may go to node ``row`` (which passed every other filter)."""
        reservation = self.by_node.get(row)
        if reservation is None or self.by_key.get(ctx.pod.key) is reservation:
            return True
        free, staying = self._gpu_free(row, reservation.made_s)
        pod = ctx.pod
        end = NEVER if self.ends is None else float(self.ends([pod], self.config.backfill_quantile)[0])
        taken = self.gpu_selector.select_gpus(ctx, row) if pod.gpu.count else ()
        count = reservation.count
        if not leaves_intact(free, taken, end, count):
            return False
        if end <= start_in(free, count):
            return True  # gone before the reserved pod can start
        reserved = self.state.request_vector(self.pods[reservation.pod])[self.columns]
        allocatable = self.state.allocatable[row][self.columns]
        return keeps_room(allocatable, staying, ctx.request[self.columns], reserved)

    # Making and ending reservations.
    def reserve(self, i: int, pod: Pod, now: float, expires_s: float) -> Reservation | None:
        """Reserves a node for pending pod ``i``; None when no node could ever hold it."""
        found = room_candidates(CycleContext(self.state, pod), self.filters)
        if found is None:
            return None
        count = pod.gpu.count
        rows = np.array(
            [r for r in found[0].tolist() if r not in self.by_node and int(self.state.gpu_count[r]) >= count],
            np.int64,
        )
        gpu_count = self.state.gpu_count[rows]
        whole = self.state.gpu_free_milli[rows] == MILLI_PER_GPU
        slots = np.arange(whole.shape[1])[None, :] < gpu_count[:, None]
        free_gpus = (whole & slots).sum(axis=1).astype(np.int64)
        start: FloatArray | None = None
        if self.ends is not None:
            start = np.array([start_in(self._gpu_free(int(r), now)[0], count) for r in rows.tolist()])
        row = choose_node(rows, free_gpus, start)
        if row is None:
            return None
        reservation = Reservation(i, row, now, expires_s, count)
        self.by_pod[i] = reservation
        self.by_node[row] = reservation
        self.by_key[pod.key] = reservation
        self.pods[i] = pod
        self.made += 1
        return reservation

    def release(self, i: int, placed_on: int | None = None) -> int | None:
        """Ends pod ``i``'s reservation (placed on row ``placed_on``, or gone); the row it
        held, None if it held none."""
        reservation = self.by_pod.pop(i, None)
        if reservation is None:
            return None
        del self.by_node[reservation.node]
        del self.by_key[self.pods.pop(i).key]
        if placed_on == reservation.node:
            self.started_on_node += 1
        return reservation.node


class ReservationFilter:
    """The profile's last Filter: keeps pods off reserved nodes where they would break
    the reservation (``ReservationBook.allows``)."""

    name: ClassVar[str] = "Reservations"

    def __init__(self, book: ReservationBook) -> None:
        self.book = book

    def pre_filter(self, ctx: CycleContext) -> Status:
        return SUCCESS if self.book.holds_other(ctx.pod) else SKIP

    def filter(self, ctx: CycleContext, nodes: IntArray) -> list[Rejection]:
        reserved = [k for k, row in enumerate(nodes.tolist()) if row in self.book.by_node]
        if not reserved:
            return []
        rejected = np.zeros(nodes.size, np.bool_)
        for k in reserved:
            rejected[k] = not self.book.allows(ctx, int(nodes[k]))
        return [Rejection(RESERVED, rejected)] if rejected.any() else []
