"""What a timeline replay is judged on, and the reduced result a sweep sends back. Every
time is in seconds of the trace's clock (the log's times x ``time_scale``).

- ``gpu_alloc_mean`` (the headline): GPU allocated, % of capacity, time-weighted over
  the busy window (``busy_from``, the arrival of the pod at the 1st percentile of
  arrival order, to the last arrival; ``offered_load``).
- ``whole_free_nodes_pct``: the GPU nodes with every GPU free (LAVA's empty hosts: no
  pod holds any share of their GPUs), % of the cluster's GPU nodes, time-weighted over
  the busy window; ``whole_free_pct_by_gpus``: the same per GPU count of the node
  (``whole_free_8gpu_pct`` in ``as_dict``: of the 8-GPU nodes).
- ``multi_gpu_wait_p50_s``, ``multi_gpu_wait_p90_s``: the waits of the pods asking
  ``MULTI_GPU`` GPUs or more (placement minus arrival; a pod that failed waited the max
  wait); None without such pods. ``multi_gpu_wait_gpu_hours``: the sum over them of
  GPUs x wait, in GPU-hours (a failed pod's until it failed). ``multi_gpu_pods``,
  ``multi_gpu_failed``: how many there are, and failed.
- ``pods_failed``: pods that waited the max wait and were never placed;
  ``gpu_hours_failed``: GPU x the lifetime they would have run (a censored pod's as
  observed to the trace's end, a lower bound), in GPU-hours; ``gpu_hours_failed_pct``:
  that, % of the same over all pods.
- ``wait_p50_s``, ``wait_p99_s``: placement minus arrival, over the pods placed (those
  placed on arrival count with 0); None when no pod was placed.
- ``peak_pending``, ``pending_mean``: pods pending, at most (over the whole replay)
  and time-weighted over the busy window.
- ``seconds``: wall time of the event loop.

A time-weighted mean reads the log as a step function: a row's value holds from its
time until the next row's (0 before the first).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np
import numpy.typing as npt

from scheduler.sim.timeline import TimelineLog, TimelineSpec, replay_timeline
from scheduler.sim.timeline_starts import StartRecords

FloatArray = npt.NDArray[np.float64]
# Points of the curves a result keeps (the plot's resolution).
CURVE_POINTS = 400
# Pods asking this many GPUs or more are the multi-GPU pods whose waits are reported.
MULTI_GPU = 4
SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True)
class TimelineMetrics:
    gpu_alloc_mean: float
    whole_free_nodes_pct: float | None
    whole_free_pct_by_gpus: dict[int, float]
    multi_gpu_pods: int
    multi_gpu_failed: int
    multi_gpu_wait_p50_s: float | None
    multi_gpu_wait_p90_s: float | None
    multi_gpu_wait_gpu_hours: float
    pods_failed: int
    gpu_hours_failed: float
    gpu_hours_failed_pct: float | None
    wait_p50_s: float | None
    wait_p99_s: float | None
    peak_pending: int
    pending_mean: float
    seconds: float

    def whole_free_pct(self, gpus: int | None = None) -> float:
        """Whole free GPU nodes, %: of every GPU node, or of the nodes of ``gpus`` GPUs
        (0 where the cluster has none); 0 where nothing was measured."""
        if gpus is None:
            return self.whole_free_nodes_pct or 0.0
        return self.whole_free_pct_by_gpus.get(gpus, 0.0)

    def as_dict(self) -> dict[str, float | int | None]:
        """Flat: ``whole_free_pct_by_gpus`` as ``whole_free_<g>gpu_pct``."""
        out: dict[str, float | int | None] = {
            k: v for k, v in asdict(self).items() if k != "whole_free_pct_by_gpus"
        }
        out.update({whole_free_key(g): v for g, v in self.whole_free_pct_by_gpus.items()})
        return out


def whole_free_key(gpus: int) -> str:
    return f"whole_free_{gpus}gpu_pct"


def time_weighted_mean(
    times: FloatArray, values: npt.NDArray[np.generic], start: float, stop: float
) -> float:
    """The mean over ``[start, stop]`` of the step function ``values[j]`` from
    ``times[j]`` to ``times[j + 1]`` (0 before ``times[0]``); its value at ``start``
    when the window is a single instant."""
    if stop <= start:
        return float(step_values(times, values, np.array([start]))[0])
    ends = np.append(times[1:], np.inf)
    held = np.clip(ends, start, stop) - np.clip(times, start, stop)
    return float((values.astype(np.float64) * held).sum() / (stop - start))


def step_values(times: FloatArray, values: npt.NDArray[np.generic], at: FloatArray) -> FloatArray:
    """The step function's values at the instants ``at``."""
    rows = np.searchsorted(times, at, side="right") - 1
    out = np.zeros(at.size, np.float64)
    known = rows >= 0
    out[known] = values[rows[known]]
    return out


def _percentile(values: FloatArray, q: float) -> float | None:
    return float(np.percentile(values, q)) if values.size else None


def whole_free_pct(log: TimelineLog, start: float, stop: float) -> tuple[float | None, dict[int, float]]:
    """Whole free GPU nodes, % time-weighted over ``[start, stop]``: of all GPU nodes,
    and per GPU count of the node."""
    means = [
        time_weighted_mean(log.times, log.whole_free[:, j], start, stop) for j in range(len(log.gpu_counts))
    ]
    by_gpus = {
        g: 100.0 * mean / int(nodes)
        for g, mean, nodes in zip(log.gpu_counts, means, log.gpu_nodes, strict=True)
    }
    total = int(log.gpu_nodes.sum())
    return (100.0 * sum(means) / total if total else None), by_gpus


def timeline_metrics(log: TimelineLog) -> TimelineMetrics:
    start, stop = log.busy_from_s, float(log.arrival_s[-1])
    failed = log.failed
    gpus = log.gpu_milli / 1000.0
    gpu_seconds = log.gpu_milli * log.lifetime_s
    offered = float(gpu_seconds.sum())
    waits = log.wait_s[~failed] * log.time_scale
    multi = log.gpu_milli >= MULTI_GPU * 1000
    multi_waits = np.where(failed, log.spec.max_wait_s, log.wait_s * log.time_scale)[multi]
    whole_free, by_gpus = whole_free_pct(log, start, stop)
    hours = log.time_scale / SECONDS_PER_HOUR
    return TimelineMetrics(
        gpu_alloc_mean=100.0
        * time_weighted_mean(log.times, log.allocated_milli, start, stop)
        / max(log.capacity_milli, 1),
        whole_free_nodes_pct=whole_free,
        whole_free_pct_by_gpus=by_gpus,
        multi_gpu_pods=int(multi.sum()),
        multi_gpu_failed=int((multi & failed).sum()),
        multi_gpu_wait_p50_s=_percentile(multi_waits, 50),
        multi_gpu_wait_p90_s=_percentile(multi_waits, 90),
        multi_gpu_wait_gpu_hours=float((gpus[multi] * multi_waits).sum()) / SECONDS_PER_HOUR,
        pods_failed=int(failed.sum()),
        gpu_hours_failed=float((gpus * log.lifetime_s)[failed].sum()) * hours,
        gpu_hours_failed_pct=100.0 * float(gpu_seconds[failed].sum()) / offered if offered else None,
        wait_p50_s=_percentile(waits, 50),
        wait_p99_s=_percentile(waits, 99),
        peak_pending=int(log.pending.max(initial=0)),
        pending_mean=time_weighted_mean(log.times, log.pending, start, stop),
        seconds=log.seconds,
    )


@dataclass(frozen=True)
class TimelineResult:
    """A timeline replay reduced to its metrics and its curves on a fixed grid (the same
    grid for every policy and seed of a trace, load and max-wait)."""

    spec: TimelineSpec
    compression: float
    time_scale: float  # trace seconds per replay second
    node_fraction: float
    offered_load: float
    capacity_milli: int
    pods: int
    censored: int  # pods still running when the list was taken
    metrics: TimelineMetrics
    curve_s: FloatArray  # replay seconds, the busy window's start to the end
    allocation_pct: FloatArray
    pending: FloatArray
    whole_free_pct: FloatArray  # whole free GPU nodes, % of the GPU nodes
    largest_gpu_count: int  # the GPUs of the cluster's largest GPU nodes
    whole_free_largest_pct: FloatArray  # the same, % of those nodes
    busy_from_s: float
    last_arrival_s: float
    issues: tuple[str, ...]
    # Per variant, the start forecasts held against actual starts (``timeline_starts``).
    starts: dict[str, StartRecords] = field(default_factory=dict)


def reduce_log(log: TimelineLog, points: int = CURVE_POINTS) -> TimelineResult:
    grid = np.linspace(log.busy_from_s, log.end_s, points)
    allocation = 100.0 * step_values(log.times, log.allocated_milli, grid) / max(log.capacity_milli, 1)
    whole_free = step_values(log.times, log.whole_free.sum(axis=1), grid)
    largest = log.gpu_counts[-1] if log.gpu_counts else 0
    whole_free_largest = (
        step_values(log.times, log.whole_free[:, -1], grid) / int(log.gpu_nodes[-1])
        if log.gpu_counts
        else np.zeros(points)
    )
    return TimelineResult(
        spec=log.spec,
        compression=log.compression,
        time_scale=log.time_scale,
        node_fraction=log.node_fraction,
        offered_load=log.offered_load,
        capacity_milli=log.capacity_milli,
        pods=len(log.arrival_s),
        censored=int(log.censored.sum()),
        metrics=timeline_metrics(log),
        curve_s=grid,
        allocation_pct=allocation,
        pending=step_values(log.times, log.pending, grid),
        whole_free_pct=100.0 * whole_free / max(int(log.gpu_nodes.sum()), 1),
        largest_gpu_count=largest,
        whole_free_largest_pct=100.0 * whole_free_largest,
        busy_from_s=log.busy_from_s,
        last_arrival_s=float(log.arrival_s[-1]),
        issues=tuple(log.issues),
        starts=log.starts,
    )


def run_timeline(spec: TimelineSpec, progress: Callable[[int, int], None] | None = None) -> TimelineResult:
    """One replay, reduced (a module-level function: sweeps send it to worker processes)."""
    return reduce_log(replay_timeline(spec, progress))
