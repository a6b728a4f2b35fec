"""How hard a compressed trace pushes a cluster, and the compression that pushes it to
a chosen load.

Pod ``i`` of a trace is created at ``c_i`` and lives ``L_i`` seconds. Compressed by
``k``, it arrives at ``c_i / k`` and still lives ``L_i``. The *offered GPU load* at
``k`` is the time-average, over the compressed arrival span ``[c_0 / k, c_n / k]``, of
the GPU requested by the pods that would be alive if every pod were placed on arrival
and stayed its lifetime:

    offered(k) = sum_i g_i * min(k * L_i, c_n - c_i) / (c_n - c_0)

(pod ``i`` is alive for ``min(L_i, (c_n - c_i) / k)`` of the span, which lasts
``(c_n - c_0) / k``). Every term grows with ``k`` until ``k * L_i`` reaches
``c_n - c_i``, so ``offered`` is nondecreasing, continuous, 0 at ``k = 0``, and
reaches its largest value, ``sum_i g_i * (c_n - c_i) / (c_n - c_0)`` (every pod alive
from its arrival to the last one), at ``k = max_i (c_n - c_i) / L_i``. Bisection finds
the ``k`` of any load up to that largest value.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from scheduler.errors import SchedulerInputError

FloatArray = npt.NDArray[np.float64]
# Bisection stops when the bracket is this narrow, relative to k.
RELATIVE_TOLERANCE = 1e-12
_MAX_STEPS = 200


def offered_gpu_milli(
    creation_s: FloatArray, lifetime_s: FloatArray, gpu_milli: FloatArray, compression: float
) -> float:
    """``offered(k)`` of the module docstring, in GPU milli; ``creation_s`` sorted."""
    last = creation_s[-1]
    span = last - creation_s[0]
    if span <= 0:
        raise SchedulerInputError(
            "trace", "creation_time", "every pod is created at the same time: no arrival span to compress"
        )
    alive = np.minimum(compression * lifetime_s, last - creation_s)
    return float((gpu_milli * alive).sum() / span)


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
