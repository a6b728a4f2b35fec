"""PodTopologySpread counts matching pods per node by group of placed pods alike in
namespace and labels; the counts are those of reading every placed pod, on random
clusters after removals, relabels and a node removal."""

from __future__ import annotations

import random

import numpy as np
import pytest

from scheduler.objects.selectors import LabelSelector, Requirement
from scheduler.plugins.filters.pod_topology_spread import matching_pods_per_node
from scheduler.state.cluster_state import BoolArray, ClusterState, IntArray
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
            if p.namespace == namespace and selector.matches(p.labels)
        )
    return per_node


@pytest.mark.parametrize("seed", range(30))
def test_counts_by_group_are_counts_by_pod(seed: int) -> None:
    rng = random.Random(seed)
    state = random_cluster(rng, rng.randint(0, 120), 0.3)
    nonzero = 0
    for namespace in NAMESPACES:
        for selector in SELECTORS:
            counted = np.array([rng.random() < 0.8 for _ in range(len(state))], np.bool_)
            expected = pod_by_pod(state, namespace, selector, counted)
            assert matching_pods_per_node(state, namespace, selector, counted).tolist() == expected.tolist()
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
