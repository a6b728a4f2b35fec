"""Replay an openb trace the way the FGD paper's simulator does.

1. The pods, sorted by name, are shuffled with Go's ``math/rand`` seeded with the
   seed (after one discarded draw, as the simulator's debug log makes one).
2. The workload is inflated to ``tune`` (130%) of the cluster's GPU capacity by
   appending clones of pods drawn with replacement from the name-sorted list.
3. Nodes get a seeded priority order (``rand.Perm``); among equally scored nodes the
   earliest in that order wins.
4. Each pod is scheduled once, in order; a pod that fits nowhere is dropped; pods
   never leave.

After every pod the log records the GPU share that has arrived (including dropped
pods), the share allocated, and the fragmentation of the cluster against the trace's
typical pods.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import numpy.typing as npt

from scheduler.framework.profile import Profile, schedule_pod
from scheduler.objects.node import Node
from scheduler.objects.pod import Pod
from scheduler.plugins.profiles import build_profile
from scheduler.plugins.registry import ProfileContext
from scheduler.plugins.scores.fgd import NodeFragCache
from scheduler.resources.gpu import MILLI_PER_GPU
from scheduler.sim.catalog import DEFAULT_NODE_LIST, node_list_path, pod_list_path
from scheduler.sim.gorand import GoRand
from scheduler.sim.trace import TraceIssues, check_pods_against_nodes, load_nodes, load_pods
from scheduler.state.cluster_state import ClusterState
from scheduler.state.fragmentation import FragmentationModel, TypicalPods, pod_shape, typical_pods

# Go draws between the pod shuffle and the node permutation: one ``rand.Float64()``
# per informer the simulator's scheduler starts (client-go's watch jitter). Calibrated
# against the published per-seed curves (tests/sim/test_fgd_reference.py).
NODE_ORDER_DRAWS = 10


@dataclass(frozen=True)
class ReplaySpec:
    trace: str
    policy: str
    seed: int
    nodes: str = DEFAULT_NODE_LIST
    tune: float = 1.3
    node_order_draws: int = NODE_ORDER_DRAWS
    checkpoint: str | None = None  # the learned policy's checkpoint (profile gnn)


@dataclass
class ReplayLog:
    """One row per pod event, in arrival order."""

    spec: ReplaySpec
    total_gpu_milli: int
    arrived_milli: npt.NDArray[np.int64]
    allocated_milli: npt.NDArray[np.int64]
    frag_milli: npt.NDArray[np.float64]
    idle_milli: npt.NDArray[np.int64]
    scheduled: npt.NDArray[np.bool_]
    seconds: float
    issues: list[str]

    @property
    def pods_failed(self) -> int:
        return int((~self.scheduled).sum())


def trace_typical_pods(pods: Sequence[Pod]) -> TypicalPods:
    return typical_pods(pod_shape(p) for p in pods)


def arrival_order(pods: Sequence[Pod], rng: GoRand, tune: float, capacity_milli: int) -> list[Pod]:
    """Shuffle, then inflate (or thin) the workload to ``tune`` x GPU capacity."""
    by_name = sorted(pods, key=lambda p: p.name)
    rng.int63()  # evaluated for a debug log line in the simulator
    order = list(by_name)
    rng.shuffle(order)  # type: ignore[arg-type]
    total = sum(p.gpu.total_milli for p in by_name)
    target = tune * float(capacity_milli)
    if total < target and not any(p.gpu.milli_per_gpu for p in by_name):
        # Clones of CPU-only pods never add GPU demand: there is nothing to inflate.
        return order
    if total < target:
        clone_index = 0
        while True:
            source = by_name[rng.intn(len(by_name))]
            # The simulator compares the clone's per-GPU share, then adds all its GPUs.
            if float(total + source.gpu.milli_per_gpu) > target:
                break
            total += source.gpu.total_milli
            name = f"{source.name}-tuned-{clone_index}"
            order.append(replace(source, name=name, uid=f"{source.uid}-tuned-{clone_index}"))
            clone_index += 1
    else:
        while total > target:
            removed = order.pop(rng.intn(len(order)))
            total -= removed.gpu.total_milli
    return order


def node_priority_order(nodes: Sequence[Node], rng: GoRand, extra_draws: int) -> list[Node]:
    """Nodes by the simulator's seeded priority (its ``%04d-`` name prefixes)."""
    for _ in range(extra_draws):
        rng.float64()
    by_name = sorted(nodes, key=lambda n: n.name)
    rank = rng.perm(len(by_name))
    return [node for _, node in sorted(zip(rank, by_name, strict=True), key=lambda pair: pair[0])]


def gpu_capacity_milli(nodes: Sequence[Node]) -> int:
    return sum(n.gpu_count for n in nodes) * MILLI_PER_GPU


def seeded_profile(
    policy: str, seed: int, typical: TypicalPods, checkpoint: str | None
) -> tuple[Profile, np.random.Generator]:
    """The profile a replay of ``seed`` runs (built with the trace's typical pods, the
    learned policy's checkpoint and an rng of its own seeded with ``seed``), and the rng,
    seeded alike, that breaks its ties."""
    profile = build_profile(
        policy,
        ProfileContext(
            rng=np.random.default_rng(seed),
            typical_pods=typical,
            checkpoint=Path(checkpoint) if checkpoint else None,
        ),
    )
    return profile, np.random.default_rng(seed)


def replay(spec: ReplaySpec, progress: Callable[[int, int], None] | None = None) -> ReplayLog:
    issues = TraceIssues()
    nodes = load_nodes(node_list_path(spec.nodes), issues)
    pods = load_pods(pod_list_path(spec.trace), issues)
    check_pods_against_nodes(pods, nodes, issues)
    capacity = gpu_capacity_milli(nodes)
    typical = trace_typical_pods(pods)

    go = GoRand(spec.seed)
    arrivals = arrival_order(pods, go, spec.tune, capacity)
    state = ClusterState(node_priority_order(nodes, go, spec.node_order_draws))
    profile, rng = seeded_profile(spec.policy, spec.seed, typical, spec.checkpoint)
    frag = NodeFragCache(FragmentationModel(typical))
    all_nodes = np.arange(len(state), dtype=np.int64)

    count = len(arrivals)
    log = ReplayLog(
        spec=spec,
        total_gpu_milli=capacity,
        arrived_milli=np.zeros(count, np.int64),
        allocated_milli=np.zeros(count, np.int64),
        frag_milli=np.zeros(count, np.float64),
        idle_milli=np.zeros(count, np.int64),
        scheduled=np.zeros(count, np.bool_),
        seconds=0.0,
        issues=issues.messages,
    )
    started = time.perf_counter()
    arrived = allocated = 0
    for i, pod in enumerate(arrivals):
        decision = schedule_pod(state, pod, profile, rng)
        arrived += pod.gpu.total_milli
        if decision.scheduled:
            state.place(pod, decision.node, decision.gpu_indices)
            allocated += pod.gpu.total_milli if decision.gpu_indices else 0
            log.scheduled[i] = True
        log.arrived_milli[i] = arrived
        log.allocated_milli[i] = allocated
        log.frag_milli[i] = frag.frag(state, all_nodes).sum()
        log.idle_milli[i] = capacity - allocated
        if progress is not None:
            progress(i + 1, count)
    log.seconds = time.perf_counter() - started
    return log
