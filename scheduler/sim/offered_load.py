"""How hard a trace pushes a cluster: the offered GPU load, on the trace's own clock or
with arrivals compressed, and the compression that pushes it to a chosen load.

Pod ``i`` of a trace (sorted by creation time) is created at ``c_i`` and lives ``L_i``
seconds. Compressed by ``k``, it arrives at ``c_i / k`` and still lives ``L_i``. On one
clock (the timeline replay's default: arrivals and lifetimes divided by one scale) the
load is ``offered(1)`` below, whatever the scale, and a load is met by sizing the
cluster (``cluster_size``); ``k`` is the earlier mode's (``--compress-arrivals``).

The openb pod lists are snapshots: a few long-lived pods were created weeks or months
before the rest (on ``default``, the first 81 of 8,152 pods over the first 116 of its
149 days). Averaged from the first arrival, the load is diluted by that quiet stretch
however hard the trace is compressed. So the load is averaged over the *busy window* instead: from
``c_b``, the creation of the pod at the 1st percentile of arrival order
(``b = floor((n - 1) / 100)``; the first pod of a trace of 100 pods or fewer), to the
last creation ``c_n``. Pods created before ``c_b`` are still replayed from their own
arrival and count while they run; they only do not stretch the window.

The *offered GPU load* at ``k`` is the time-average, over the compressed busy window
``[c_b / k, c_n / k]``, of the GPU requested by the pods that would be alive if every
pod were placed on arrival and stayed its lifetime:

    offered(k) = sum_i g_i * max(0, min(k * L_i, c_n - c_i) - max(0, c_b - c_i)) / (c_n - c_b)

(pod ``i`` is alive from ``c_i / k`` to ``c_i / k + L_i``; the part of that inside the
window, times ``k``, is the term; for a pod created at or after ``c_b`` it is
``min(k * L_i, c_n - c_i)``). Every term grows with ``k`` until ``k * L_i`` reaches
``c_n - c_i``, so ``offered`` is nondecreasing, continuous, 0 at ``k = 0``, and reaches
its largest value, ``sum_i g_i * (c_n - max(c_i, c_b)) / (c_n - c_b)`` (every pod alive
from its arrival, or the window's start, to the last arrival), at
``k = max_i (c_n - c_i) / L_i``. Bisection finds the ``k`` of any load up to that
largest value.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from scheduler.errors import SchedulerInputError

FloatArray = npt.NDArray[np.float64]
# The busy window opens at the arrival of the pod at this percentile of arrival order.
BUSY_FROM_PERCENTILE = 1
# Bisection stops when the bracket is this narrow, relative to k.
RELATIVE_TOLERANCE = 1e-12
_MAX_STEPS = 200


def busy_from_index(pods: int) -> int:
    """The pod, in arrival order (0-based), whose arrival opens the busy window:
    ``floor((pods - 1) * BUSY_FROM_PERCENTILE / 100)``."""
    return max(pods - 1, 0) * BUSY_FROM_PERCENTILE // 100


def busy_from(creation_s: FloatArray) -> float:
    """The creation time that opens the busy window; ``creation_s`` sorted."""
    return float(creation_s[busy_from_index(creation_s.size)])


def offered_gpu_milli(
    creation_s: FloatArray, lifetime_s: FloatArray, gpu_milli: FloatArray, compression: float
) -> float:
    """``offered(k)`` of the module docstring, in GPU milli; ``creation_s`` sorted."""
    start, last = busy_from(creation_s), creation_s[-1]
    span = last - start
    if span <= 0:
        raise SchedulerInputError(
            "trace",
            "creation_time",
            "every pod from the 1st percentile of arrival order on is created at the same time: "
            "no arrival span to compress",
        )
    alive = np.minimum(compression * lifetime_s, last - creation_s) - np.maximum(start - creation_s, 0.0)
    return float((gpu_milli * np.maximum(alive, 0.0)).sum() / span)


def most_offered_gpu_milli(creation_s: FloatArray, lifetime_s: FloatArray, gpu_milli: FloatArray) -> float:
    """The largest offered load any compression gives (every pod alive until the last
    arrival)."""
    saturating = saturating_compression(creation_s, lifetime_s)
    return offered_gpu_milli(creation_s, lifetime_s, gpu_milli, saturating)


def saturating_compression(creation_s: FloatArray, lifetime_s: FloatArray) -> float:
    """The smallest ``k`` at which every pod outlives the last arrival."""
    return float(np.max((creation_s[-1] - creation_s) / lifetime_s))


def compression_for_load(
    creation_s: FloatArray, lifetime_s: FloatArray, gpu_milli: FloatArray, target_milli: float
) -> float:
    """The smallest ``k`` (to ``RELATIVE_TOLERANCE``) whose offered load reaches
    ``target_milli``; ``lifetime_s`` positive. A target past what the trace can offer is
    an error that says how much it can."""
    if target_milli <= 0:
        raise SchedulerInputError("offered load", "load", f"must be greater than 0, got {target_milli}")
    most = most_offered_gpu_milli(creation_s, lifetime_s, gpu_milli)
    if target_milli > most:
        raise SchedulerInputError(
            "offered load",
            "load",
            f"{target_milli / 1000:.1f} GPUs is more than this trace can offer at any compression "
            f"({most / 1000:.1f} GPUs, with every pod alive from its arrival to the last one)",
        )
    low, high = 0.0, saturating_compression(creation_s, lifetime_s)
    for _ in range(_MAX_STEPS):
        if high - low <= RELATIVE_TOLERANCE * high:
            break
        middle = (low + high) / 2
        if offered_gpu_milli(creation_s, lifetime_s, gpu_milli, middle) >= target_milli:
            high = middle
        else:
            low = middle
    return high
