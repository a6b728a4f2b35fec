"""The scheduler's view of a node."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduler.objects.taints import Taint


@dataclass(frozen=True, slots=True)
class Node:
    """A node's allocatable resources (canonical integers, as ``Pod.requests``).

    ``gpu_count`` whole GPUs of ``gpu_model`` (the ``rl-scheduler.io/gpu-model`` label,
    empty if unknown), each with 1000 milli of share.
    """

    name: str
    allocatable: Mapping[str, int] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    gpu_count: int = 0
    gpu_model: str = ""
