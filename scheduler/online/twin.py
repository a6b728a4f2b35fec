"""A digital twin of the live cluster: its nodes, filled with pods drawn from the
recently observed mix, the way the FGD simulator fills a cluster from a trace.

An episode shuffles the nodes (ties go to the first node, as in the replay), draws
pods from the mix with replacement until their demand reaches ``tune`` times the
cluster's capacity in its primary resource (GPU if the cluster has GPUs, else CPU),
schedules each once and drops what fits nowhere. Its fitness is the mean share of
that resource allocated over the pod events once 95% of the capacity has arrived:
how full the policy packs the cluster when it matters, the same measure the
learned policy was trained on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from scheduler.framework.profile import Profile, schedule_pod
from scheduler.objects.node import Node
from scheduler.objects.pod import CPU, Pod
from scheduler.objects.pod_manifest import pod_from_manifest
from scheduler.resources.gpu import GPU_RESOURCE, MILLI_PER_GPU, USE_GPU_TYPE, share_resources
from scheduler.state.cluster_state import ClusterState
from scheduler.state.fragmentation import TypicalPods, pod_shape, typical_pods


@dataclass(frozen=True)
class Shape:
    """What the twin needs of a pod: its requests."""

    cpu_milli: int
    memory: int
    gpu_count: int = 0
    gpu_milli: int = 0
    gpu_models: tuple[str, ...] = ()

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Shape:
        return cls(
            int(record.get("cpu_milli", 0)),
            int(record.get("memory", 0)),
            int(record.get("gpu_count", 0)),
            int(record.get("gpu_milli", 0)),
            tuple(record.get("gpu_models") or ()),
        )

    def pod(self, name: str) -> Pod:
        requests = {"cpu": f"{self.cpu_milli}m", "memory": str(self.memory)}
        annotations: dict[str, str] = {}
        if self.gpu_count and self.gpu_milli:
            # A share as HAMi asks it: cores and memory alike (scheduler.resources.gpu).
            requests[GPU_RESOURCE] = str(self.gpu_count)
            if self.gpu_milli < MILLI_PER_GPU:
                requests.update(share_resources(self.gpu_milli))
            if self.gpu_models:
                annotations[USE_GPU_TYPE] = ",".join(self.gpu_models)
        manifest = {
            "metadata": {"name": name, "namespace": "twin", "uid": name, "annotations": annotations},
            "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]},
        }
        return pod_from_manifest(manifest)


def shapes_from_records(records: Iterable[Mapping[str, Any]]) -> list[Shape]:
    """The arrivals' shapes (every pod that arrived, placed or not: the mix to plan for)."""
    return [Shape.from_record(r) for r in records if r.get("kind") == "arrival"]


@dataclass
class TwinEpisode:
    nodes: list[Node]
    arrivals: list[Pod]
    typical: TypicalPods
    primary: str  # "gpu" or "cpu"
    capacity: int  # of the primary resource (GPU milli or CPU milli)


def _demand(pod: Pod, primary: str) -> int:
    return pod.gpu.total_milli if primary == "gpu" else pod.cpu_milli


def make_episode(nodes: Sequence[Node], shapes: Sequence[Shape], seed: int, tune: float = 1.3) -> TwinEpisode:
    if not nodes or not shapes:
        raise ValueError("a twin episode needs nodes and observed pods")
    rng = np.random.default_rng(seed)
    order = [nodes[i] for i in rng.permutation(len(nodes))]
    gpu_capacity = sum(n.gpu_count for n in nodes) * MILLI_PER_GPU
    primary = "gpu" if gpu_capacity and any(s.gpu_count for s in shapes) else "cpu"
    capacity = gpu_capacity if primary == "gpu" else sum(n.allocatable.get(CPU, 0) for n in nodes)
    pods = [s.pod(f"twin-{i}") for i, s in enumerate(shapes)]
    arrivals: list[Pod] = []
    total = 0
    # Bounded: a mix whose pods hardly ask for the primary resource stops at 50x the pods.
    while total < tune * capacity and len(arrivals) < 50 * len(pods) + 1000:
        pod = pods[int(rng.integers(len(pods)))]
        arrivals.append(replace(pod, name=f"twin-{len(arrivals)}", uid=f"twin-{len(arrivals)}"))
        total += _demand(pod, primary)
    return TwinEpisode(order, arrivals, typical_pods(pod_shape(p) for p in pods), primary, max(capacity, 1))


def play(episode: TwinEpisode, profile: Profile, seed: int = 0) -> float:
    """Mean allocated share (%) of the primary resource over the events with >= 95%
    of the capacity arrived."""
    state = ClusterState(episode.nodes)
    rng = np.random.default_rng(seed)
    arrived = allocated = 0
    saturated: list[float] = []
    for pod in episode.arrivals:
        decision = schedule_pod(state, pod, profile, rng)
        demand = _demand(pod, episode.primary)
        arrived += demand
        if decision.scheduled:
            state.place(pod, decision.node, decision.gpu_indices)
            allocated += demand
        if arrived >= 0.95 * episode.capacity:
            saturated.append(100.0 * allocated / episode.capacity)
    return float(np.mean(saturated)) if saturated else 100.0 * allocated / episode.capacity


def mean_fitness(episodes: Sequence[TwinEpisode], profile_for: Callable[[TwinEpisode], Profile]) -> float:
    return float(np.mean([play(e, profile_for(e), seed=i) for i, e in enumerate(episodes)]))
