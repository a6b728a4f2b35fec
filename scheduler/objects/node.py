"""The scheduler's view of a node."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduler.objects.taints import Taint
from scheduler.resources.hami import MODE_HAMI_CORE


@dataclass(frozen=True, slots=True)
class Gpu:
    """One GPU the scheduler may place on: all its cores (1000 milli), ``memory_mib``
    of memory (0: unknown, a GPU given whole) and ``slots`` vGPU slots (1: whole)."""

    uuid: str = ""
    memory_mib: int = 0
    slots: int = 1
    type: str = ""
    mode: str = MODE_HAMI_CORE
    numa: int = 0


@dataclass(frozen=True, slots=True)
class Node:
    """A node's allocatable resources (canonical integers, as ``Pod.requests``) and its
    GPUs: HAMi's devices (``gpu_sharing``: shares allowed) or the plain device plugin's
    whole GPUs. ``gpu_problem`` says why GPUs the node advertises are not used, if any."""

    name: str
    allocatable: Mapping[str, int] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    gpus: tuple[Gpu, ...] = ()
    gpu_sharing: bool = False
    gpu_problem: str = ""

    @property
    def gpu_count(self) -> int:
        return len(self.gpus)

    @property
    def gpu_model(self) -> str:
        """The node's GPU type (its first GPU's; empty if unknown or no GPU)."""
        return self.gpus[0].type if self.gpus else ""
