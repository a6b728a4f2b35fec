"""The policy's feature lists: names, their order in the columns, and their scales.

- **Node features** (``NODE_FEATURES``, one row per node, independent of the pod):
  capacity, free share and utilisation of CPU, memory and GPU, the per-GPU free-share
  summary (fully free GPUs, partial free share, largest partial), CPU left per idle
  GPU, the node's fragment amount F, how much of the typical GPU workload may run on
  its GPU model and how common that model is.
- **Pair features** (``PAIR_FEATURES``, one row per feasible node, for this pod): the
  FGD score and the continuous fragmentation change dF, what is left after placing the
  pod, and the CPU shortfall against a CPU reserve per idle GPU at several reserves
  (the capacity FGD strands at saturation is idle GPUs on nodes without CPU).
- **Pod features** (``POD_FEATURES``): the request, its kind, and the workload context
  (CPU per GPU of the typical GPU pods and of the CPU-only ones, the cluster's CPU per
  GPU).

A feature's column is its position in its list; code that reads one column looks it
up by name (``column``; ``FGD_SCORE``, ``CPU_LEFT_AFTER``, ...), and rows are built
from name -> values (``columns``), so a list's order is written in one place.
``FEATURE_SCHEMA_VERSION`` changes whenever a feature's meaning or order changes; a
checkpoint trained on another version is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float32]

FEATURE_SCHEMA_VERSION = 1

GIB = 2**30
MEMORY_SCALE = 1024 * GIB  # the largest openb node has 1 TiB
CORES_PER_GPU_SCALE = 16.0  # CPU per GPU features are in units of 16 cores
POD_CPU_SCALE = 32_000  # a pod's CPU feature is in units of 32 cores
POD_MEMORY_SCALE = 256 * GIB
RESERVES_CORES_PER_GPU = (3, 5, 7, 9, 11)

NODE_FEATURES = (
    "cpu_capacity",  # allocatable CPU / 128 cores
    "memory_capacity",  # allocatable memory / 1 TiB
    "gpu_capacity",  # GPUs / 8
    "cpu_free",  # share of the node's CPU left
    "memory_free",
    "gpu_free",  # share of the node's GPU milli left (0 without GPUs)
    "cpu_left",  # CPU left / 128 cores
    "gpus_fully_free",  # / 8
    "gpu_partial_free",  # free milli on partly used GPUs / 8000
    "gpu_largest_partial",  # largest free share of a partly used GPU / 1000
    "cpu_per_idle_gpu",  # cores left per idle GPU / 16, capped at 4
    "frag",  # F(node) / 8000
    "frag_rate",  # F(node) / idle milli
    "model_access",  # share of the typical GPU workload that may run on this model
    "model_share",  # share of the cluster's GPUs of this model
    "in_use",  # 1 if any pod is placed on the node
    "order",  # position in the state's node order / nodes (the fixed priority of ties)
)
PAIR_FEATURES = (
    "fgd_score",  # FGD's integer score / 100
    "frag_delta",  # dF / 1000, clipped to [-4, 4]
    "cpu_left_after",  # / 128 cores
    "cpu_free_after",  # share of the node's CPU left after placing
    "memory_free_after",
    "gpu_free_after",
    "gpus_fully_free_after",  # / 8
    "idle_gpus_after",  # idle GPU share left on the node after placing, in GPUs / 8
    "cpu_per_idle_gpu_after",  # / 16 cores, capped at 4
    *(f"cpu_shortfall_{c}" for c in RESERVES_CORES_PER_GPU),  # (c * idle GPUs - cores left)+ / 16
    "share_gpu_left_after",  # free share of the GPU a share pod takes, after (/1000)
    "share_opens_gpu",  # 1 if a share pod takes a fully free GPU
    "best_fit",  # 1 - (cpu left / 128 cores + GPU left / 8 GPUs) / 2, after placing
)
POD_FEATURES = (
    "cpu",  # / 32 cores
    "memory",  # / 256 GiB
    "gpu_milli",  # per GPU / 1000
    "gpu_count",  # / 8
    "is_share",
    "is_cpu_only",
    "has_model_constraint",
    "cpu_per_gpu",  # cores per GPU of the pod / 16 (0 for CPU-only pods)
    "workload_gpu_cpu_per_gpu",  # typical GPU pods' cores per GPU / 16
    "workload_cpu_only_per_gpu",  # typical CPU-only pods' cores per typical GPU / 16
    "cluster_cpu_per_gpu",  # the cluster's cores per GPU / 16 (0 without GPUs)
    "cpu_pressure",  # workload cores per GPU / cluster cores per GPU (0 without GPUs)
)


def column(features: Sequence[str], name: str) -> int:
    """The column of feature ``name`` in ``features`` (a ``KeyError`` naming it if absent)."""
    try:
        return list(features).index(name)
    except ValueError:
        raise KeyError(f"no feature {name!r} among {', '.join(features)}") from None


# Columns read on their own: the FGD prior, the reserve term's and the teacher's inputs.
FGD_SCORE = column(PAIR_FEATURES, "fgd_score")  # / 100
CPU_LEFT_AFTER = column(PAIR_FEATURES, "cpu_left_after")  # / 128 cores
IDLE_GPUS_AFTER = column(PAIR_FEATURES, "idle_gpus_after")  # / 8 GPUs
IS_SHARE = column(POD_FEATURES, "is_share")
IS_CPU_ONLY = column(POD_FEATURES, "is_cpu_only")
CPU_PRESSURE = column(POD_FEATURES, "cpu_pressure")


def columns(features: Sequence[str], values: Mapping[str, npt.ArrayLike]) -> FloatArray:
    """Rows of ``features`` from ``values`` (name -> one value per row, or one value),
    stacked in the list's order; a name missing or extra is a ``KeyError``. All arrays
    give ``[rows, len(features)]``; all scalars give ``[len(features)]``."""
    missing = [name for name in features if name not in values]
    extra = sorted(set(values) - set(features))
    if missing or extra:
        raise KeyError(f"features missing {missing}, extra {extra}")
    parts = [values[name] for name in features]
    if all(np.ndim(part) == 0 for part in parts):
        return np.array(parts, np.float32)
    out: FloatArray = np.stack(parts, axis=1).astype(np.float32)
    return out
