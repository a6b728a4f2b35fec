"""A synthetic CPU/memory workload with churn, for clusters without GPUs.

Nodes are drawn from a mix of common shapes (general purpose, CPU-heavy,
memory-heavy). Pods arrive as a Poisson process and leave after an exponential
lifetime; the arrival rate is set so that the steady-state demand is ``target_load``
times the cluster's capacity in its scarcer resource. Pod shapes mix small and
large, CPU-heavy and memory-heavy requests, so placement decides how much
capacity is stranded.

What a policy is judged on: pods placed before the first one that fits nowhere,
pods that failed in all, and the CPU and memory allocated while pods were failing.

The workload (arrival times, shapes, lifetimes) is drawn from the seed before the
first decision, apart from the random numbers a policy uses to break ties, so every
policy of a seed sees the same pods. Until its first failure every policy has placed
the same pods, so the same pods are running: the first arrival whose request, added
to theirs, exceeds the cluster's CPU or memory bounds what any policy can place
before its first failure (``demand_bound``).
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from scheduler.framework.profile import schedule_pod
from scheduler.objects.node import Node
from scheduler.objects.node_manifest import node_from_manifest
from scheduler.objects.pod import CPU, MEMORY, Pod
from scheduler.objects.pod_manifest import pod_from_manifest
from scheduler.plugins.profiles import build_profile
from scheduler.plugins.registry import ProfileContext
from scheduler.state.cluster_state import ClusterState

GI = 2**30
# (cpu cores, memory GiB, weight)
NODE_SHAPES = ((4, 16, 3), (8, 32, 4), (16, 64, 3), (32, 128, 1), (16, 32, 2), (8, 64, 2))
# (cpu milli, memory MiB, weight): web, batch, cache, jvm, big batch, big cache.
POD_SHAPES = (
    (250, 512, 6),
    (500, 1024, 6),
    (1000, 2048, 4),
    (2000, 1024, 3),
    (500, 4096, 3),
    (1000, 8192, 2),
    (4000, 4096, 2),
    (4000, 16384, 1),
    (8000, 8192, 1),
)


@dataclass(frozen=True)
class SyntheticSpec:
    policy: str
    seed: int
    nodes: int = 40
    pods: int = 4000
    target_load: float = 1.1
    mean_lifetime_s: float = 3600.0
    checkpoint: str | None = None  # the learned policy's checkpoint (profile gnn)


@dataclass
class SyntheticResult:
    spec: SyntheticSpec
    placed: int
    failed: int
    placed_before_first_failure: int
    demand_bound: int  # no policy places more before its first failure (module docstring)
    cpu_allocated_at_failures: float  # mean % of cluster CPU allocated when a pod failed
    memory_allocated_at_failures: float
    seconds: float


def synthetic_nodes(count: int, rng: np.random.Generator) -> list[Node]:
    if count <= 0:
        raise ValueError(f"synthetic workload: nodes must be positive, got {count}")
    weights = np.array([w for *_, w in NODE_SHAPES], float)
    picks = rng.choice(len(NODE_SHAPES), size=count, p=weights / weights.sum())
    nodes = []
    for i, pick in enumerate(picks):
        cpu, memory, _ = NODE_SHAPES[pick]
        name = f"node-{i:04d}"
        nodes.append(
            node_from_manifest(
                {
                    "metadata": {
                        "name": name,
                        "labels": {
                            "kubernetes.io/hostname": name,
                            "topology.kubernetes.io/zone": f"zone-{i % 3}",
                        },
                    },
                    "status": {"allocatable": {"cpu": str(cpu), "memory": f"{memory}Gi", "pods": "110"}},
                }
            )
        )
    return nodes


def synthetic_pod(index: int, cpu_milli: int, memory_mib: int) -> Pod:
    requests = {"cpu": f"{cpu_milli}m", "memory": f"{memory_mib}Mi"}
    return pod_from_manifest(
        {
            "metadata": {
                "name": f"synthetic-{index:06d}",
                "namespace": "synthetic",
                "uid": f"synthetic-{index}",
            },
            "spec": {"containers": [{"name": "app", "resources": {"requests": requests}}]},
        }
    )


@dataclass(frozen=True)
class SyntheticWorkload:
    """Pod ``i`` arrives at ``arrivals[i]`` with ``POD_SHAPES[shapes[i]]`` and, if
    placed, leaves ``lifetimes[i]`` seconds later."""

    arrivals: npt.NDArray[np.float64]
    shapes: npt.NDArray[np.int64]
    lifetimes: npt.NDArray[np.float64]


def synthetic_workload(
    spec: SyntheticSpec, cpu_capacity: int, memory_capacity: int, rng: np.random.Generator
) -> SyntheticWorkload:
    """The arrivals, sized by Little's law on the cluster's scarcer resource."""
    shape_weights = np.array([w for *_, w in POD_SHAPES], float)
    shape_weights /= shape_weights.sum()
    mean_cpu = sum(c * w for (c, _, _), w in zip(POD_SHAPES, shape_weights, strict=True))
    mean_memory = sum(m * 2**20 * w for (_, m, _), w in zip(POD_SHAPES, shape_weights, strict=True))
    # Little's law: pods in the system = rate x lifetime.
    pods_at_capacity = min(cpu_capacity / mean_cpu, memory_capacity / mean_memory)
    rate = spec.target_load * pods_at_capacity / spec.mean_lifetime_s
    return SyntheticWorkload(
        arrivals=np.cumsum(rng.exponential(1.0 / rate, size=spec.pods)),
        shapes=rng.choice(len(POD_SHAPES), size=spec.pods, p=shape_weights),
        lifetimes=rng.exponential(spec.mean_lifetime_s, size=spec.pods),
    )


def demand_bound(workload: SyntheticWorkload, cpu_capacity: int, memory_capacity: int) -> int:
    """Pods placed before the first arrival that no packing could place (see above)."""
    cpu_milli = np.array([c for c, _, _ in POD_SHAPES], np.int64)[workload.shapes]
    memory = np.array([m * 2**20 for _, m, _ in POD_SHAPES], np.int64)[workload.shapes]
    running: list[tuple[float, int]] = []
    cpu = memory_used = 0
    for index, arrival in enumerate(workload.arrivals):
        while running and running[0][0] <= arrival:
            gone = heapq.heappop(running)[1]
            cpu -= int(cpu_milli[gone])
            memory_used -= int(memory[gone])
        cpu += int(cpu_milli[index])
        memory_used += int(memory[index])
        if cpu > cpu_capacity or memory_used > memory_capacity:
            return index
        heapq.heappush(running, (float(arrival + workload.lifetimes[index]), index))
    return len(workload.arrivals)


def run_synthetic(spec: SyntheticSpec, progress: Callable[[int, int], None] | None = None) -> SyntheticResult:
    workload_rng, decision_rng = (np.random.default_rng([spec.seed, stream]) for stream in (0, 1))
    state = ClusterState(synthetic_nodes(spec.nodes, workload_rng))
    cpu_column, memory_column = state.resource_index[CPU], state.resource_index[MEMORY]
    cpu_capacity = int(state.allocatable[:, cpu_column].sum())
    memory_capacity = int(state.allocatable[:, memory_column].sum())
    workload = synthetic_workload(spec, cpu_capacity, memory_capacity, workload_rng)
    checkpoint = Path(spec.checkpoint) if spec.checkpoint else None
    profile = build_profile(spec.policy, ProfileContext(rng=decision_rng, checkpoint=checkpoint))

    departures: list[tuple[float, str]] = []
    placed = failed = 0
    first_failure = -1
    cpu_at_failures: list[float] = []
    memory_at_failures: list[float] = []
    started = time.perf_counter()
    for index in range(spec.pods):
        now = float(workload.arrivals[index])
        while departures and departures[0][0] <= now:
            state.remove(heapq.heappop(departures)[1])
        cpu_milli, memory_mib, _ = POD_SHAPES[workload.shapes[index]]
        pod = synthetic_pod(index, cpu_milli, memory_mib)
        decision = schedule_pod(state, pod, profile, decision_rng)
        if decision.scheduled:
            state.place(pod, decision.node)
            heapq.heappush(departures, (now + float(workload.lifetimes[index]), pod.key))
            placed += 1
        else:
            failed += 1
            if first_failure < 0:
                first_failure = placed
            cpu_at_failures.append(100.0 * state.requested[:, cpu_column].sum() / cpu_capacity)
            memory_at_failures.append(100.0 * state.requested[:, memory_column].sum() / memory_capacity)
        if progress is not None:
            progress(index + 1, spec.pods)
    return SyntheticResult(
        spec=spec,
        placed=placed,
        failed=failed,
        placed_before_first_failure=placed if first_failure < 0 else first_failure,
        demand_bound=demand_bound(workload, cpu_capacity, memory_capacity),
        cpu_allocated_at_failures=float(np.mean(cpu_at_failures)) if cpu_at_failures else float("nan"),
        memory_allocated_at_failures=float(np.mean(memory_at_failures))
        if memory_at_failures
        else float("nan"),
        seconds=time.perf_counter() - started,
    )
