"""Curves against the arrived-GPU percentage, as the FGD paper's analysis scripts
compute them: every pod event falls in the bucket of its arrived percentage rounded
to an integer; a bucket's value is the mean over its events (per-event values rounded
to 2 decimals first, as the simulator logs them); an empty bucket takes the events
within +-1 of it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scheduler.sim.replay import ReplayLog

MAX_ARRIVED_PERCENT = 130
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Curves:
    """Index ``a`` holds the value at ``a``% arrived (NaN where no event is near)."""

    allocation: FloatArray  # allocated GPU share, % of capacity
    frag_amount: FloatArray  # fragmented GPU share, % of capacity
    frag_rate: FloatArray  # fragmented / idle GPU share, %

    def at(self, name: str, percent: int) -> float:
        return float(getattr(self, name)[percent])


def _bucketed(arrived: FloatArray, values: FloatArray, top: int) -> FloatArray:
    out = np.full(top + 1, np.nan)
    for percent in range(top + 1):
        rows = arrived == percent
        if not rows.any():
            rows = (arrived >= percent - 1) & (arrived <= percent + 1)
        if rows.any():
            out[percent] = values[rows].mean()
    return out


def curves(log: ReplayLog, top: int = MAX_ARRIVED_PERCENT) -> Curves:
    # The analysis scripts' arithmetic, operation for operation (milli / GPUs / 10).
    gpus = log.total_gpu_milli / 1000
    arrived = np.round(log.arrived_milli / gpus / 10, 0)  # half to even, like Python's round
    allocation = np.round(log.allocated_milli / gpus / 10, 2)
    frag = np.round(log.frag_milli, 2)
    rate = np.round(100.0 * log.frag_milli / np.maximum(log.idle_milli, 1), 2)
    return Curves(
        allocation=np.round(_bucketed(arrived, allocation, top), 2),
        frag_amount=np.round(100.0 * _bucketed(arrived, frag, top) / 1000 / gpus, 2),
        frag_rate=_bucketed(arrived, rate, top),
    )
