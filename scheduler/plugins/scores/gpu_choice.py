"""Which GPUs of the chosen node a GPU pod gets (the FGD simulator's Reserve step),
among the GPUs that fit it (``scheduler.state.gpu_fit``):

- whole GPUs (and any request other than a share): the lowest-index GPUs that fit
  (``AllocateExclusiveGpuId``);
- a share, best fit: the GPU with the least free share that still fits, ties to the
  lowest index;
- a share, random: a uniformly random GPU among those that fit.
"""

from __future__ import annotations

import numpy as np

from scheduler.framework.plugin import CycleContext
from scheduler.state.cluster_state import BoolArray, IntArray
from scheduler.state.gpu_fit import gpus_fitting


def fitting(ctx: CycleContext, node: int) -> BoolArray:
    """``[MAX_GPUS]``: the GPUs of ``node`` that fit the pod."""
    fits: BoolArray = gpus_fitting(ctx.state, np.array([node], np.int64), ctx.pod.gpu)[0]
    return fits


def exclusive_gpus(ctx: CycleContext, node: int) -> tuple[int, ...]:
    """The lowest-index GPUs that fit (for whole GPUs: fully free ones)."""
    gpu = ctx.pod.gpu
    if not gpu.count:
        return ()
    fits = np.flatnonzero(fitting(ctx, node))
    return tuple(int(g) for g in fits[: gpu.count])


def taken_fullest_first(free: IntArray, fits: BoolArray, count: int) -> BoolArray:
    """``[B, G]``: the ``count`` GPUs with the least free share among those that fit,
    per row, ties to the lowest index (the simulator's ``NodeResource.Sub``)."""
    order = np.argsort(free, axis=1, kind="stable")
    ranked_fits = np.take_along_axis(fits, order, axis=1)
    ranked_taken = ranked_fits & (np.cumsum(ranked_fits, axis=1) <= count)
    taken = np.zeros_like(fits)
    np.put_along_axis(taken, order, ranked_taken, axis=1)
    return taken


def best_fit_share(ctx: CycleContext, node: int) -> tuple[int, ...]:
    free = ctx.state.gpu_free_milli[node]
    candidates = np.where(fitting(ctx, node), free, np.iinfo(np.int64).max)
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
        fits = np.flatnonzero(fitting(ctx, node))
        return (int(fits[self.rng.integers(fits.size)]),)
