"""Which GPUs can take a pod's GPU request: HAMi's ``Fit``, per GPU, over arrays.

A GPU fits a request (``count`` GPUs of ``milli_per_gpu`` cores and some memory each)
when all of these hold (HAMi v2.10, ``pkg/device/nvidia/device.go``):

- its type, UUID and mode are ones the pod accepts (``eligible_gpus``);
- it has a free vGPU slot;
- free memory >= the request's (MiB, or a percentage of the GPU's memory, floored);
- free cores >= the request's; a request of all cores needs a GPU nobody uses (no slot
  taken), and a request of no cores a GPU whose cores are not all taken;
- a request that is not whole GPUs needs a HAMi node (other nodes give GPUs whole).

For an openb share (cores and memory percentage alike, slots to spare) this is
``free milli >= milli``, the FGD simulator's test.
"""

from __future__ import annotations

import numpy as np

from scheduler.objects.node import Gpu
from scheduler.resources.gpu import MILLI_PER_GPU, GpuRequest, type_matches
from scheduler.state.cluster_state import BoolArray, ClusterState, IntArray


def _accepts(gpu: GpuRequest, device: Gpu) -> bool:
    if not type_matches(device.type, gpu.models, gpu.excluded_models):
        return False
    if gpu.uuids and device.uuid not in gpu.uuids:
        return False
    if device.uuid in gpu.excluded_uuids:
        return False
    return not gpu.mode or device.mode in gpu.mode


def eligible_gpus(state: ClusterState, gpu: GpuRequest) -> BoolArray | None:
    """``[N, MAX_GPUS]`` GPUs whose type, UUID and mode the pod accepts; None when it
    names none of these (every GPU is eligible)."""
    if not gpu.restricts_gpus:
        return None
    key = ("gpu-eligible", gpu.models, gpu.excluded_models, gpu.uuids, gpu.excluded_uuids, gpu.mode)
    return state.gpu_mask(key, lambda device: _accepts(gpu, device))


def gpus_fitting(state: ClusterState, nodes: IntArray, gpu: GpuRequest) -> BoolArray:
    """``[B, MAX_GPUS]``: which GPUs of ``nodes`` can give ``gpu`` one GPU's worth."""
    if 2 * nodes.size >= len(state):
        # Most of the nodes (a filter's candidates): on the whole arrays, then pick the
        # rows, rather than gathering every array's rows first.
        fitting: BoolArray = _fitting(state, slice(None), gpu)[nodes]
        return fitting
    return _fitting(state, nodes, gpu)


def _fitting(state: ClusterState, rows: IntArray | slice, gpu: GpuRequest) -> BoolArray:
    free = state.gpu_free_milli[rows]
    free_slots = state.gpu_free_slots[rows]
    fits: BoolArray = free >= gpu.milli_per_gpu if gpu.milli_per_gpu else free > 0
    if gpu.milli_per_gpu >= MILLI_PER_GPU:
        fits &= free_slots == state.gpu_slots[rows]
    fits &= free_slots > 0
    if gpu.memory_mib:
        fits &= state.gpu_free_memory[rows] >= gpu.memory_mib
    elif gpu.memory_percent:
        need = state.gpu_memory[rows] * gpu.memory_percent
        need //= 100
        fits &= state.gpu_free_memory[rows] >= need
    if not gpu.is_whole:
        fits &= state.gpu_sharing[rows][:, None]
    eligible = eligible_gpus(state, gpu)
    if eligible is not None:
        fits &= eligible[rows]
    return fits


# Summing a row's eight bytes in one multiplication: the top byte of x * 0x0101...01 is
# the sum of x's bytes (each 0 or 1 here, so no carry).
_BYTE_SUM = np.uint64(0x0101010101010101)


def count_per_node(mask: BoolArray) -> IntArray:
    """``[B]``: how many GPUs of each row of ``mask`` are set (five times faster than
    ``np.count_nonzero(axis=1)`` for the scheduler's eight GPUs a node)."""
    if mask.shape[1] != 8 or mask.itemsize != 1:
        counted: IntArray = np.count_nonzero(mask, axis=1)
        return counted
    words = np.ascontiguousarray(mask).view(np.uint64).ravel()
    return ((words * _BYTE_SUM) >> np.uint64(56)).astype(np.int64)


def gpus_with_room(state: ClusterState, nodes: IntArray, gpu: GpuRequest) -> IntArray:
    """Per node, how many GPUs fit ``gpu``."""
    if 2 * nodes.size >= len(state):
        return count_per_node(_fitting(state, slice(None), gpu))[nodes]
    return count_per_node(_fitting(state, nodes, gpu))
