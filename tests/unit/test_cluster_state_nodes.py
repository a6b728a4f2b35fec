"""Nodes added, updated and removed in any order leave ``ClusterState`` as a state
built from the nodes that remain: each node's rows are its own (a removed node's rows
do not leak into the next node added in their place), and pods on other nodes keep
what they hold."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.state.cluster_state import ClusterState
from tests.builders import make_node, make_pod

# Node shapes: whole GPUs, HAMi GPUs, none; another extended resource on some.
SHAPES: list[dict[str, Any]] = [
    {"cpu": "4", "memory": "8Gi"},
    {"cpu": "32", "memory": "256Gi", "gpus": 8, "hami": False, "model": "A100"},
    {"cpu": "16", "memory": "64Gi", "gpus": 2, "model": "T4"},
    {"cpu": "8", "memory": "32Gi", "extra": {"example.com/fpga": "2"}},
]
ROWS = (
    "allocatable",
    "requested",
    "nonzero_requested",
    "gpu_count",
    "gpu_free_milli",
    "gpu_memory",
    "gpu_free_memory",
    "gpu_slots",
    "gpu_free_slots",
    "gpu_sharing",
)

operations = st.lists(
    st.tuples(
        st.sampled_from(["add", "remove", "place"]), st.integers(0, 5), st.integers(0, len(SHAPES) - 1)
    ),
    max_size=30,
)


def rows_by_name(state: ClusterState) -> dict[str, dict[str, list[Any]]]:
    """Each node's rows, by node name, over the resources by name (those it has)."""
    columns = state.resource_names
    out = {}
    for name, i in state.node_index.items():
        rows: dict[str, list[Any]] = {}
        for field in ROWS:
            row = getattr(state, field)[i]
            rows[field] = (
                {c: v for c, v in zip(columns, row.tolist(), strict=True) if v}
                if field in ("allocatable", "requested")
                else np.atleast_1d(row).tolist()
            )
        rows["gpu_model"] = [state.gpu_models[state.gpu_model_id[i]] if state.gpu_model_id[i] >= 0 else ""]
        out[name] = rows
    return out


@settings(max_examples=150, deadline=None)
@given(operations)
def test_churned_nodes_hold_the_rows_of_a_fresh_state(steps: list[tuple[str, int, int]]) -> None:
    state = ClusterState()
    present: dict[str, int] = {}  # name -> shape
    pods: dict[str, str] = {}  # pod key -> node
    for step, (action, which, shape) in enumerate(steps):
        name = f"n{which}"
        if action == "add":
            state.add_node(make_node(name, **SHAPES[shape]))
            present[name] = shape
        elif action == "remove" and name in present:
            for pod in state.remove_node(name):
                del pods[pod.key]
            del present[name]
        elif action == "place" and name in present:
            pod = make_pod(f"p{step}", cpu="100m")
            state.place(pod, name, ())
            pods[pod.key] = name
    fresh = ClusterState([make_node(name, **SHAPES[shape]) for name, shape in present.items()])
    for key, name in pods.items():
        fresh.place(make_pod(key.split("/")[-1], cpu="100m"), name, ())
    assert rows_by_name(state) == rows_by_name(fresh)
    # Past the last node every row is zero, ready for the next node added.
    for field in ROWS:
        assert not np.any(getattr(state, "_" + field)[len(state) :])
