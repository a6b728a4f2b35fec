"""What a timeline replay is judged on, and the reduced result a sweep sends back.

- ``gpu_alloc_mean`` (the headline): GPU allocated, % of capacity, time-weighted over
  the busy window (``busy_from``, the arrival of the pod at the 1st percentile of
  arrival order, to the last arrival; ``offered_load``).
- ``gpu_hours_failed_pct``: GPU x lifetime of the pods that failed, % of that of all
  pods (their whole lifetimes, as the trace gives them, at least ``MIN_LIFETIME_S``).
- ``pods_failed``: pods that waited ``max_wait_s`` and were never placed.
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
from dataclasses import asdict, dataclass

import numpy as np
import numpy.typing as npt

from scheduler.sim.timeline import TimelineLog, TimelineSpec, replay_timeline

FloatArray = npt.NDArray[np.float64]
# Points of the curves a result keeps (the plot's resolution).
CURVE_POINTS = 400


@dataclass(frozen=True)
class TimelineMetrics:
    gpu_alloc_mean: float
    gpu_hours_failed_pct: float | None
    pods_failed: int
    wait_p50_s: float | None
    wait_p99_s: float | None
    peak_pending: int
    pending_mean: float
    seconds: float

    def as_dict(self) -> dict[str, float | int | None]:
        return asdict(self)


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


def timeline_metrics(log: TimelineLog) -> TimelineMetrics:
    start, stop = log.busy_from_s, float(log.arrival_s[-1])
    failed = log.failed
    gpu_seconds = log.gpu_milli * log.lifetime_s
    offered = float(gpu_seconds.sum())
    waits = log.wait_s[~failed]
    return TimelineMetrics(
        gpu_alloc_mean=100.0
        * time_weighted_mean(log.times, log.allocated_milli, start, stop)
        / max(log.capacity_milli, 1),
        gpu_hours_failed_pct=100.0 * float(gpu_seconds[failed].sum()) / offered if offered else None,
        pods_failed=int(failed.sum()),
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
    offered_load: float
    capacity_milli: int
    pods: int
    metrics: TimelineMetrics
    curve_s: FloatArray  # simulated seconds, the busy window's start to the end
    allocation_pct: FloatArray
    pending: FloatArray
    busy_from_s: float
    last_arrival_s: float
    issues: tuple[str, ...]


def reduce_log(log: TimelineLog, points: int = CURVE_POINTS) -> TimelineResult:
    grid = np.linspace(log.busy_from_s, log.end_s, points)
    allocation = 100.0 * step_values(log.times, log.allocated_milli, grid) / max(log.capacity_milli, 1)
    return TimelineResult(
        spec=log.spec,
        compression=log.compression,
        offered_load=log.offered_load,
        capacity_milli=log.capacity_milli,
        pods=len(log.arrival_s),
        metrics=timeline_metrics(log),
        curve_s=grid,
        allocation_pct=allocation,
        pending=step_values(log.times, log.pending, grid),
        busy_from_s=log.busy_from_s,
        last_arrival_s=float(log.arrival_s[-1]),
        issues=tuple(log.issues),
    )


def run_timeline(spec: TimelineSpec, progress: Callable[[int, int], None] | None = None) -> TimelineResult:
    """One replay, reduced (a module-level function: sweeps send it to worker processes)."""
    return reduce_log(replay_timeline(spec, progress))
