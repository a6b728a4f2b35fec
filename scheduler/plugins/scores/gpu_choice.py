"""Which GPUs of the chosen node a GPU pod gets (the FGD simulator's Reserve step).

- whole GPUs: the lowest-index fully free GPUs (``AllocateExclusiveGpuId``);
- a share, best fit: the GPU with the least free share that still fits, ties to the
  lowest index;
- a share, random: a uniformly random GPU among those that fit.
"""

from __future__ import annotations

import numpy as np

from scheduler.framework.plugin import CycleContext


def exclusive_gpus(ctx: CycleContext, node: int) -> tuple[int, ...]:
    """The lowest-index GPUs with room (for whole GPUs: fully free ones)."""
    gpu = ctx.pod.gpu
    if not gpu.count or not gpu.milli_per_gpu:
        return ()
    fits = np.flatnonzero(ctx.state.gpu_free_milli[node] >= gpu.milli_per_gpu)
    return tuple(int(g) for g in fits[: gpu.count])


def best_fit_share(ctx: CycleContext, node: int) -> tuple[int, ...]:
    free = ctx.state.gpu_free_milli[node]
    milli = ctx.pod.gpu.milli_per_gpu
    candidates = np.where(free >= milli, free, np.iinfo(np.int64).max)
    return (int(candidates.argmin()),)


class BestFitGpus:
    """Best fit for shares, lowest-index free GPUs for whole-GPU pods."""

    def select_gpus(self, ctx: CycleContext, node: int) -> tuple[int, ...]:
        if ctx.pod.gpu.is_share:
            return best_fit_share(ctx, node)
        return exclusive_gpus(ctx, node)


class RandomGpus:
    """A random fitting GPU for shares (the simulator's ``random`` method)."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def select_gpus(self, ctx: CycleContext, node: int) -> tuple[int, ...]:
        if not ctx.pod.gpu.is_share:
            return exclusive_gpus(ctx, node)
        fits = np.flatnonzero(ctx.state.gpu_free_milli[node] >= ctx.pod.gpu.milli_per_gpu)
        return (int(fits[self.rng.integers(fits.size)]),)
