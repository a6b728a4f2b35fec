"""The GPUs a pod gets on the node the policy chose: FGD's choice, so that the pair
features (which read the GPU a share would take) describe the placement made."""

from __future__ import annotations

import numpy as np

from scheduler.framework.plugin import CycleContext
from scheduler.plugins.scores.gpu_choice import exclusive_gpus
from scheduler.policy.frag_delta import FragDelta
from scheduler.resources.gpu import MILLI_PER_GPU
from scheduler.state.fragmentation import pod_shape


def fgd_gpus(frag: FragDelta, ctx: CycleContext, node: int) -> tuple[int, ...]:
    """FGD's GPU choice on ``node``: a GPU share goes to the GPU whose fragmentation
    grows least; whole GPUs are taken as the exclusive-GPU plugins take them."""
    shape = pod_shape(ctx.pod)
    if shape.gpu_count == 1 and 0 < shape.gpu_milli < MILLI_PER_GPU:
        _, gpu = frag.delta(ctx.state, shape, ctx.pod.gpu, np.array([node], np.int64))
        return (int(gpu[0]),)
    return exclusive_gpus(ctx, node)
