"""A few feature rows are computed one by one in Python floats, many as arrays: the two
give the same float32 values, bit for bit, on clusters of any fill (what was placed,
GPU shares and whole GPUs, nodes with and without GPUs of several models)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.policy.feature_rows import FEW_ROWS, node_rows, pair_rows
from scheduler.policy.frag_delta import FragDelta
from scheduler.policy.workload import ClusterSupply, WorkloadDemand
from scheduler.state.cluster_state import ClusterState
from scheduler.state.fragmentation import PodShape, TypicalPods
from scheduler.state.gpu_fit import gpus_fitting
from tests.builders import make_node, make_pod

TYPICAL = TypicalPods(
    (PodShape(4000, 500, 1), PodShape(8000, 1000, 2), PodShape(2000, 0, 0), PodShape(1000, 250, 1, "T4")),
    (0.4, 0.3, 0.2, 0.1),
)
NODES = [
    {"cpu": "16", "memory": "64Gi", "gpus": 2, "model": "T4"},
    {"cpu": "96", "memory": "512Gi", "gpus": 8, "model": "V100M32"},
    {"cpu": "8", "memory": "16Gi"},
    {"cpu": "64", "memory": "256Gi", "gpus": 4, "model": "A10", "hami": False},
]
PODS = [
    {"cpu": "2", "memory": "4Gi", "gpus": 1, "gpu_milli": 300},
    {"cpu": "8", "memory": "8Gi", "gpus": 1, "gpu_milli": 700},
    {"cpu": "4", "memory": "16Gi", "gpus": 2},
    {"cpu": "6", "memory": "2Gi"},
    {"cpu": "30", "memory": "1Gi", "gpus": 1},
]


def filled(kinds: list[int], placements: list[tuple[int, int]]) -> ClusterState:
    """Nodes of ``kinds``; then each (pod kind, node) placed where it fits (GPUs as a
    first-fit would pick them)."""
    state = ClusterState([make_node(f"n{i}", **NODES[kind]) for i, kind in enumerate(kinds)])
    for step, (pod_kind, node) in enumerate(placements):
        pod = make_pod(f"p{step}", **PODS[pod_kind])
        index = node % len(kinds)
        fits = gpus_fitting(state, np.array([index]), pod.gpu)[0]
        if pod.gpu.count and fits.sum() < pod.gpu.count:
            continue
        if state.allocatable[index, 0] - state.requested[index, 0] < pod.cpu_milli:
            continue
        gpus = tuple(int(g) for g in np.flatnonzero(fits)[: pod.gpu.count]) if pod.gpu.count else ()
        state.place(pod, f"n{index}", gpus)
    return state


clusters = st.tuples(
    st.lists(st.integers(0, len(NODES) - 1), min_size=1, max_size=12),
    st.lists(st.tuples(st.integers(0, len(PODS) - 1), st.integers(0, 50)), max_size=40),
)


@settings(max_examples=80, deadline=None)
@given(clusters)
def test_node_rows_one_by_one_equal_the_arrays(cluster: tuple[list[int], list[tuple[int, int]]]) -> None:
    state = filled(*cluster)
    supply = ClusterSupply.of(state, TYPICAL, WorkloadDemand.of(TYPICAL))
    frag = FragDelta(TYPICAL)
    everything = np.arange(len(state))
    many = node_rows(state, np.concatenate([everything] * (FEW_ROWS + 1)), frag, supply)[: len(state)]
    for i in range(len(state)):
        few = node_rows(state, np.array([i]), frag, supply)
        assert few.dtype == np.float32
        assert few.tobytes() == many[i : i + 1].tobytes(), i


@settings(max_examples=80, deadline=None)
@given(clusters, st.integers(0, len(PODS) - 1))
def test_pair_rows_one_by_one_equal_the_arrays(
    cluster: tuple[list[int], list[tuple[int, int]]], pod_kind: int
) -> None:
    state = filled(*cluster)
    pod = make_pod("incoming", **PODS[pod_kind])
    frag = FragDelta(TYPICAL)
    everything = np.arange(len(state))
    many, many_gpus = pair_rows(state, pod, np.concatenate([everything] * (FEW_ROWS + 1)), frag)
    for i in range(len(state)):
        few, few_gpus = pair_rows(state, pod, np.array([i]), frag)
        assert few.tobytes() == many[i : i + 1].tobytes(), i
        assert few_gpus.tolist() == many_gpus[i : i + 1].tolist()
