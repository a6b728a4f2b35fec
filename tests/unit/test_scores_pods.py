"""Table tests for the scores that look at other pods: InterPodAffinity and
PodTopologySpread. Each row: a pod, the nodes, the pods already on them, and the
normalised score per node; comments give kube-scheduler's arithmetic."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.objects.node import Node
from scheduler.objects.pod import Pod
from scheduler.plugins.scores.inter_pod_affinity import InterPodAffinityScore
from scheduler.plugins.scores.pod_topology_spread import PodTopologySpreadScore
from tests.builders import all_nodes, context, make_node, make_pod, make_state
from tests.unit.test_filters_pods import HOST, ZONE, many, spread, term, web, zone_node

A1, A2, B1 = zone_node("a1", "a"), zone_node("a2", "a"), zone_node("b1", "b")
X1 = zone_node("x1", None)  # no zone label
DB = make_pod("db", labels={"app": "db"})
NO_SCHEDULE = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
B2_TAINTED = make_node("b2", labels={ZONE: "b"}, taints=[NO_SCHEDULE])


def preferred(
    *weighted: tuple[int, dict[str, Any]], anti: tuple[tuple[int, dict[str, Any]], ...] = ()
) -> dict[str, Any]:
    """Preferred pod affinity and anti-affinity terms, each ``(weight, term)``."""
    out: dict[str, Any] = {}
    for field, terms in (("podAffinity", weighted), ("podAntiAffinity", anti)):
        if terms:
            out[field] = {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": w, "podAffinityTerm": t} for w, t in terms
                ]
            }
    return out


def lonely(name: str, weight: int) -> Pod:
    """A placed pod that would rather not share its node with app=web pods."""
    return make_pod(name, affinity=preferred(anti=((weight, term(HOST, {"app": "web"})),)))


def clingy(name: str) -> Pod:
    """A placed pod that required app=web pods in its zone (already met when it came)."""
    required = {"requiredDuringSchedulingIgnoredDuringExecution": [term(ZONE, {"app": "web"})]}
    return make_pod(name, affinity={"podAffinity": required})


AFFINITY_CASES = [
    pytest.param(
        make_pod("p", affinity=preferred((5, term()))),
        [A1, A2, B1],
        [(DB, "a1")],
        # zone a +5: a1 5, a2 5, b1 0 -> (s - 0) * 100 / 5
        [100, 100, 0],
        id="preferred affinity to db's zone",
    ),
    pytest.param(
        web("p", affinity=preferred(anti=((10, term(HOST, {"app": "web"})),))),
        [A1, A2, B1],
        many(web("w"), "a1", 2) + many(web("w"), "b1", 1),
        # hosts: a1 -20, a2 0, b1 -10; min -20 max 0 -> 0, 100, 100 * 10/20
        [0, 100, 50],
        id="preferred anti-affinity spreads replicas over hosts",
    ),
    pytest.param(
        web("p", affinity=preferred((3, term()), anti=((4, term(HOST, {"app": "web"})),))),
        [A1, A2, B1],
        [(DB, "b1"), *many(web("w"), "b1", 1), *many(web("w"), "a1", 1)],
        # a1 -4, a2 0, b1 +3 (zone b) -4 = -1; min -4 max 0 -> 0, 100, 100 * 3/4
        [0, 100, 75],
        id="affinity and anti-affinity add up per node",
    ),
    pytest.param(
        make_pod("p", affinity=preferred((1, term()), (2, term(HOST)))),
        [A1, A2, B1],
        [(DB, "a1")],
        # a1 1 (zone) + 2 (host) = 3, a2 1, b1 0 -> int(100 * 1/3) = 33
        [100, 33, 0],
        id="two keys; fractions truncate",
    ),
    pytest.param(
        web("p"),
        [A1, A2, B1],
        [(lonely("lonely", 7), "a1")],
        # the placed pod's own preferred anti-affinity matches the web pod: a1 -7
        [0, 100, 100],
        id="a placed pod's preferred anti-affinity (symmetry)",
    ),
    pytest.param(
        web("p"),
        [A1, A2, B1],
        [(clingy("clingy"), "b1")],
        # the placed pod's required affinity matches: zone b +1 (hardPodAffinityWeight)
        [0, 0, 100],
        id="a placed pod's required affinity counts hardPodAffinityWeight",
    ),
    pytest.param(
        make_pod("p", affinity=preferred((5, term()))),
        [A1, X1],
        [(DB, "x1")],
        # db's node has no zone label: its domain is nowhere, every node 0
        [0, 0],
        id="a placed pod on a node without the key adds nowhere",
    ),
    pytest.param(
        make_pod("p", affinity=preferred((5, term(namespaceSelector={"matchLabels": {"team": "x"}})))),
        [A1, B1],
        [(DB, "a1"), (make_pod("db", namespace="other", labels={"app": "db"}), "b1")],
        # only namespace "other" has team=x: db of "default" does not count
        [0, 100],
        id="namespaceSelector: the placed pod's namespace labels",
    ),
    pytest.param(
        web("p"),
        [A1, B1],
        many(web("w"), "a1", 3),
        [0, 0],
        id="no terms anywhere: all 0",
    ),
]


@pytest.mark.parametrize(("pod", "nodes", "placed", "expected"), AFFINITY_CASES)
def test_inter_pod_affinity_score(
    pod: Pod, nodes: list[Node], placed: list[tuple[Pod, str]], expected: list[int]
) -> None:
    state = make_state(nodes, placed)
    ctx = context(state, pod, {"other": {"team": "x"}})
    assert InterPodAffinityScore().score(ctx, all_nodes(state)).tolist() == expected


def soft(key: str = ZONE, max_skew: int = 1, **extra: Any) -> dict[str, Any]:
    return spread(key, max_skew, when="ScheduleAnyway", **extra)


SPREAD_CASES = [
    pytest.param(
        web("p", topology_spread=[soft()]),
        [A1, B1, zone_node("c1", "c")],
        many(web("w"), "a1", 2) + many(web("w"), "b1", 1),
        # 3 zones: w = ln 5 = 1.609; a 2w = 3.2 -> 3, b 1.6 -> 2, c 0; max 3 min 0
        # 100 * (3 + 0 - s) // 3
        [0, 33, 100],
        id="zones: fewer matching pods score higher",
    ),
    pytest.param(
        web("p", topology_spread=[soft(HOST, 2)]),
        [A1, A2, B1],
        many(web("w"), "a1", 1) + many(web("w"), "b1", 3),
        # hostname: 3 nodes, w = ln 5; + maxSkew-1 = 1: a1 2.6 -> 3, a2 1, b1 5.8 -> 6
        # max 6 min 1: 100 * (7 - s) // 6
        [66, 100, 16],
        id="hostname: the node's own pods, maxSkew softens",
    ),
    pytest.param(
        web("p", topology_spread=[soft()]),
        [A1, B1, X1],
        many(web("w"), "a1", 1),
        # x1 lacks the key: ignored, 0; 2 zones: w = ln 4 = 1.39 -> a1 1, b1 0
        [0, 100, 0],
        id="a node without the key is ignored",
    ),
    pytest.param(
        web("p", topology_spread=[soft(max_skew=3)]),
        [A1, B1],
        [],
        # nothing matches: every node maxSkew-1 = 2, max == min -> 100 * (2 + 2 - 2) // 2
        [100, 100],
        id="no matching pods: all 100",
    ),
    pytest.param(
        web("p", topology_spread=[spread()]),
        [A1, B1],
        many(web("w"), "a1", 1),
        [0, 0],
        id="DoNotSchedule only: the filter's business, no score",
    ),
    pytest.param(
        web("p", topology_spread=[soft()]),
        [A1, B1, B2_TAINTED],
        many(web("w"), "a1", 1) + many(web("w"), "b2", 2),
        # nodeTaintsPolicy Ignore: zone b counts b2's 2; w = ln 4: a 1.39 -> 1, b 2.77 -> 3
        # max 3 min 1: 100 * (4 - s) // 3
        [100, 33, 33],
        id="nodeTaintsPolicy Ignore (default) counts pods on tainted nodes",
    ),
    pytest.param(
        web("p", topology_spread=[soft(nodeTaintsPolicy="Honor")]),
        [A1, B1, B2_TAINTED],
        many(web("w"), "a1", 1) + many(web("w"), "b2", 2),
        # Honor: b2's NoSchedule taint is not tolerated, its pods do not count: a 1, b 0
        [0, 100, 100],
        id="nodeTaintsPolicy Honor leaves tainted nodes' pods out",
    ),
]


@pytest.mark.parametrize(("pod", "nodes", "placed", "expected"), SPREAD_CASES)
def test_pod_topology_spread_score(
    pod: Pod, nodes: list[Node], placed: list[tuple[Pod, str]], expected: list[int]
) -> None:
    state = make_state(nodes, placed)
    assert PodTopologySpreadScore().score(context(state, pod), all_nodes(state)).tolist() == expected
