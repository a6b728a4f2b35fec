"""GpuShare: a GPU pod needs ``count`` GPUs of the node each with at least
``milli_per_gpu`` thousandths free, and, when it names GPU models, a node of one of
those models.

Whole-GPU pods need fully free GPUs (1000 milli). A share (count 1, milli < 1000)
fits on any GPU with enough free share, as in the FGD simulator. Rejections:
``Insufficient nvidia.com/gpu`` (resolvable by pods leaving) and
``node(s) didn't match the requested GPU model`` (unresolvable).
"""

from __future__ import annotations

import numpy as np

from scheduler.framework.plugin import CycleContext, Rejection, SkipUnlessBase
from scheduler.framework.status import Code
from scheduler.resources.gpu import GPU_RESOURCE
from scheduler.state.cluster_state import IntArray

INSUFFICIENT_GPU = f"Insufficient {GPU_RESOURCE}"
WRONG_MODEL = "node(s) didn't match the requested GPU model"


def gpus_with_room(free_milli: IntArray, milli_per_gpu: int) -> IntArray:
    """Per node, how many GPUs have ``milli_per_gpu`` free (absent GPUs have 0 free)."""
    count: IntArray = np.count_nonzero(free_milli >= milli_per_gpu, axis=-1)
    return count


class GpuShare(SkipUnlessBase):
    name = "GpuShare"

    def applies(self, ctx: CycleContext) -> bool:
        return ctx.pod.gpu.count > 0 or bool(ctx.pod.gpu.models)

    def filter(self, ctx: CycleContext, nodes: IntArray) -> list[Rejection]:
        state, gpu = ctx.state, ctx.pod.gpu
        out: list[Rejection] = []
        if gpu.models:
            allowed = np.array([m in gpu.models for m in state.gpu_models] + [False], np.bool_)
            wrong = ~allowed[state.gpu_model_id[nodes]]  # id -1 picks the trailing False
            if wrong.any():
                out.append(Rejection(WRONG_MODEL, wrong, Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
        if gpu.count > 0:
            short = gpus_with_room(state.gpu_free_milli[nodes], gpu.milli_per_gpu) < gpu.count
            if out:
                short &= ~out[0].nodes  # one reason per node, the model first
            if short.any():
                out.append(Rejection(INSUFFICIENT_GPU, short))
        return out
