"""The openb default trace replayed through HAMi-style pods and nodes gives exactly the
placements of the replay before them, seed for seed.

``data/placements-default-<policy>-seed42.csv.gz`` holds, for every arrival of the
default trace (seed 42, tune 1.3), the node and GPUs it got, recorded at commit
19cdebe, when a share was ``nvidia.com/gpu: 1`` plus ``rl-scheduler.io/gpu-milli``
and nodes advertised whole GPUs. Today every trace pod is a HAMi pod
(``nvidia.com/gpucores`` and ``nvidia.com/gpumem-percentage``) on HAMi nodes (register
annotation, vGPU slots, memory in MiB): FGD, the learned policy and best fit must not
notice.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from scheduler.framework.profile import schedule_pod
from scheduler.plugins.profiles import build_profile
from scheduler.plugins.registry import ProfileContext
from scheduler.resources.gpu import MILLI_PER_GPU
from scheduler.sim.catalog import DEFAULT_NODE_LIST, node_list_path, pod_list_path
from scheduler.sim.gorand import GoRand
from scheduler.sim.replay import NODE_ORDER_DRAWS, arrival_order, node_priority_order, trace_typical_pods
from scheduler.sim.trace import load_nodes, load_pods
from scheduler.state.cluster_state import ClusterState

DATA = Path(__file__).parent / "data"
SEED = 42


def recorded(policy: str) -> list[str]:
    with gzip.open(DATA / f"placements-default-{policy}-seed{SEED}.csv.gz", "rt") as handle:
        return handle.read().splitlines()[1:]


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["fgd", "gnn", "best-fit"])
def test_hami_pods_are_placed_exactly_as_before(policy: str) -> None:
    nodes = load_nodes(node_list_path(DEFAULT_NODE_LIST))
    pods = load_pods(pod_list_path("default"))
    assert all(n.gpu_sharing and n.gpu_model.startswith("NVIDIA-") for n in nodes if n.gpu_count)
    assert any(p.gpu.is_share and p.gpu.memory_percent * 10 == p.gpu.milli_per_gpu for p in pods)
    go = GoRand(SEED)
    arrivals = arrival_order(pods, go, 1.3, sum(n.gpu_count for n in nodes) * MILLI_PER_GPU)
    state = ClusterState(node_priority_order(nodes, go, NODE_ORDER_DRAWS))
    context = ProfileContext(rng=np.random.default_rng(SEED), typical_pods=trace_typical_pods(pods))
    profile = build_profile(policy, context)
    rng = np.random.default_rng(SEED)
    placements = []
    for pod in arrivals:
        decision = schedule_pod(state, pod, profile, rng)
        if decision.scheduled:
            state.place(pod, decision.node, decision.gpu_indices)
        placements.append(f"{pod.name},{decision.node},{'|'.join(map(str, decision.gpu_indices))}")
    expected = recorded(policy)
    differ = [
        (i, got, want) for i, (got, want) in enumerate(zip(placements, expected, strict=True)) if got != want
    ]
    assert not differ, f"{len(differ)} of {len(expected)} arrivals placed differently, first: {differ[:3]}"
    # No GPU over its cores, memory or slots.
    assert (state.gpu_free_milli >= 0).all()
    assert (state.gpu_free_memory >= 0).all()
    assert (state.gpu_free_slots >= 0).all()
