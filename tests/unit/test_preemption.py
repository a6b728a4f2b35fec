"""Table tests for DefaultPreemption's pure core (kube-scheduler v1.36 semantics).

Each row builds nodes and the pods on them, runs the kube default filters, and states
what preemption decides, with the arithmetic in a comment. After every call the state
must be exactly what it was (``snapshot``: arrays, GPU use, dict order, versions).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
import pytest

from scheduler.errors import SchedulerInputError
from scheduler.framework.preemption import (
    MAX_INT32,
    NOT_ELIGIBLE_NEVER,
    NOT_ELIGIBLE_TERMINATING,
    Candidate,
    PreemptionArgs,
    PreemptionFailure,
    PreemptionOutcome,
    calculate_num_candidates,
    dry_run_preemption,
    filter_with_nominated_pods,
    offset_and_num_candidates,
    pick_one_node_for_preemption,
    pod_eligible_to_preempt_others,
    preempt,
)
from scheduler.framework.preemption_victims import (
    NO_VICTIMS,
    PodDisruptionBudget,
    Victims,
    select_victims_on_node,
    split_by_pdb_violation,
)
from scheduler.framework.status import Code, Status
from scheduler.objects.node import Node
from scheduler.objects.pod import Pod
from scheduler.objects.pod_manifest import pod_from_manifest
from scheduler.objects.selectors import LabelSelector, Requirement
from scheduler.plugins.profiles import default_filters
from scheduler.state.cluster_state import ClusterState
from tests.builders import make_node, make_pod, pod_manifest

FILTERS = default_filters()
NOW = datetime.fromisoformat("2024-06-01T00:00:00+00:00").timestamp()
JAN, MAY = "2024-01-01T00:00:00Z", "2024-05-01T00:00:00Z"


def at(pod: Pod, node: str, *gpus: int) -> tuple[Pod, str, tuple[int, ...]]:
    """``pod`` placed on ``node``, holding GPUs ``gpus`` (by index)."""
    return pod, node, gpus


def build(nodes: Sequence[Node], placed: Sequence[tuple[Pod, str, tuple[int, ...]]]) -> ClusterState:
    state = ClusterState(nodes)
    for pod, node, gpus in placed:
        state.place(pod, node, gpus)
    return state


def snapshot(state: ClusterState) -> tuple[Any, ...]:
    """Everything a dry run could disturb, in a comparable form (dict order included)."""
    arrays = (
        state.requested,
        state.nonzero_requested,
        state.gpu_free_milli,
        state.gpu_free_memory,
        state.gpu_free_slots,
        state.node_version,
    )
    return (
        tuple(a.tolist() for a in arrays),
        list(state.placements.items()),
        [list(on_node.items()) for on_node in state.pods_on_node],
        sorted(state.anti_affinity_pod_keys),
        sorted(state.affinity_pod_keys),
    )


def run_preemption(
    state: ClusterState,
    pod: Pod,
    pdbs: Sequence[PodDisruptionBudget] = (),
    nominated: Sequence[Pod] = (),
) -> PreemptionOutcome | PreemptionFailure:
    before = snapshot(state)
    statuses = filter_with_nominated_pods(state, FILTERS, pod, nominated)
    assert statuses.feasible.size == 0, "preemption runs only for pods that fit nowhere"
    result = preempt(
        state, FILTERS, pod, statuses, np.random.default_rng(0), pdbs=pdbs, nominated=nominated, now=NOW
    )
    assert snapshot(state) == before
    return result


def budget(
    disruptions_allowed: int, selector: LabelSelector | None = None, **kwargs: Any
) -> PodDisruptionBudget:
    selector = selector if selector is not None else LabelSelector((("app", "db"),))
    return PodDisruptionBudget("default", "db", selector, disruptions_allowed, **kwargs)


def pod(name: str, priority: int, **kwargs: Any) -> Pod:
    return make_pod(name, priority=priority, **kwargs)


PREEMPTOR = pod("preemptor", 10, cpu="2")

OUTCOMES = [
    pytest.param(
        [make_node("n1"), make_node("n2")],
        [
            at(pod("low", 1, cpu="2"), "n1"),
            at(pod("mid", 5, cpu="2"), "n1"),
            at(pod("a", 3, cpu="2"), "n2"),
            at(pod("b", 3, cpu="2"), "n2"),
        ],
        PREEMPTOR,
        [],
        ("n1", ["low"], 0),
        # n1: mid back, 2+2 <= 4 fits; low back, 6 > 4: victims [low], top priority 1.
        # n2: a back fits, b is the victim: top priority 3. Lowest top priority: n1.
        id="lowest-priority victims on a two-node cluster",
    ),
    pytest.param(
        [make_node("n1"), make_node("n2")],
        [at(pod("db", 1, cpu="4", labels={"app": "db"}), "n1"), at(pod("web", 2, cpu="4"), "n2")],
        PREEMPTOR,
        [budget(0)],
        ("n2", ["web"], 0),
        # n1: evicting db takes its budget 0 -> -1: one violation; n2: none. Fewest
        # violations first, although web's priority 2 > db's 1.
        id="PDB-violating victims avoided when another node has none",
    ),
    pytest.param(
        [make_node("n1"), make_node("n2")],
        [at(pod("db", 1, cpu="4", labels={"app": "db"}), "n1"), at(pod("web", 2, cpu="4"), "n2")],
        PREEMPTOR,
        [budget(1)],
        ("n1", ["db"], 0),
        # The budget allows one: 1 -> 0, no violation; then priority 1 < 2 picks n1.
        id="a budget with room is no violation",
    ),
    pytest.param(
        [make_node("n1"), make_node("n2")],
        [
            at(pod("x", 7, cpu="4"), "n1"),
            at(pod("y", 7, cpu="2"), "n2"),
            at(pod("z", -(2**31), cpu="2"), "n2"),
        ],
        pod("preemptor", 10, cpu="4"),
        [],
        ("n1", ["x"], 0),
        # Top priority 7 on both. Sums with 2^31 added each: n1 7 + 2^31; n2
        # (7 + 2^31) + (-2^31 + 2^31) = 7 + 2^31: a tie, so fewest victims: n1 (1 < 2).
        # (Raw sums 7 > 7 - 2^31 would have picked n2.)
        id="fewest victims when the offset sums tie",
    ),
    pytest.param(
        [make_node("n1"), make_node("n2")],
        [
            at(pod("a", -10, cpu="2"), "n1"),
            at(pod("b", -10, cpu="2"), "n1"),
            at(pod("c", -10, cpu="4"), "n2"),
        ],
        pod("preemptor", 0, cpu="4"),
        [],
        ("n2", ["c"], 0),
        # Sums with 2^31 added: n1 2 * (2^31 - 10) > n2 2^31 - 10, so n2; raw sums
        # -20 < -10 would have evicted two pods on n1.
        id="negative priorities: the offset sum prefers fewer victims",
    ),
    pytest.param(
        [make_node("n1"), make_node("n2")],
        [
            at(pod("old", 1, cpu="4", start_time=JAN), "n1"),
            at(pod("young", 1, cpu="4", start_time=MAY), "n2"),
        ],
        PREEMPTOR,
        [],
        ("n2", ["young"], 0),
        # Same priority, sum and count; the latest start among top-priority victims
        # (May > January) wins: the pod that has run less is evicted.
        id="start-time tie-break",
    ),
    pytest.param(
        [make_node("n1")],
        [
            at(pod("a", 1, cpu="1"), "n1"),
            at(pod("b", 2, cpu="2"), "n1"),
            at(pod("c", 3, cpu="1"), "n1"),
        ],
        PREEMPTOR,
        [],
        ("n1", ["b"], 0),
        # All out, then back most important first: c 1+2 = 3 <= 4 stays; b 3+2 = 5 > 4
        # goes; a 1+1+2 = 4 <= 4 stays, though its priority is the lowest.
        id="reprieve keeps a pod that is not needed",
    ),
    pytest.param(
        [make_node("g1", gpus=1, model="T4")],
        [
            at(pod("s1", 1, gpus=1, gpu_milli=300), "g1", 0),
            at(pod("s2", 2, gpus=1, gpu_milli=600), "g1", 0),
        ],
        pod("whole", 10, gpus=1),
        [],
        ("g1", ["s2", "s1"], 0),
        # A whole GPU needs one nobody uses: GPU 0 holds 300 + 600 milli, both must go
        # (each alone back leaves GPU 0 in use), most important first.
        id="GPU: a whole GPU preempts the shares of one GPU",
    ),
    pytest.param(
        [make_node("g1", gpus=2, model="T4")],
        [
            at(pod("s1", 1, gpus=1, gpu_milli=300), "g1", 0),
            at(pod("s2", 2, gpus=1, gpu_milli=600), "g1", 1),
        ],
        pod("whole", 10, gpus=1),
        [],
        ("g1", ["s1"], 0),
        # s2 back on GPU 1 leaves GPU 0 free: it stays; s1 back on GPU 0 leaves no free
        # GPU: it goes. Victims are chosen per GPU, as the shares are placed.
        id="GPU: the share on the other GPU is reprieved",
    ),
]


@pytest.mark.parametrize(("nodes", "placed", "preemptor", "pdbs", "expected"), OUTCOMES)
def test_preemption_outcome(
    nodes: list[Node],
    placed: list[tuple[Pod, str, tuple[int, ...]]],
    preemptor: Pod,
    pdbs: list[PodDisruptionBudget],
    expected: tuple[str, list[str], int],
) -> None:
    state = build(nodes, placed)
    result = run_preemption(state, preemptor, pdbs)
    assert isinstance(result, PreemptionOutcome), str(result)
    assert (result.node, [v.name for v in result.victims], result.num_pdb_violations) == expected


def test_a_nominated_higher_priority_pod_takes_the_room_first() -> None:
    # n1 has 4 cpu and v (2 cpu): the preemptor (2 cpu) would fit, but "first" (priority
    # 20 >= 10, 2 cpu) is nominated there: 2 + 2 + 2 = 6 > 4. With v gone, 2 + 2 fits.
    # "later" (priority 5 < 10) does not count, and its nomination is to be cleared.
    state = build([make_node("n1")], [at(pod("v", 1, cpu="2"), "n1")])
    first = pod("first", 20, cpu="2", nominated_node_name="n1")
    later = pod("later", 5, cpu="2", nominated_node_name="n1")
    assert filter_with_nominated_pods(state, FILTERS, PREEMPTOR).feasible.tolist() == [0]
    result = run_preemption(state, PREEMPTOR, nominated=[first, later])
    assert result == PreemptionOutcome("n1", (state.placements["default/v"].pod,), 0, (later,))


NOMINATED = [
    pytest.param([], [0], {}, id="no nominated pods: one pass"),
    pytest.param(
        [pod("first", 20, cpu="3", nominated_node_name="n1")],
        [],
        {"Insufficient cpu": 1},
        # 3 + 2 > 4 with the nominated pod counted.
        id="a higher-priority nominated pod blocks the room",
    ),
    pytest.param(
        [pod("equal", 10, cpu="3", nominated_node_name="n1")],
        [],
        {"Insufficient cpu": 1},
        id="equal priority counts too",
    ),
    pytest.param(
        [pod("lower", 9, cpu="3", nominated_node_name="n1")],
        [0],
        {},
        id="a lower-priority nominated pod does not count",
    ),
    pytest.param(
        [pod("preemptor", 10, cpu="3", nominated_node_name="n1")],
        [0],
        {},
        id="the pod itself is not counted",
    ),
    pytest.param(
        [pod("elsewhere", 20, cpu="3", nominated_node_name="n2")],
        [0],
        {},
        id="nominated to another node",
    ),
    pytest.param(
        [pod("ghost", 20, cpu="3", nominated_node_name="gone")],
        [0],
        {},
        id="nominated to a node the state does not have",
    ),
]


@pytest.mark.parametrize(("nominated", "feasible", "reasons"), NOMINATED)
def test_filter_with_nominated_pods(
    nominated: list[Pod], feasible: list[int], reasons: dict[str, int]
) -> None:
    # n1: 4 cpu, empty; the pod asks 2 at priority 10.
    state = build([make_node("n1")], [])
    before = snapshot(state)
    statuses = filter_with_nominated_pods(state, FILTERS, PREEMPTOR, nominated)
    assert statuses.feasible.tolist() == feasible
    assert dict(statuses.reason_counts) == reasons
    assert snapshot(state) == before


def test_a_pod_passes_only_if_it_passes_with_and_without_the_nominated_pods() -> None:
    # The pod needs affinity to app=x: with "x" (nominated, priority 20) counted on n1 it
    # passes, without it not; kube's second pass rejects n1, for the reason it gives.
    affinity = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    state = build([make_node("n1")], [])
    x = pod("x", 20, labels={"app": "x"}, nominated_node_name="n1")
    seeker = pod("seeker", 10, affinity=affinity)
    before = snapshot(state)
    statuses = filter_with_nominated_pods(state, FILTERS, seeker, [x])
    assert statuses.feasible.tolist() == []
    assert dict(statuses.reason_counts) == {"node(s) didn't match pod affinity rules": 1}
    assert snapshot(state) == before


FAILURES = [
    pytest.param(
        [make_node("n1", cpu="2")],
        [at(pod("v", 1, cpu="2"), "n1")],
        pod("never", 10, cpu="2", preemption_policy="Never"),
        "0/1 nodes are available: 1 Insufficient cpu. "
        "preemption: not eligible due to preemptionPolicy=Never.",
        False,
        id="preemptionPolicy Never",
    ),
    pytest.param(
        [make_node("n1", cpu="2"), make_node("n2", unschedulable=True), make_node("n3")],
        [
            at(pod("high", 100, cpu="2"), "n1"),
            at(pod("high2", 100, cpu="3"), "n3"),
            at(pod("low", 1, cpu="1"), "n3"),
        ],
        PREEMPTOR,
        "0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient cpu. "
        "preemption: 0/3 nodes are available: 1 Insufficient cpu, "
        "1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling.",
        True,
        # n1: only a priority-100 pod: no victims. n2: cordoned, unresolvable, never
        # tried: not helpful. n3: without low, 3 + 2 > 4 still.
        id="no candidate anywhere",
    ),
    pytest.param(
        [make_node("n1", cpu="2")],
        [
            at(pod("v", 1, cpu="1"), "n1"),
            at(pod("leaving", 1, cpu="1", deletion_timestamp=MAY, preempted_by_scheduler=True), "n1"),
        ],
        pod("waiting", 10, cpu="2", nominated_node_name="n1"),
        "0/1 nodes are available: 1 Insufficient cpu. "
        "preemption: not eligible due to a terminating pod on the nominated node.",
        False,
        id="waits while its earlier victim terminates",
    ),
]


@pytest.mark.parametrize(("nodes", "placed", "preemptor", "message", "clears"), FAILURES)
def test_preemption_failure_messages(
    nodes: list[Node],
    placed: list[tuple[Pod, str, tuple[int, ...]]],
    preemptor: Pod,
    message: str,
    clears: bool,
) -> None:
    result = run_preemption(build(nodes, placed), preemptor)
    assert isinstance(result, PreemptionFailure)
    assert (str(result), result.clears_nomination, result.code) == (message, clears, Code.UNSCHEDULABLE)
    assert result.message.endswith(result.post_filter_message)


def test_an_over_large_request_on_one_node_leaves_the_others_resolvable() -> None:
    # n2: 2 cpu > 1 allocatable is unresolvable there; n1 (a priority-100 pod) and n3
    # (low, 4 cpu) are only short, as kube codes each node: evicting low on n3 helps.
    state = build(
        [make_node("n1", cpu="2"), make_node("n2", cpu="1"), make_node("n3")],
        [at(pod("high", 100, cpu="2"), "n1"), at(pod("low", 1, cpu="4"), "n3")],
    )
    result = run_preemption(state, PREEMPTOR)
    assert isinstance(result, PreemptionOutcome), str(result)
    assert (result.node, [v.name for v in result.victims]) == ("n3", ["low"])


@pytest.mark.parametrize(
    ("extra_node", "expected"),
    [
        pytest.param(
            True,
            PreemptionOutcome("n2", (pod("v2", 1, cpu="4"),), 0),
            id="another node with victims wins",
        ),
        pytest.param(
            False,
            'preemption: expected at least one victim pod on node "n1"',
            id="alone, it is an error",
        ),
    ],
)
def test_a_node_needing_no_victims_is_not_a_candidate(extra_node: bool, expected: object) -> None:
    # v1.36: the filters said n1 was full (v 1 cpu + gone 2 cpu + 2 > 4); "gone" left
    # before preemption ran, and the pod now fits beside v (1 + 2 <= 4) with no victim.
    # DryRunPreemption makes that an error on n1, not a winning candidate (kube 1.18's
    # pickOneNodeForPreemption returned such a node at once; v1.36 has no such rule).
    nodes = [make_node("n1"), *([make_node("n2")] if extra_node else [])]
    placed = [at(pod("v", 1, cpu="1"), "n1"), at(pod("gone", 1, cpu="2"), "n1")]
    if extra_node:
        placed.append(at(pod("v2", 1, cpu="4"), "n2"))
    state = build(nodes, placed)
    statuses = filter_with_nominated_pods(state, FILTERS, PREEMPTOR)
    state.remove("default/gone")
    before = snapshot(state)
    result = preempt(state, FILTERS, PREEMPTOR, statuses, np.random.default_rng(0), now=NOW)
    assert snapshot(state) == before
    if isinstance(expected, PreemptionOutcome):
        assert result == expected
    else:
        assert isinstance(result, PreemptionFailure)
        assert (result.post_filter_message, result.code) == (expected, Code.ERROR)


def test_select_victims_on_node_restores_the_gpu_state_exactly() -> None:
    # Shares on GPUs 1 and 0 (placed in that order); a whole GPU evicts the one on GPU 0.
    state = build(
        [make_node("g1", gpus=2, model="T4")],
        [
            at(pod("s2", 2, gpus=1, gpu_milli=600), "g1", 1),
            at(pod("s1", 1, gpus=1, gpu_milli=300), "g1", 0),
        ],
    )
    before = snapshot(state)
    result = select_victims_on_node(state, FILTERS, pod("whole", 10, gpus=1), "g1", now=NOW)
    assert snapshot(state) == before
    assert isinstance(result, Victims)
    assert [v.name for v in result.pods] == ["s1"]
    assert [p.gpu_indices for p in state.placements.values()] == [(1,), (0,)]


@pytest.mark.parametrize(
    ("placed", "expected"),
    [
        pytest.param(
            [at(pod("high", 10, cpu="4"), "n1")],
            Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (NO_VICTIMS,)),
            id="no lower-priority pod",
        ),
        pytest.param(
            [at(pod("high", 10, cpu="3"), "n1"), at(pod("low", 1, cpu="1"), "n1")],
            Status(Code.UNSCHEDULABLE, ("Insufficient cpu",), "NodeResourcesFit"),
            # Without low: 3 + 2 > 4 still.
            id="does not fit with every victim gone",
        ),
    ],
)
def test_select_victims_on_node_fails(
    placed: list[tuple[Pod, str, tuple[int, ...]]], expected: Status
) -> None:
    state = build([make_node("n1")], placed)
    before = snapshot(state)
    assert select_victims_on_node(state, FILTERS, PREEMPTOR, "n1", now=NOW) == expected
    assert snapshot(state) == before


@pytest.mark.parametrize(
    ("offset", "expected"),
    [
        pytest.param(0, ["n2", "n1"], id="a violating candidate does not end the search"),
        pytest.param(1, ["n2"], id="a clean candidate ends it"),
    ],
)
def test_dry_run_stops_at_enough_candidates(offset: int, expected: list[str]) -> None:
    # One candidate wanted. n1's only victim violates its budget; n2's and n3's do not.
    # From n1: n1 (violating, kept), n2 (clean: 2 >= 1, stop); n3 never tried.
    state = build(
        [make_node("n1"), make_node("n2"), make_node("n3")],
        [
            at(pod("db", 1, cpu="4", labels={"app": "db"}), "n1"),
            at(pod("web", 1, cpu="4"), "n2"),
            at(pod("api", 1, cpu="4"), "n3"),
        ],
    )
    before = snapshot(state)
    candidates, statuses = dry_run_preemption(
        state, FILTERS, PREEMPTOR, [0, 1, 2], [budget(0)], offset, 1, now=NOW
    )
    assert [c.node for c in candidates] == expected
    assert statuses == {}
    assert snapshot(state) == before


def victim(name: str, priority: int, start_time: str | None = None) -> Pod:
    return pod(name, priority, start_time=start_time)


PICKS = [
    pytest.param(
        [Candidate("n1", (victim("a", 1),), 1), Candidate("n2", (victim("b", 5),), 0)],
        "n2",
        id="fewest PDB violations",
    ),
    pytest.param(
        [Candidate("n1", (victim("a", 5), victim("b", 1)), 0), Candidate("n2", (victim("c", 3),), 0)],
        "n2",
        # Highest victim priority 5 vs 3.
        id="lowest highest-victim priority",
    ),
    pytest.param(
        [
            Candidate("n1", (victim("a", 3), victim("b", 3)), 0),
            Candidate("n2", (victim("c", 3), victim("d", 1)), 0),
        ],
        "n2",
        # Sums 6 + 2^32 vs 4 + 2^32.
        id="smallest sum of priorities",
    ),
    pytest.param(
        [
            Candidate("n1", (victim("a", 0), victim("b", -MAX_INT32 - 1)), 0),
            Candidate("n2", (victim("c", 0),), 0),
        ],
        "n2",
        # Sums (0 + 2^31) + (-2^31 + 2^31) = 2^31 vs 2^31: fewest victims.
        id="fewest victims",
    ),
    pytest.param(
        [Candidate("n1", (victim("a", 2, JAN),), 0), Candidate("n2", (victim("b", 2, MAY),), 0)],
        "n2",
        id="latest start of the earliest top-priority victim",
    ),
    pytest.param(
        [Candidate("n1", (victim("a", 2, JAN),), 0), Candidate("n2", (victim("b", 2),), 0)],
        "n2",
        # Not started: counts as now (June), later than January.
        id="a victim not started counts as starting now",
    ),
    pytest.param(
        [
            Candidate("n1", (victim("a", 2, MAY), victim("b", 1, JAN)), 0),
            Candidate("n2", (victim("c", 2, JAN), victim("d", 1, MAY)), 0),
        ],
        "n1",
        # Only the priority-2 victims' starts count: May (n1) vs January (n2).
        id="start time of the highest-priority victims only",
    ),
    pytest.param(
        [Candidate("n1", (victim("a", 2, MAY),), 0), Candidate("n2", (victim("b", 2, MAY),), 0)],
        "n1",
        id="all equal: the first",
    ),
    pytest.param([], None, id="no candidates"),
]


@pytest.mark.parametrize(("candidates", "expected"), PICKS)
def test_pick_one_node_for_preemption(candidates: list[Candidate], expected: str | None) -> None:
    picked = pick_one_node_for_preemption(candidates, NOW)
    assert (picked.node if picked else None) == expected


@pytest.mark.parametrize(
    ("pods", "pdbs", "violating"),
    [
        pytest.param(["a", "b"], [budget(1)], ["b"], id="one allowed: the second violates"),
        pytest.param(
            ["a"], [budget(0, disrupted_pods=frozenset({"a"}))], [], id="already disrupted: not again"
        ),
        pytest.param(["a"], [budget(0, LabelSelector())], [], id="an empty selector matches nothing"),
        pytest.param(
            ["a"],
            [PodDisruptionBudget("default", "none", None, 0)],
            [],
            id="no selector matches nothing",
        ),
        pytest.param(
            ["a"],
            [PodDisruptionBudget("other", "db", LabelSelector((("app", "db"),)), 0)],
            [],
            id="another namespace",
        ),
        pytest.param(
            ["unlabelled"],
            [budget(0, LabelSelector((), (Requirement("app", "DoesNotExist"),)))],
            [],
            id="a pod without labels matches no budget",
        ),
        pytest.param(["a"], [budget(5), budget(0)], ["a"], id="one budget out of room is enough"),
    ],
)
def test_split_by_pdb_violation(
    pods: list[str], pdbs: list[PodDisruptionBudget], violating: list[str]
) -> None:
    members = [pod(name, 1, labels={} if name == "unlabelled" else {"app": "db"}) for name in pods]
    bad, good = split_by_pdb_violation(members, pdbs)
    assert [p.name for p in bad] == violating
    assert [p.name for p in bad + good] == sorted(pods, key=lambda n: (n not in violating, pods.index(n)))


@pytest.mark.parametrize(
    ("preemptor", "others", "nominated_code", "expected"),
    [
        pytest.param(
            pod("p", 10, preemption_policy="Never"), [], None, (False, NOT_ELIGIBLE_NEVER), id="Never"
        ),
        pytest.param(pod("p", 10), [], None, (True, ""), id="default policy"),
        pytest.param(
            pod("p", 10, nominated_node_name="n1"),
            [pod("t", 1, deletion_timestamp=MAY, preempted_by_scheduler=True)],
            None,
            (False, NOT_ELIGIBLE_TERMINATING),
            id="a victim still terminating on the nominated node",
        ),
        pytest.param(
            pod("p", 10, nominated_node_name="n1"),
            [pod("t", 1, deletion_timestamp=MAY)],
            None,
            (True, ""),
            id="terminating for another reason",
        ),
        pytest.param(
            pod("p", 10, nominated_node_name="n1"),
            [pod("t", 10, deletion_timestamp=MAY, preempted_by_scheduler=True)],
            None,
            (True, ""),
            id="terminating pod of equal priority",
        ),
        pytest.param(
            pod("p", 10, nominated_node_name="n1"),
            [pod("t", 1, deletion_timestamp=MAY, preempted_by_scheduler=True)],
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            (True, ""),
            id="nominated node now unresolvable: preempt again",
        ),
    ],
)
def test_pod_eligible_to_preempt_others(
    preemptor: Pod, others: list[Pod], nominated_code: Code | None, expected: tuple[bool, str]
) -> None:
    state = build([make_node("n1")], [at(p, "n1") for p in others])
    assert pod_eligible_to_preempt_others(preemptor, state, nominated_code) == expected


@pytest.mark.parametrize(
    ("nodes", "percentage", "absolute", "expected"),
    [
        pytest.param(10, 10, 100, 10, id="fewer nodes than 100: all"),
        pytest.param(500, 10, 100, 100, id="10% of 500 = 50 < 100"),
        pytest.param(5000, 10, 100, 500, id="10% of 5000 = 500"),
        pytest.param(55, 50, 10, 27, id="50% of 55 = 27 (integer division)"),
        pytest.param(5, 10, 0, 0, id="10% of 5 = 0 and no minimum"),
    ],
)
def test_calculate_num_candidates(nodes: int, percentage: int, absolute: int, expected: int) -> None:
    assert calculate_num_candidates(nodes, PreemptionArgs(percentage, absolute)) == expected


def test_the_offset_is_random_only_when_some_nodes_are_left_out() -> None:
    args = PreemptionArgs()
    assert offset_and_num_candidates(100, args, np.random.default_rng(1)) == (0, 100)
    draw = int(np.random.default_rng(1).integers(5000))
    assert offset_and_num_candidates(5000, args, np.random.default_rng(1)) == (draw, 500)


@pytest.mark.parametrize(
    ("percentage", "absolute", "field"),
    [
        (101, 100, "minCandidateNodesPercentage"),
        (10, -1, "minCandidateNodesAbsolute"),
        (0, 0, "minCandidateNodesPercentage, minCandidateNodesAbsolute"),
    ],
)
def test_bad_preemption_args(percentage: int, absolute: int, field: str) -> None:
    with pytest.raises(SchedulerInputError) as raised:
        PreemptionArgs(percentage, absolute)
    assert raised.value.field == field


def test_pod_fields_preemption_reads() -> None:
    parsed = make_pod(
        "p",
        preemption_policy="Never",
        nominated_node_name="n1",
        start_time="2024-01-01T00:00:01.5Z",
        deletion_timestamp=MAY,
        preempted_by_scheduler=True,
    )
    assert (parsed.preemption_policy, parsed.nominated_node_name, parsed.terminating) == ("Never", "n1", True)
    assert parsed.start_time == datetime.fromisoformat("2024-01-01T00:00:01.5+00:00").timestamp()
    assert parsed.preempted_by_scheduler
    plain = make_pod("p")
    assert (plain.preemption_policy, plain.nominated_node_name, plain.start_time, plain.terminating) == (
        "PreemptLowerPriority",
        "",
        None,
        False,
    )
    assert "status" not in pod_manifest("p")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        pytest.param({"spec": {"preemptionPolicy": "Sometimes"}}, "spec.preemptionPolicy", id="policy"),
        pytest.param({"status": {"startTime": "2024-01-01"}}, "status.startTime", id="date without time"),
        pytest.param({"status": {"startTime": "2024-13-01T00:00:00Z"}}, "status.startTime", id="month 13"),
        pytest.param({"status": {"nominatedNodeName": 3}}, "status.nominatedNodeName", id="node name"),
    ],
)
def test_bad_preemption_fields_name_the_field(change: dict[str, dict[str, Any]], field: str) -> None:
    manifest = pod_manifest("p")
    for part, values in change.items():
        manifest[part] = {**manifest.get(part, {}), **values}
    with pytest.raises(SchedulerInputError) as raised:
        pod_from_manifest(manifest)
    assert raised.value.field == field
