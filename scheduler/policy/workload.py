"""Workload statistics the features put beside each node and pod: what the typical
pods ask (CPU per GPU of the GPU pods and of the CPU-only ones, how much of the GPU
workload each GPU model may serve) against what the cluster has (cores per GPU, each
model's share of the GPUs)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scheduler.policy.features import FloatArray
from scheduler.resources.gpu import MILLI_PER_GPU
from scheduler.state.cluster_state import CPU_COLUMN, ClusterState
from scheduler.state.fragmentation import TypicalPods


@dataclass(frozen=True)
class WorkloadDemand:
    """What the typical workload asks, from its shapes and frequencies alone."""

    gpu_freq: float  # frequency of the typical pods that take GPUs
    gpu_cpu_per_gpu: float  # cores per GPU of the typical GPU pods
    cpu_only_per_gpu: float  # cores of the typical CPU-only pods per typical GPU

    @classmethod
    def of(cls, typical: TypicalPods) -> WorkloadDemand:
        pairs = list(zip(typical.shapes, typical.freq, strict=True))
        gpu_freq = sum(f for s, f in pairs if s.gpu_count)
        gpus = sum(f * s.gpu_count * s.gpu_milli / MILLI_PER_GPU for s, f in pairs)
        gpu_cpu = sum(f * s.cpu_milli / 1000 for s, f in pairs if s.gpu_count)
        cpu_only = sum(f * s.cpu_milli / 1000 for s, f in pairs if not s.gpu_count)
        return cls(
            gpu_freq=gpu_freq,
            gpu_cpu_per_gpu=gpu_cpu / gpus if gpus else 0.0,
            cpu_only_per_gpu=cpu_only / gpus if gpus else 0.0,
        )

    @property
    def cpu_per_gpu(self) -> float:
        """Cores per GPU the workload asks, GPU and CPU-only pods together."""
        return self.gpu_cpu_per_gpu + self.cpu_only_per_gpu


@dataclass(frozen=True)
class ClusterSupply:
    """What the cluster's nodes offer the workload, per GPU model; indexed by
    ``state.gpu_model_id``, whose -1 (no GPU) is the last slot."""

    model_access: FloatArray  # [M + 1] share of the typical GPU workload each model may run
    model_share: FloatArray  # [M + 1] share of the cluster's GPUs of each model
    cpu_per_gpu: float  # the cluster's cores per GPU (0 without GPUs)

    @classmethod
    def empty(cls) -> ClusterSupply:
        return cls(np.zeros(1, np.float32), np.zeros(1, np.float32), 0.0)

    @classmethod
    def of(cls, state: ClusterState, typical: TypicalPods, demand: WorkloadDemand) -> ClusterSupply:
        models = state.gpu_models
        access = typical.accessible(models)  # [T, M + 1]
        freq = np.array(typical.freq, np.float64)
        is_gpu = np.array([s.gpu_count > 0 for s in typical.shapes], np.bool_)
        if demand.gpu_freq > 0:
            model_access = ((freq[is_gpu, None] * access[is_gpu]).sum(axis=0) / demand.gpu_freq).astype(
                np.float32
            )
        else:
            model_access = np.ones(len(models) + 1, np.float32)
        gpus = state.gpu_count
        total = float(gpus.sum())
        share = np.zeros(len(models) + 1, np.float32)
        if total:
            np.add.at(share, state.gpu_model_id, gpus / total)  # id -1 lands in the last slot
        cores = float(state.allocatable[:, CPU_COLUMN].sum()) / 1000
        return cls(model_access, share, cores / total if total else 0.0)


def cpu_pressure(demand: WorkloadDemand, supply: ClusterSupply) -> float:
    """Cores per GPU the workload asks over cores per GPU the cluster has."""
    return demand.cpu_per_gpu / supply.cpu_per_gpu if supply.cpu_per_gpu else 0.0
