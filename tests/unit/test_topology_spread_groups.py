"""PodTopologySpread counts matching pods per node by group of placed pods alike in
namespace and labels; the counts are those of reading every placed pod and skipping
those being deleted (kube, #87621), on random clusters after removals, relabels, pods
that start being deleted and a node removal."""

from __future__ import annotations

import random

import numpy as np
import pytest

from scheduler.objects.selectors import LabelSelector, Requirement
from scheduler.plugins.filters.pod_topology_spread import matching_pods_per_node
from scheduler.state.cluster_state import BoolArray, ClusterState, IntArray
from tests.builders import make_pod
from tests.unit.test_inter_pod_affinity_groups import NAMESPACES, random_cluster

SELECTORS = [
    LabelSelector((("app", "a"),)),
    LabelSelector((("app", "b"), ("tier", "x"))),
    LabelSelector((), (Requirement("tier", "NotIn", ("x",)),)),
    LabelSelector((), (Requirement("app", "Exists"),)),
]


def pod_by_pod(state: ClusterState, namespace: str, selector: LabelSelector, counted: BoolArray) -> IntArray:
    per_node = np.zeros(len(state), np.int64)
    for i in np.flatnonzero(counted):
        per_node[i] = sum(
            1
            for p in state.pods_on_node[i].values()
            if p.namespace == namespace and selector.matches(p.labels) and not p.terminating
        )
    return per_node


@pytest.mark.parametrize("seed", range(30))
def test_counts_by_group_are_counts_by_pod(seed: int) -> None:
    rng = random.Random(seed)
    state = random_cluster(rng, rng.randint(0, 120), 0.3)
    for key in rng.sample(sorted(state.placements), len(state.placements) // 4):
        state.amend(key, terminating=True)  # its deletionTimestamp seen
    being_deleted = sorted(key for key in state.placements if key in state.terminating)
    for key in rng.sample(being_deleted, len(being_deleted) // 3):
        state.remove(key)  # and then the deletion itself
    nonzero = 0
    for phase in ("as placed", "after a node goes"):  # rows move: cached groups must follow
        if phase == "after a node goes":
            state.remove_node(rng.choice(state.node_names))
        for namespace in NAMESPACES:
            for selector in SELECTORS:
                counted = np.array([rng.random() < 0.8 for _ in range(len(state))], np.bool_)
                expected = pod_by_pod(state, namespace, selector, counted)
                counts = matching_pods_per_node(state, namespace, selector, counted)
                assert counts.tolist() == expected.tolist(), phase
                nonzero += int(expected.any())
    assert nonzero or not state.placements  # the random clusters do have matching pods


@pytest.mark.parametrize(
    ("selector", "why"),
    [(None, "a nil selector matches nothing"), (LabelSelector(), "an empty one counts 0 (kube)")],
)
def test_no_selector_counts_nothing(selector: LabelSelector | None, why: str) -> None:
    state = random_cluster(random.Random(7), 60, 0.3)
    counted = np.ones(len(state), np.bool_)
    assert not matching_pods_per_node(state, "default", selector, counted).any(), why


def test_pods_being_deleted_are_not_counted() -> None:
    """Placed while being deleted, or marked so once placed: neither counts, and one
    whose deletion is called off (amended back) counts again."""
    state = random_cluster(random.Random(3), 0, 0.0)
    node = state.node_names[0]
    for name, deleted_at in (("web-0", None), ("web-1", "2026-01-01T00:00:00Z"), ("web-2", None)):
        state.place(make_pod(name, labels={"app": "a"}, deletion_timestamp=deleted_at), node)
    state.amend("default/web-2", terminating=True)
    counted = np.ones(len(state), np.bool_)
    row = state.node_index[node]
    selector = SELECTORS[0]
    assert matching_pods_per_node(state, "default", selector, counted)[row] == 1
    state.amend("default/web-1", terminating=False)
    assert matching_pods_per_node(state, "default", selector, counted)[row] == 2
