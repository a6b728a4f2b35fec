"""The graph builder on a hand-sized cluster: golden features, the mask, the edges."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from devcluster import nodes as devnodes
from scheduler.objects.node_manifest import node_from_manifest
from scheduler.objects.topology import RACK_LABEL, ZONE_LABEL
from scheduler.plugins.profiles import default_filters
from scheduler.policy.edges import (
    TOPOLOGY_LABELS,
    node_shape,
    node_signature,
    node_signatures,
    structure_edges,
)
from scheduler.policy.features import NODE_FEATURES, PAIR_FEATURES, POD_FEATURES
from scheduler.policy.graph import GraphBuilder, action_mask, feasible_nodes
from scheduler.state.cluster_state import ClusterState
from scheduler.state.fragmentation import PodShape, TypicalPods
from tests.builders import make_node, make_pod, make_state

TYPICAL = TypicalPods((PodShape(4000, 500, 1),), (1.0,))


def small_state():  # type: ignore[no-untyped-def]
    """n1: 16 cores, 64Gi, 2 T4 (a 500 share and 4 cores taken); n2: 32 cores, 128Gi,
    4 T4, empty; n3: 8 cores, 16Gi, no GPU."""
    nodes = [
        make_node("n1", cpu="16", memory="64Gi", gpus=2, model="T4"),
        make_node("n2", cpu="32", memory="128Gi", gpus=4, model="T4"),
        make_node("n3", cpu="8", memory="16Gi"),
    ]
    placed = make_pod("placed", cpu="4", memory="8Gi", gpus=1, gpu_milli=500)
    return make_state(nodes, [(placed, "n1")])


def named(names: tuple[str, ...], row: np.ndarray) -> dict[str, float]:  # type: ignore[type-arg]
    return {name: float(value) for name, value in zip(names, row, strict=True)}


def test_node_features_of_a_partly_used_node() -> None:
    state = small_state()
    features = named(NODE_FEATURES, GraphBuilder(TYPICAL).node_features(state)[0])
    expected = {
        "cpu_capacity": 16 / 128,
        "memory_capacity": 64 / 1024,
        "gpu_capacity": 2 / 8,
        "cpu_free": 12 / 16,  # 4 of 16 cores taken
        "memory_free": 56 / 64,
        "gpu_free": 1500 / 2000,  # a 500 share on GPU 0
        "cpu_left": 12 / 128,
        "gpus_fully_free": 1 / 8,
        "gpu_partial_free": 500 / 8000,
        "gpu_largest_partial": 0.5,
        "cpu_per_idle_gpu": (12 / 1.5) / 16,  # 8 cores per idle GPU
        "frag": 0.0,  # the typical 500 share fits on both GPUs: nothing stranded
        "frag_rate": 0.0,
        "model_access": 1.0,  # the typical pod takes any model
        "model_share": 1.0,  # all 6 GPUs are T4s
        "in_use": 1.0,
        "order": 0.0,
    }
    assert features == pytest.approx(expected, abs=1e-6)


def test_pair_and_pod_features_of_a_share() -> None:
    state = small_state()
    builder = GraphBuilder(TYPICAL)
    pod = make_pod("new", cpu="2", memory="4Gi", gpus=1, gpu_milli=300)
    pair_x, gpu = builder.pair_features(state, pod, np.array([0], np.int64))
    # On GPU 0 (500 free) the share leaves 200 < 500 stranded: dF = +200. On GPU 1
    # (fully free) 700 is left, the typical share still fits on both: dF = 0. GPU 1 wins.
    assert gpu.tolist() == [1]
    expected = {
        "fgd_score": 0.50,  # trunc(100 * sigmoid(0))
        "frag_delta": 0.0,
        "cpu_left_after": 10 / 128,
        "cpu_free_after": 10 / 16,
        "memory_free_after": 52 / 64,
        "gpu_free_after": 1200 / 2000,
        "gpus_fully_free_after": 0.0,  # the share opens the last full GPU
        "idle_gpus_after": 1.2 / 8,
        "cpu_per_idle_gpu_after": (10 / 1.2) / 16,
        "cpu_shortfall_3": 0.0,  # 3 * 1.2 = 3.6 cores kept <= 10 left
        "cpu_shortfall_5": 0.0,
        "cpu_shortfall_7": 0.0,
        "cpu_shortfall_9": (9 * 1.2 - 10) / 16,  # 0.8 cores short
        "cpu_shortfall_11": (11 * 1.2 - 10) / 16,  # 3.2 cores short
        "share_gpu_left_after": 0.7,
        "share_opens_gpu": 1.0,
        "best_fit": 1 - (10 / 128 + 1200 / 8000) / 2,
    }
    assert named(PAIR_FEATURES, pair_x[0]) == pytest.approx(expected, abs=1e-6)
    cluster_cores_per_gpu = (16 + 32 + 8) / 6
    assert named(POD_FEATURES, builder.pod_features(pod, state)) == pytest.approx(
        {
            "cpu": 2 / 32,
            "memory": 4 / 256,
            "gpu_milli": 0.3,
            "gpu_count": 1 / 8,
            "is_share": 1.0,
            "is_cpu_only": 0.0,
            "has_model_constraint": 0.0,
            "cpu_per_gpu": (2 / 0.3) / 16,
            "workload_gpu_cpu_per_gpu": (4 / 0.5) / 16,  # the typical share: 4 cores per 0.5 GPU
            "workload_cpu_only_per_gpu": 0.0,
            "cluster_cpu_per_gpu": cluster_cores_per_gpu / 16,
            "cpu_pressure": 8 / cluster_cores_per_gpu,
        },
        abs=1e-6,
    )


@pytest.mark.parametrize(
    ("pod_kwargs", "feasible"),
    [
        pytest.param({"cpu": "1"}, ["n1", "n2", "n3"], id="a small CPU pod fits everywhere"),
        pytest.param({"cpu": "13"}, ["n2"], id="13 cores: n1 has 12 left, n3 has 8"),
        pytest.param({"cpu": "1", "gpus": 2}, ["n2"], id="two whole GPUs: n1 has one fully free"),
        pytest.param({"cpu": "1", "gpus": 1, "gpu_milli": 600}, ["n1", "n2"], id="a 600 share: not on n3"),
        pytest.param(
            {"cpu": "1", "gpus": 1, "gpu_models": "V100M32"}, [], id="a model no node has: masked everywhere"
        ),
    ],
)
def test_the_mask_is_the_filters_verdict(pod_kwargs: dict[str, object], feasible: list[str]) -> None:
    state = small_state()
    pod = make_pod("p", **pod_kwargs)  # type: ignore[arg-type]
    nodes = feasible_nodes(state, pod, default_filters())
    assert [state.nodes[i].name for i in nodes] == feasible
    assert action_mask(state, pod, default_filters()).tolist() == [n.name in feasible for n in state.nodes]


def test_edges_link_nodes_of_the_same_shape_both_ways() -> None:
    nodes = [make_node(f"g{i}", cpu="8", memory="32Gi", gpus=2, model="T4") for i in range(5)]
    nodes.append(make_node("other", cpu="8", memory="32Gi", gpus=2, model="V100"))
    edges = structure_edges(make_state(nodes), degree=2)
    pairs = {(int(a), int(b)) for a, b in edges.T}
    assert pairs == {(i, (i + 1) % 5) for i in range(5)} | {((i + 1) % 5, i) for i in range(5)}
    assert all(5 not in pair for pair in pairs)  # the lone V100 node links to nothing
    assert list(edges[1]) == sorted(edges[1])  # sorted by target, as the inference cache expects


ZONE = ZONE_LABEL
SHAPE = {"cpu": "8", "memory": "32Gi", "gpus": 2, "model": "T4"}


def zoned_state():  # type: ignore[no-untyped-def]
    return make_state(
        [make_node(f"g{i}", **SHAPE, labels={ZONE: f"z{i % 2}"}) for i in range(6)]  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("change", "rebuilt"),
    [
        pytest.param(
            lambda s: s.add_node(make_node("g1", **SHAPE, labels={ZONE: "z1", "os": "linux"})),
            False,
            id="other label",
        ),
        pytest.param(
            lambda s: s.add_node(
                make_node("g1", **SHAPE, labels={ZONE: "z1"}, taints=[{"key": "k", "effect": "NoSchedule"}])
            ),
            False,
            id="taint",
        ),
        pytest.param(lambda s: s.place(make_pod("p", cpu="1"), "g1", ()), False, id="placement"),
        pytest.param(lambda s: s.add_node(make_node("g1", **SHAPE, labels={ZONE: "z0"})), True, id="zone"),
        pytest.param(
            lambda s: s.add_node(make_node("g1", **{**SHAPE, "model": "V100"}, labels={ZONE: "z1"})),
            True,
            id="GPU model",
        ),
        pytest.param(
            lambda s: s.add_node(make_node("g1", **{**SHAPE, "cpu": "16"}, labels={ZONE: "z1"})),
            True,
            id="CPU",
        ),
        pytest.param(
            lambda s: s.add_node(make_node("g9", **SHAPE, labels={ZONE: "z1"})), True, id="new node"
        ),
        pytest.param(lambda s: s.remove_node("g1"), True, id="node gone"),
    ],
)
def test_edges_are_rebuilt_only_when_what_they_link_changes(change: object, rebuilt: bool) -> None:
    state = zoned_state()
    builder = GraphBuilder(TYPICAL)
    builder.node_features(state)
    before = builder.edge_index
    change(state)  # type: ignore[operator]
    features = builder.node_features(state)
    assert (builder.edge_index is not before) == rebuilt
    assert np.array_equal(builder.edge_index, structure_edges(state, builder.degree))
    fresh = GraphBuilder(TYPICAL).node_features(state)
    assert np.array_equal(features, fresh)


def test_nodes_of_one_dev_cluster_rack_are_linked() -> None:
    """The dev cluster's node objects, as the operator reads them: two nodes of different
    shapes in different zones share only a rack, so only the rack label links them."""
    specs = [
        devnodes.NodeSpec("cpu", devnodes.NODE_TYPES["cpu-small"], "zone-a", "rack-7"),
        devnodes.NodeSpec("gpu", devnodes.NODE_TYPES["gpu-t4"], "zone-b", "rack-7"),
        devnodes.NodeSpec("far", devnodes.NODE_TYPES["gpu-v100"], "zone-c", "rack-8"),
    ]
    state = make_state([node_from_manifest(devnodes.node_manifest(s)) for s in specs])
    pairs = {(int(a), int(b)) for a, b in structure_edges(state, degree=2).T}
    assert pairs == {(0, 1), (1, 0)}


def test_a_pod_request_row_is_kept_until_the_cluster_supply_changes() -> None:
    """The row is made once per request (another pod asking the same gets it, read-only)
    and made again when a new node changes the cluster's cores per GPU."""
    state = small_state()
    builder = GraphBuilder(TYPICAL)
    first = builder.pod_features(make_pod("a", cpu="2", memory="4Gi", gpus=1, gpu_milli=300), state)
    same = builder.pod_features(make_pod("b", cpu="2", memory="4Gi", gpus=1, gpu_milli=300), state)
    other = builder.pod_features(make_pod("c", cpu="2", memory="4Gi", gpus=1, gpu_milli=400), state)
    assert same is first
    assert not np.array_equal(other, first)
    with pytest.raises(ValueError, match="read-only"):
        first[0] = 1.0
    state.add_node(make_node("n4", cpu="64", memory="64Gi", gpus=1, model="T4"))
    again = builder.pod_features(make_pod("a", cpu="2", memory="4Gi", gpus=1, gpu_milli=300), state)
    fresh = GraphBuilder(TYPICAL).pod_features(
        make_pod("a", cpu="2", memory="4Gi", gpus=1, gpu_milli=300), state
    )
    assert np.array_equal(again, fresh)
    assert not np.array_equal(again, first)


def ring_edges_reference(state: ClusterState, degree: int) -> list[tuple[int, int]]:
    """The edges as first written: a set of (source, target) links around each group's
    ring, sorted by target then source."""
    groups: dict[tuple[object, ...], list[int]] = {}
    for i, node in enumerate(state.nodes):
        groups.setdefault(("shape", *node_shape(state, i)), []).append(i)
        for label in TOPOLOGY_LABELS:
            if label in node.labels:
                groups.setdefault((label, node.labels[label]), []).append(i)
    half = max(1, degree // 2)
    links: set[tuple[int, int]] = set()
    for members in groups.values():
        for position, node_index in enumerate(members):
            for step in range(1, min(half, len(members) - 1) + 1):
                other = members[(position + step) % len(members)]
                links |= {(node_index, other), (other, node_index)}
    return sorted(links, key=lambda link: (link[1], link[0]))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["T4", "V100", ""]),
            st.integers(0, 2),
            st.sampled_from(["zone-a", "zone-b", None]),
            st.sampled_from(["rack-1", "rack-2", None]),
        ),
        max_size=40,
    ),
    st.integers(1, 6),
)
def test_edges_and_signatures_at_once_are_those_node_by_node(
    shapes: list[tuple[str, int, str | None, str | None]], degree: int
) -> None:
    nodes = []
    for i, (model, gpus, zone, rack) in enumerate(shapes):
        labels = {key: value for key, value in ((ZONE, zone), (RACK_LABEL, rack)) if value}
        nodes.append(
            make_node(
                f"n{i}",
                cpu=str(4 + 4 * (i % 2)),
                gpus=gpus if model else 0,
                model=model or None,
                hami=False,
                labels=labels,
            )
        )
    state = make_state(nodes)
    assert [tuple(edge) for edge in structure_edges(state, degree).T.tolist()] == ring_edges_reference(
        state, degree
    )
    assert node_signatures(state) == [node_signature(state, i) for i in range(len(state))]
