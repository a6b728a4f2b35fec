"""DotProd (FGD paper baseline): prefer the node whose remaining CPU and GPU, scaled by
the largest node, align least with the pod's demand.

    n = (cpu_left / 128000, gpu_left / 8000),  p = (cpu / 128000, gpu_milli / 8000)
    score = trunc(100 * (1 - (n . p) / 2))

GPUs: best fit.
"""

from __future__ import annotations

from scheduler.framework.plugin import CycleContext
from scheduler.plugins.scores.fgd_common import MAX_SPEC_CPU, MAX_SPEC_GPU, cpu_left, gpu_left_total
from scheduler.state.cluster_state import IntArray


class DotProdScore:
    name = "DotProd"

    def score(self, ctx: CycleContext, nodes: IntArray) -> IntArray:
        node_cpu = cpu_left(ctx.state, nodes) / MAX_SPEC_CPU
        node_gpu = gpu_left_total(ctx, nodes) / MAX_SPEC_GPU
        pod_cpu = ctx.pod.cpu_milli / MAX_SPEC_CPU
        pod_gpu = ctx.pod.gpu.total_milli / MAX_SPEC_GPU
        dot = (0.0 + node_cpu * pod_cpu) + node_gpu * pod_gpu
        score: IntArray = (100.0 * (1.0 - dot / 2.0)).astype("int64")
        return score
