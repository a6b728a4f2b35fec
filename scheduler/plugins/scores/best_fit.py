"""BestFit (FGD paper baseline): prefer the node left with the least CPU and GPU after
placing the pod, each scaled by the largest node and weighted 1/2.

    s = (cpu_left - cpu) / 128000 * 0.5 + (gpu_left - gpu_milli) / 8000 * 0.5
    raw = trunc((1 - s) * 100),  score = (raw - min raw) * 100 / (max raw - min raw)

GPUs: best fit (the tightest GPU that fits a share).
"""

from __future__ import annotations

import numpy as np

from scheduler.framework.plugin import CycleContext
from scheduler.plugins.scores.fgd_common import MAX_SPEC_CPU, MAX_SPEC_GPU, cpu_left, gpu_left_total
from scheduler.state.cluster_state import IntArray


def min_max_normalize(raw: IntArray) -> IntArray:
    low, high = int(raw.min()), int(raw.max())
    if high == low:
        return np.zeros_like(raw)
    return (raw - low) * 100 // (high - low)


class BestFitScore:
    name = "BestFit"

    def score(self, ctx: CycleContext, nodes: IntArray) -> IntArray:
        spare = 0.0 + (cpu_left(ctx.state, nodes) - ctx.pod.cpu_milli) / MAX_SPEC_CPU * 0.5
        spare = spare + (gpu_left_total(ctx, nodes) - ctx.pod.gpu.total_milli) / MAX_SPEC_GPU * 0.5
        raw: IntArray = ((1.0 - spare) * 100.0).astype(np.int64)
        return min_max_normalize(raw)
