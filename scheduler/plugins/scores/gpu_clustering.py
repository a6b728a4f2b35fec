"""GpuClustering (FGD paper baseline): keep GPU pods of the same kind together. A pod's
kind is ``share-gpu`` (one GPU, a share), ``<n>-gpu`` (n whole GPUs) or ``no-gpu``.
With ``base = trunc(25 * (8000 - gpu_left) / 8000)``:

    only pods of this kind on the node:       base + 75
    pods of this kind and of other kinds:     base + 50
    no GPU pods on the node:                  base + 25
    only pods of other kinds:                 base

CPU-only pods score 0 everywhere (ties). GPUs: best fit.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from scheduler.framework.plugin import CycleContext
from scheduler.objects.pod import Pod
from scheduler.plugins.scores.fgd_common import MAX_SPEC_GPU, gpu_left_total
from scheduler.state.cluster_state import ClusterState, IntArray


def gpu_kind(pod: Pod) -> str:
    gpu = pod.gpu
    if not gpu.count or not gpu.milli_per_gpu:
        return "no-gpu"
    return "share-gpu" if gpu.is_share else f"{gpu.count}-gpu"


class GpuClusteringScore:
    name = "GpuClustering"

    def __init__(self) -> None:
        self._serial = 0
        self._version = np.zeros(0, np.int64)
        self._kinds: list[Counter[str]] = []

    def _kinds_on(self, state: ClusterState, nodes: IntArray) -> list[Counter[str]]:
        if state.serial != self._serial or self._version.size != len(state):
            self._serial = state.serial
            self._version = np.full(len(state), -1, np.int64)
            self._kinds = [Counter() for _ in range(len(state))]
        versions = state.node_version
        for i in nodes[self._version[nodes] != versions[nodes]]:
            kinds = Counter(gpu_kind(p) for p in state.pods_on_node[i].values())
            kinds.pop("no-gpu", None)
            self._kinds[i] = kinds
            self._version[i] = versions[i]
        return [self._kinds[i] for i in nodes]

    def score(self, ctx: CycleContext, nodes: IntArray) -> IntArray:
        kind = gpu_kind(ctx.pod)
        if kind == "no-gpu":
            return np.zeros(nodes.size, np.int64)
        base = 25 * (MAX_SPEC_GPU - gpu_left_total(ctx, nodes)) // MAX_SPEC_GPU
        bonus = np.array(
            [
                (75 if len(kinds) == 1 else 50) if kinds[kind] > 0 else (25 if not kinds else 0)
                for kinds in self._kinds_on(ctx.state, nodes)
            ],
            np.int64,
        )
        return (base + bonus).astype(np.int64)
