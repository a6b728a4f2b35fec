"""An openb trace replayed as DRA pods (scheduler/sim/dra_trace.py): nodes' GPUs as
ResourceSlices, ``nvidia.com/gpu: n`` as a claim for n devices of ``gpu.nvidia.com``.
The GPU profiles see DRA GPUs as they see device-plugin ones, so every pod lands on
the node the plain replay puts it on."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from scheduler.framework.profile import schedule_pod
from scheduler.objects.node import Node
from scheduler.objects.pod import Pod
from scheduler.sim.catalog import DEFAULT_NODE_LIST, node_list_path, pod_list_path
from scheduler.sim.dra_trace import (
    DraTraceError,
    add_claim,
    dra_cluster,
    place_dra_pod,
    pod_as_dra,
)
from scheduler.sim.gorand import GoRand
from scheduler.sim.replay import (
    arrival_order,
    gpu_capacity_milli,
    node_priority_order,
    seeded_profile,
    trace_typical_pods,
)
from scheduler.sim.trace import load_nodes, load_pods
from scheduler.state.cluster_state import ClusterState
from scheduler.state.fragmentation import TypicalPods

NODES = 40  # of the default node list, in the seed's priority order


def _workload(seed: int) -> tuple[list[Node], list[Pod]]:
    """A small cluster and the trace's whole-GPU and CPU-only pods, arrived as the
    replay orders them (inflated to 130% of the small cluster's GPUs)."""
    go = GoRand(seed)
    nodes = load_nodes(node_list_path(DEFAULT_NODE_LIST))
    pods = [p for p in load_pods(pod_list_path("default")) if not p.gpu.count or p.gpu.is_whole]
    order = node_priority_order(nodes, GoRand(seed + 1), 0)[:NODES]
    return order, arrival_order(pods, go, 1.3, gpu_capacity_milli(order))


def _replay(
    state: ClusterState,
    pods: list[Pod],
    policy: str,
    seed: int,
    place: Callable[[ClusterState, Pod, str, tuple[int, ...]], None],
    typical: TypicalPods,
) -> list[str]:
    profile, rng = seeded_profile(policy, seed, typical, None)
    nodes = []
    for pod in pods:
        decision = schedule_pod(state, pod, profile, rng)
        nodes.append(decision.node)
        if decision.scheduled:
            place(state, pod, decision.node, decision.gpu_indices)
    return nodes


@pytest.mark.parametrize(("policy", "seed"), [("fgd", 1), ("fgd", 2), ("fgd-reserve", 1)])
def test_dra_replay_places_pods_as_the_plain_replay(policy: str, seed: int) -> None:
    nodes, arrivals = _workload(seed)
    arrivals = arrivals[:400]
    typical = trace_typical_pods(arrivals)

    plain = _replay(ClusterState(nodes), arrivals, policy, seed, lambda s, p, n, g: s.place(p, n, g), typical)

    state = dra_cluster(nodes)
    converted = []
    for pod in arrivals:
        dra_pod, claim = pod_as_dra(pod)
        add_claim(state, claim)
        converted.append(dra_pod)

    def place(s: ClusterState, p: Pod, n: str, gpus: tuple[int, ...]) -> None:
        assert gpus == ()  # a DRA pod's GPUs are its claim's
        place_dra_pod(s, p, n)

    dra = _replay(state, converted, policy, seed, place, typical)
    assert dra == plain
    assert plain.count("") > 0  # the cluster fills up
    assert len(set(plain)) > NODES // 2
    # The catalog holds the GPUs the plain replay's pods hold.
    taken = int((state.gpu_count * 1000).sum() - state.gpu_free_milli.sum())
    placed = sum(p.gpu.total_milli for p, n in zip(arrivals, plain, strict=True) if n)
    assert taken == placed


def test_a_gpu_share_has_no_dra_form() -> None:
    share = next(p for p in load_pods(pod_list_path("default")) if p.gpu.is_share)
    with pytest.raises(DraTraceError, match="GPU share"):
        pod_as_dra(share)
