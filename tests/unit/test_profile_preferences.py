"""The policy profiles put the pod's preferences first and let the policy choose among
the nodes it prefers most; kube's profiles add the preference scores with kube's
weights. Each row: a profile, the pod, the pods already placed, the node chosen."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

from scheduler.framework.profile import schedule_pod
from scheduler.objects.pod import Pod
from scheduler.plugins.profiles import build_profile
from scheduler.plugins.registry import ProfileContext
from scheduler.state.fragmentation import PodShape, TypicalPods
from tests.builders import make_node, make_pod, make_state
from tests.unit.test_filters_pods import HOST, ZONE, spread, term, web
from tests.unit.test_scores_pods import preferred

PREFER_NO_SCHEDULE = {"key": "draining", "value": "true", "effect": "PreferNoSchedule"}
TYPICAL = TypicalPods((PodShape(1000, 0, 0),), (1.0,))


def nodes(tainted: str = "") -> list[Any]:
    """big (16 cores, zone a), mid (8, zone b), small (4, zone b): best fit takes small,
    LeastAllocated big."""
    sizes = {"big": ("16", "a"), "mid": ("8", "b"), "small": ("4", "b")}
    return [
        make_node(
            name,
            cpu=cpu,
            memory="64Gi",
            labels={ZONE: zone},
            taints=[PREFER_NO_SCHEDULE] if name == tainted else [],
        )
        for name, (cpu, zone) in sizes.items()
    ]


def node_preference(zone: str) -> dict[str, Any]:
    preference = {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}
    terms = [{"weight": 1, "preference": preference}]
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": terms}}


def spread_from_web(key: str = HOST) -> dict[str, Any]:
    return preferred(anti=((50, term(key, {"app": "web"})),))


CASES = [
    pytest.param("best-fit", web("p", cpu="1"), "", [], "small", id="no preference: the policy's node"),
    pytest.param(
        "fgd", web("p", cpu="1"), "", [], "big", id="fgd, no preference: no GPUs, a tie, the first node"
    ),
    pytest.param(
        "fgd",
        web("p", cpu="1", affinity=node_preference("b")),
        "",
        [],
        "mid",
        id="fgd: the first of the preferred nodes",
    ),
    pytest.param(
        "best-fit", web("p", cpu="1", affinity=node_preference("a")), "", [], "big", id="preferred zone wins"
    ),
    pytest.param(
        "best-fit",
        web("p", cpu="1", affinity=node_preference("b")),
        "",
        [],
        "small",
        id="two nodes preferred alike: the policy picks among them",
    ),
    pytest.param("best-fit", web("p", cpu="1"), "small", [], "mid", id="PreferNoSchedule taint avoided"),
    pytest.param(
        "best-fit",
        web("p", cpu="1", affinity=spread_from_web()),
        "",
        [(web("w1", cpu="1"), "small")],
        "mid",
        id="preferred anti-affinity: the best fit among hosts without a replica",
    ),
    pytest.param(
        "best-fit",
        web("p", cpu="1", topology_spread=[spread(ZONE, when="ScheduleAnyway")]),
        "",
        [(web("w1", cpu="1"), "small"), (web("w2", cpu="1"), "mid")],
        "big",
        id="soft zone spread: the empty zone",
    ),
    pytest.param(
        "default",
        web("p", cpu="1", affinity=spread_from_web()),
        "",
        [(web("w1", cpu="1"), "big")],
        "mid",
        id="default: LeastAllocated would take big, anti-affinity (weight 2) outweighs it",
    ),
]


@pytest.mark.parametrize(("profile", "pod", "tainted", "placed", "chosen"), CASES)
def test_preferences_come_first(
    profile: str, pod: Pod, tainted: str, placed: list[tuple[Pod, str]], chosen: str
) -> None:
    state = make_state(nodes(tainted), placed)
    built = build_profile(profile, ProfileContext(typical_pods=TYPICAL))
    decision = schedule_pod(state, pod, built, np.random.default_rng(0))
    assert decision.node == chosen


@pytest.mark.parametrize(
    ("pod", "scored", "top"),
    [
        pytest.param(web("p", cpu="1"), ["big", "mid", "small"], "small", id="no preference: all feasible"),
        pytest.param(
            web("p", cpu="1", affinity=node_preference("b")), ["mid", "small"], "small", id="zone b only"
        ),
    ],
)
def test_the_policy_scores_the_preferred_nodes(pod: Pod, scored: list[str], top: str) -> None:
    state = make_state(nodes())
    decision = schedule_pod(state, pod, build_profile("best-fit", ProfileContext()), np.random.default_rng(0))
    assert [state.nodes[int(i)].name for i in decision.scored] == scored
    assert decision.feasible.size == 3
    ranked = [name for name, _ in decision.top_scores(state)]
    assert ranked[0] == top == decision.node
    assert sorted(ranked) == scored


def test_the_learned_policy_chooses_among_the_preferred_nodes() -> None:
    """The gnn profile scores a subset of the feasible nodes when the pod prefers some."""
    built = build_profile("gnn", ProfileContext(typical_pods=TYPICAL))
    for zone, allowed in (("a", {"big"}), ("b", {"mid", "small"})):
        state = make_state(nodes())
        pod = web("p", cpu="1", affinity=node_preference(zone))
        decision = schedule_pod(state, pod, built, np.random.default_rng(0))
        assert decision.node in allowed
        assert {state.nodes[int(i)].name for i in decision.scored} == allowed


@pytest.mark.parametrize(
    ("profile", "cpu", "per_node"),
    [
        pytest.param("fgd-reserve", None, [2, 2], id="fgd-reserve, asks for nothing: spread"),
        pytest.param("fgd", None, [2, 2], id="fgd, asks for nothing: spread"),
        pytest.param("best-fit", None, [2, 2], id="best-fit, asks for nothing: spread"),
        pytest.param("gnn", None, [2, 2], id="gnn, asks for nothing: spread"),
        pytest.param("default", None, [2, 2], id="default, asks for nothing: spread (kube's own)"),
        pytest.param("best-fit", "100m", [4, 0], id="best-fit, asks for CPU: packed"),
        pytest.param("fgd-reserve", "100m", [4, 0], id="fgd-reserve, asks for CPU: packed"),
    ],
)
def test_pods_that_ask_for_nothing_are_spread(profile: str, cpu: str | None, per_node: list[int]) -> None:
    """A policy packs what pods ask for. A pod that asks for nothing gives it nothing to
    pack, and its tie (the first node) would stack every such pod on one node up to the
    node's pod limit; it goes where kube's LeastAllocated puts it instead."""
    state = make_state([make_node(name) for name in ("n1", "n2")])
    built = build_profile(profile, ProfileContext(typical_pods=TYPICAL))
    rng = np.random.default_rng(0)
    for index in range(4):
        decision = schedule_pod(state, make_pod(f"p{index}", cpu=cpu), built, rng)
        state.place(decision.pod, decision.node, decision.gpu_indices)
    on = Counter(placement.node for placement in state.pods())
    assert [on[name] for name in ("n1", "n2")] == per_node
