"""GpuPacking (FGD paper baseline): fill partly used GPUs first, then nodes with some
GPUs in use, and only then touch fully free nodes. With ``free`` the node's fully free
GPUs and the pod's GPUs chosen best-fit (fullest first):

    all GPUs free:                       max(33 - free, free)
    the chosen GPUs include free ones:   max(50 - chosen free ones, 33)
    only partly used GPUs are chosen:    max(100 - sum(trunc(free_milli * 100 / 1000)) / 10, 50)

CPU-only pods score 0 everywhere (ties). GPUs: best fit.
"""

from __future__ import annotations

import numpy as np

from scheduler.framework.plugin import CycleContext
from scheduler.resources.gpu import MILLI_PER_GPU
from scheduler.state.cluster_state import IntArray
from scheduler.state.gpu_fit import gpus_fitting


class GpuPackingScore:
    name = "GpuPacking"

    def score(self, ctx: CycleContext, nodes: IntArray) -> IntArray:
        gpu = ctx.pod.gpu
        if not gpu.count or not gpu.milli_per_gpu:
            return np.zeros(nodes.size, np.int64)
        state = ctx.state
        free_milli = state.gpu_free_milli[nodes]
        exists = np.arange(free_milli.shape[1])[None, :] < state.gpu_count[nodes, None]
        fully_free = (free_milli == MILLI_PER_GPU) & exists
        free_count = fully_free.sum(axis=1)
        all_free = free_count == state.gpu_count[nodes]

        # Fullest GPUs with room first (stable sort keeps index order among equals).
        order = np.argsort(np.where(exists, free_milli, np.iinfo(np.int64).max), axis=1, kind="stable")
        ranked = np.take_along_axis(free_milli, order, axis=1)
        room = np.take_along_axis(gpus_fitting(state, nodes, gpu), order, axis=1)
        chosen = room & (np.cumsum(room, axis=1) <= gpu.count)
        full_use = (chosen & (ranked == MILLI_PER_GPU)).sum(axis=1)
        used = np.where(chosen, ranked * 100 // MILLI_PER_GPU, 0).sum(axis=1)

        partial = np.maximum(100 - used // 10, 50)
        with_free = np.maximum(50 - full_use, 33)
        untouched = np.maximum(33 - free_count, free_count)
        score: IntArray = np.where(all_free, untouched, np.where(full_use > 0, with_free, partial)).astype(
            np.int64
        )
        return score
