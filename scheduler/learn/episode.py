"""Training episodes: an openb trace replayed as the simulator does, optionally on a
seeded, stratified sample of the nodes (a smaller cluster replays faster and gives
the trainer more varied clusters; the workload is inflated or thinned to ``tune``
times the sample's GPU capacity, as the simulator does for the whole cluster).

An episode is a list of arrivals and an initial ``ClusterState``; ``run_episode``
schedules every pod with a profile and reports the allocation curve.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache, cached_property

import numpy as np
import numpy.typing as npt

from scheduler.framework.profile import Profile, schedule_pod
from scheduler.objects.node import Node
from scheduler.objects.pod import Pod
from scheduler.resources.gpu import MILLI_PER_GPU
from scheduler.sim.catalog import DEFAULT_NODE_LIST, node_list_path, pod_list_path
from scheduler.sim.gorand import GoRand
from scheduler.sim.node_sample import sample_nodes
from scheduler.sim.replay import NODE_ORDER_DRAWS, arrival_order, node_priority_order, trace_typical_pods
from scheduler.sim.trace import load_nodes, load_pods
from scheduler.state.cluster_state import ClusterState
from scheduler.state.fragmentation import TypicalPods


@dataclass(frozen=True)
class EpisodeSpec:
    trace: str
    seed: int
    node_fraction: float = 1.0  # share of the nodes kept (stratified by node shape)
    tune: float = 1.3
    nodes: str = DEFAULT_NODE_LIST


@dataclass
class Episode:
    spec: EpisodeSpec
    nodes: list[Node]  # in the simulator's seeded priority order
    arrivals: list[Pod]
    typical: TypicalPods
    capacity_milli: int

    def fresh_state(self) -> ClusterState:
        return ClusterState(self.nodes)

    @cached_property
    def arrived_milli(self) -> npt.NDArray[np.int64]:
        """GPU arrived (milli) after each arrival, failed pods included."""
        arrived: npt.NDArray[np.int64] = np.cumsum([p.gpu.total_milli for p in self.arrivals], dtype=np.int64)
        return arrived


@dataclass
class EpisodeResult:
    spec: EpisodeSpec
    arrived_milli: npt.NDArray[np.int64]
    allocated_milli: npt.NDArray[np.int64]
    scheduled: npt.NDArray[np.bool_]
    capacity_milli: int
    extra: dict[str, float] = field(default_factory=dict)

    def allocation_at(self, percent: float) -> float:
        """Allocated GPU (% of capacity) when the arrived GPU first reaches ``percent``."""
        arrived = 100.0 * self.arrived_milli / self.capacity_milli
        index = min(int(np.searchsorted(arrived, percent)), arrived.size - 1)
        return float(100.0 * self.allocated_milli[index] / self.capacity_milli)

    def saturation_allocation(self, low: float = 95.0, high: float = 130.0) -> float:
        return saturation_allocation(self.arrived_milli, self.allocated_milli, self.capacity_milli, low, high)


def saturation_allocation(
    arrived_milli: npt.NDArray[np.int64],
    allocated_milli: npt.NDArray[np.int64],
    capacity_milli: int,
    low: float = 95.0,
    high: float = 130.0,
) -> float:
    """Mean allocated GPU (% of capacity) over the pod events with ``low`` to ``high`` %
    of the capacity arrived: the fitness the trainers maximise."""
    arrived = 100.0 * arrived_milli / capacity_milli
    rows = (arrived >= low) & (arrived <= high)
    if not rows.any():
        rows = arrived >= arrived.max()
    return float(100.0 * allocated_milli[rows].mean() / capacity_milli)


@cache
def _trace(trace: str) -> tuple[Pod, ...]:
    return tuple(load_pods(pod_list_path(trace)))


@cache
def _node_list(nodes: str) -> tuple[Node, ...]:
    return tuple(load_nodes(node_list_path(nodes)))


def make_episode(spec: EpisodeSpec) -> Episode:
    """The replay's arrivals and node order for ``spec`` (identical to ``replay`` at
    ``node_fraction`` 1)."""
    pods = list(_trace(spec.trace))
    nodes = sample_nodes(_node_list(spec.nodes), spec.node_fraction, spec.seed)
    capacity = sum(n.gpu_count for n in nodes) * MILLI_PER_GPU
    go = GoRand(spec.seed)
    arrivals = arrival_order(pods, go, spec.tune, capacity)
    ordered = node_priority_order(nodes, go, NODE_ORDER_DRAWS)
    return Episode(spec, ordered, arrivals, trace_typical_pods(pods), capacity)


def run_episode(episode: Episode, profile: Profile, seed: int = 0) -> EpisodeResult:
    """Schedule every arrival once with ``profile``; failed pods are dropped."""
    state = episode.fresh_state()
    rng = np.random.default_rng(seed)
    count = len(episode.arrivals)
    arrived = np.zeros(count, np.int64)
    allocated = np.zeros(count, np.int64)
    scheduled = np.zeros(count, np.bool_)
    total_arrived = total_allocated = 0
    for i, pod in enumerate(episode.arrivals):
        decision = schedule_pod(state, pod, profile, rng)
        total_arrived += pod.gpu.total_milli
        if decision.scheduled:
            state.place(pod, decision.node, decision.gpu_indices)
            total_allocated += pod.gpu.total_milli if decision.gpu_indices else 0
            scheduled[i] = True
        arrived[i] = total_arrived
        allocated[i] = total_allocated
    return EpisodeResult(episode.spec, arrived, allocated, scheduled, episode.capacity_milli)
