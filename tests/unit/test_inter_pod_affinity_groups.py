"""The grouped InterPodAffinity (placed pods read by namespace, labels and terms) decides
as the pod-by-pod reference does: on random clusters of pods with random required and
preferred terms, after places, removals, relabels and node removals, PreFilter's counts (the
filter's rule reads only them) and the score agree for every incoming pod."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from scheduler.framework.status import Code
from scheduler.objects.pod import Pod
from scheduler.plugins.filters.inter_pod_affinity import InterPodAffinity
from scheduler.plugins.scores.inter_pod_affinity import InterPodAffinityScore
from scheduler.state.cluster_state import ClusterState
from tests.builders import all_nodes, context, make_node, make_pod
from tests.unit.inter_pod_affinity_reference import reference_counts, reference_score

KEYS = ("kubernetes.io/hostname", "topology.kubernetes.io/zone", "rack")
NAMESPACES = ("default", "other")
NAMESPACE_LABELS = {"default": {"team": "a"}, "other": {"team": "b"}}


def random_selector(rng: random.Random) -> dict[str, Any]:
    choice = rng.randrange(4)
    if choice == 0:
        return {"matchLabels": {"app": rng.choice("abc")}}
    if choice == 1:
        return {
            "matchExpressions": [{"key": "tier", "operator": rng.choice(["In", "NotIn"]), "values": ["x"]}]
        }
    if choice == 2:
        return {"matchLabels": {"app": rng.choice("ab"), "tier": rng.choice("xy")}}
    return {"matchExpressions": [{"key": "app", "operator": "Exists"}]}


def random_term(rng: random.Random) -> dict[str, Any]:
    term: dict[str, Any] = {"topologyKey": rng.choice(KEYS), "labelSelector": random_selector(rng)}
    extra = rng.randrange(6)
    if extra == 0:
        term["namespaces"] = [rng.choice(NAMESPACES)]
    elif extra == 1:
        term["namespaceSelector"] = {} if rng.random() < 0.5 else {"matchLabels": {"team": "b"}}
    elif extra == 2:
        term["matchLabelKeys"] = ["tier"]
    elif extra == 3:
        term["mismatchLabelKeys"] = ["app"]
    return term


def random_affinity(rng: random.Random, rate: float) -> dict[str, Any] | None:
    affinity: dict[str, Any] = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        spec: dict[str, Any] = {}
        if rng.random() < rate:
            spec["requiredDuringSchedulingIgnoredDuringExecution"] = [
                random_term(rng) for _ in range(rng.randint(1, 2))
            ]
        if rng.random() < rate:
            spec["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": rng.randint(1, 100), "podAffinityTerm": random_term(rng)}
                for _ in range(rng.randint(1, 2))
            ]
        if spec:
            affinity[kind] = spec
    return affinity or None


def random_pod(rng: random.Random, name: str, rate: float) -> Pod:
    labels = {"app": rng.choice("abc")}
    if rng.random() < 0.6:
        labels["tier"] = rng.choice("xy")
    return make_pod(
        name, namespace=rng.choice(NAMESPACES), labels=labels, affinity=random_affinity(rng, rate)
    )


def random_cluster(rng: random.Random, placed: int, rate: float) -> ClusterState:
    nodes = []
    for i in range(12):
        labels = {"rack": f"r{i % 2}"} if i % 3 else {}
        if i % 5:
            labels["topology.kubernetes.io/zone"] = f"z{i % 3}"
        nodes.append(make_node(f"n{i}", labels=labels))
    state = ClusterState(nodes)
    for i in range(placed):
        state.place(random_pod(rng, f"p{i}", rate), f"n{rng.randrange(12)}")
    keys = list(state.placements)
    for key in rng.sample(keys, len(keys) // 5):
        state.remove(key)
    for key in rng.sample(list(state.placements), len(state.placements) // 5):
        state.relabel(key, {"app": rng.choice("abc"), "tier": rng.choice("xy")})
    state.remove_node(f"n{rng.randrange(12)}")
    return state


@pytest.mark.parametrize(
    ("seed", "placed", "rate"),
    [
        pytest.param(1, 0, 0.5, id="empty cluster"),
        pytest.param(2, 30, 0.1, id="few placed pods with terms"),
        pytest.param(3, 60, 0.4, id="many placed pods with terms"),
        pytest.param(4, 80, 0.8, id="nearly every placed pod with terms"),
        pytest.param(5, 120, 0.3, id="crowded"),
    ],
)
def test_grouped_inter_pod_affinity_decides_as_pod_by_pod(seed: int, placed: int, rate: float) -> None:
    rng = random.Random(seed)
    state = random_cluster(rng, placed, rate)
    for i in range(40):
        pod = random_pod(rng, f"incoming-{i}", 0.6)
        ctx = context(state, pod, NAMESPACE_LABELS)
        expected = reference_counts(context(state, pod, NAMESPACE_LABELS))
        plugin = InterPodAffinity()
        status = plugin.pre_filter(ctx)
        assert (expected is None) == (status.code == Code.SKIP), pod.name
        if expected is not None:
            counts = ctx.data[plugin.name]
            for name, got in (
                ("affinity", counts.affinity_counts),
                ("anti", counts.anti_affinity_counts),
                ("existing", counts.existing_counts),
            ):
                assert {k: v.tolist() for k, v in got.items()} == {
                    k: v.tolist() for k, v in expected[name].items()
                }, (pod.name, name)
        for hard in (0, 1, 3):
            nodes = all_nodes(state)
            got_score = InterPodAffinityScore(hard).score(context(state, pod, NAMESPACE_LABELS), nodes)
            want = reference_score(context(state, pod, NAMESPACE_LABELS), nodes, hard)
            np.testing.assert_array_equal(got_score, want, err_msg=f"{pod.name} hard={hard}")


def test_groups_follow_the_state() -> None:
    """The groups count exactly the placed pods, per node row, after every kind of change."""
    rng = random.Random(7)
    state = random_cluster(rng, 100, 0.5)
    expected: dict[Any, dict[int, int]] = {}
    for row, pods in enumerate(state.pods_on_node):
        for pod in pods.values():
            per_node = expected.setdefault((pod.namespace, frozenset(pod.labels.items())), {})
            per_node[row] = per_node.get(row, 0) + 1
    assert {k: g.on_node for k, g in state.pod_groups.by_labels.items()} == expected
    with_terms = sum(sum(g.on_node.values()) for g in state.pod_groups.with_terms.values())
    assert with_terms == len(state.affinity_pod_keys)
