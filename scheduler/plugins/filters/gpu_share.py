"""GpuShare: a GPU pod needs ``count`` GPUs of one node that each fit its request
(``scheduler.state.gpu_fit``: free cores, memory and slots; type, UUID and mode).

PreFilter refuses, on every node and unresolvably, what no node could take even
empty: a GPU type, UUID or mode no GPU has, more GPUs than any node has, more memory
than any GPU has, a share where no node is HAMi's. Filter rejections:

- ``node(s) didn't match the pod's GPU type, UUID or mode`` (unresolvable): no GPU of
  the node is one the pod accepts;
- ``node(s) had no HAMi vGPU devices (GPUs given whole)`` (unresolvable): a share on a
  node without HAMi's device plugin;
- ``Insufficient nvidia.com/gpu``: too few GPUs with room (resolvable by pods leaving).
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from scheduler.framework.plugin import CycleContext, Rejection, SkipUnlessBase
from scheduler.framework.status import SKIP, Code, Status, unresolvable
from scheduler.resources.gpu import (
    GPU_MEMORY_RESOURCE,
    GPU_RESOURCE,
    NOUSE_GPU_TYPE,
    NOUSE_GPU_UUID,
    USE_GPU_TYPE,
    USE_GPU_UUID,
    VGPU_MODE,
    GpuRequest,
    type_matches,
)
from scheduler.resources.hami import REGISTER_ANNOTATION
from scheduler.state.cluster_state import BoolArray, ClusterState, IntArray
from scheduler.state.gpu_fit import count_per_node, eligible_gpus, gpus_with_room

INSUFFICIENT_GPU = f"Insufficient {GPU_RESOURCE}"
WRONG_GPU = "node(s) didn't match the pod's GPU type, UUID or mode"
NO_SHARING = "node(s) had no HAMi vGPU devices (GPUs given whole)"
_MAX_VERDICTS = 4096


def _constraint_text(gpu: GpuRequest) -> str:
    parts = [
        f'{key} "{",".join(values)}"'
        for key, values in (
            (USE_GPU_TYPE, gpu.models),
            (NOUSE_GPU_TYPE, gpu.excluded_models),
            (USE_GPU_UUID, gpu.uuids),
            (NOUSE_GPU_UUID, gpu.excluded_uuids),
        )
        if values
    ]
    if gpu.mode:
        parts.append(f'{VGPU_MODE} "{gpu.mode}"')
    return ", ".join(parts)


def never_fits(state: ClusterState, gpu: GpuRequest) -> str:
    """Why no node of ``state`` could take ``gpu`` even with nothing placed (empty: some
    could)."""
    exists = state.gpu_exists()
    eligible = eligible_gpus(state, gpu)
    usable: BoolArray = exists if eligible is None else exists & eligible
    if not usable.any():
        if eligible is not None:
            types = sorted({n.gpu_model for n in state.nodes if n.gpu_count and n.gpu_model})
            if gpu.models or gpu.excluded_models:
                typed = [t for t in types if type_matches(t, gpu.models, gpu.excluded_models)]
                if not typed:
                    known = ", ".join(types) or "none"
                    return (
                        f"no GPU is of the pod's type ({_constraint_text(gpu)}); "
                        f"GPU types in the cluster: {known}"
                    )
            return f"no GPU matches the pod's {_constraint_text(gpu)}"
        return ""  # no GPU at all: NodeResourcesFit says Insufficient nvidia.com/gpu, as kube-scheduler does
    if not gpu.is_whole:
        usable = usable & state.gpu_sharing[:, None]
        if not usable.any():
            return (
                f"the pod asks a share of a GPU and no node has HAMi's vGPU devices ({REGISTER_ANNOTATION}); "
                "nodes without them give GPUs whole"
            )
    per_node = usable.sum(axis=1)
    if per_node.max() < gpu.count:
        return (
            f"the pod asks {gpu.count} GPUs ({GPU_RESOURCE}); "
            f"no node has more than {per_node.max()} that it may use"
        )
    if gpu.memory_mib:
        large = usable & (state.gpu_memory >= gpu.memory_mib)
        if not large.any():
            biggest = int(state.gpu_memory[usable].max())
            return (
                f"the pod asks {gpu.memory_mib} MiB of GPU memory ({GPU_MEMORY_RESOURCE}); "
                f"the largest GPU it may use has {biggest} MiB"
            )
        if large.sum(axis=1).max() < gpu.count:
            return f"no node has {gpu.count} GPUs with {gpu.memory_mib} MiB each ({GPU_MEMORY_RESOURCE})"
    return ""


class GpuShare(SkipUnlessBase):
    name = "GpuShare"

    def __init__(self) -> None:
        self._verdicts: dict[Hashable, str] = {}

    def applies(self, ctx: CycleContext) -> bool:
        return ctx.pod.gpu.count > 0

    def pre_filter(self, ctx: CycleContext) -> Status:
        if not self.applies(ctx):
            return SKIP
        state, gpu = ctx.state, ctx.pod.gpu
        # What no node could take depends on the nodes only, not on what is placed.
        key = (
            state.serial,
            state.topology_version,
            gpu.count,
            gpu.is_whole,
            gpu.memory_mib,
            gpu.gpu_filter_key,
        )
        verdict = self._verdicts.get(key)
        if verdict is None:
            if len(self._verdicts) > _MAX_VERDICTS:
                self._verdicts.clear()
            verdict = self._verdicts[key] = never_fits(state, gpu)
        return unresolvable(self.name, verdict) if verdict else Status()

    def filter(self, ctx: CycleContext, nodes: IntArray) -> list[Rejection]:
        state, gpu = ctx.state, ctx.pod.gpu
        out: list[Rejection] = []
        rejected = np.zeros(nodes.size, np.bool_)
        eligible = eligible_gpus(state, gpu)
        if eligible is not None:
            wrong = count_per_node(eligible)[nodes] == 0  # the mask is False past a node's GPUs
            if wrong.any():
                out.append(Rejection(WRONG_GPU, wrong, Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
                rejected |= wrong
        if not gpu.is_whole:
            whole_only = ~state.gpu_sharing[nodes] & (state.gpu_count[nodes] > 0) & ~rejected
            if whole_only.any():
                out.append(Rejection(NO_SHARING, whole_only, Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
                rejected |= whole_only
        short = (gpus_with_room(state, nodes, gpu) < gpu.count) & ~rejected
        if short.any():
            out.append(Rejection(INSUFFICIENT_GPU, short))
        return out
