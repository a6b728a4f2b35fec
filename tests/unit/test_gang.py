"""Table tests for gang scheduling's pure core (``framework.gang``) and the PodGroup
object: all or nothing, members already placed count, GPU gangs kept together.

Every row runs ``place_gang`` on a state with the kube default profile (its
LeastAllocated score spreads pods, so where a GPU gang stays together the locality
did it) and states which members were placed where, or that none was and the state
is exactly as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from scheduler.errors import SchedulerInputError
from scheduler.framework.gang import GangOutcome, place_gang, quorum_shortfall
from scheduler.framework.profile import Decision, NodeNarrowing, schedule_pod
from scheduler.objects.node import Node
from scheduler.objects.pod import Pod
from scheduler.objects.pod_group import (
    CORE_GROUP,
    POD_GROUP_LABEL,
    PodGroup,
    core_pod_group_from_manifest,
    pod_group_from_manifest,
    pod_group_key,
)
from scheduler.objects.topology import RACK_LABEL
from scheduler.plugins.profiles import build_profile
from scheduler.state.cluster_state import ClusterState
from tests.builders import make_node, make_pod, make_state

PROFILE = build_profile("default")


def worker(i: int, *, gpus: int = 1, cpu: str = "1") -> Pod:
    return make_pod(f"w{i}", cpu=cpu, gpus=gpus, labels={POD_GROUP_LABEL: "job"})


def rack(name: str, which: str, gpus: int = 2) -> Node:
    return make_node(name, cpu="16", memory="64Gi", gpus=gpus, labels={RACK_LABEL: which})


@dataclass
class GangCase:
    name: str
    nodes: Sequence[Node]
    members: Sequence[Pod]
    min_member: int
    # Members placed before this cycle, and where.
    before: Sequence[tuple[Pod, str]] = ()
    # Node of each member placed (by pod name); empty: none was.
    placed: dict[str, str] = field(default_factory=dict)
    # Members that found a place and gave it back, and those that found none.
    given_back: int = 0
    failed: int = 0


CASES = [
    GangCase(
        # 3 nodes x 2 GPUs = 6 GPUs for 8 one-GPU workers: 6 fit, 2 do not, none stays.
        "room for 6 of 8 binds none",
        [rack("n1", "a"), rack("n2", "a"), rack("n3", "b")],
        [worker(i) for i in range(8)],
        min_member=8,
        given_back=6,
        failed=2,
    ),
    GangCase(
        # 4 nodes x 2 GPUs: all 8 fit; locality fills a node before the next (n1 first
        # by name order of the members, the spread score would alternate).
        "room for all 8 places all 8, two per node",
        [rack("n1", "a"), rack("n2", "a"), rack("n3", "b"), rack("n4", "b")],
        [worker(i) for i in range(8)],
        min_member=8,
        placed={
            "w0": "*",
            "w1": "=w0",
            "w2": "*",
            "w3": "=w2",
            "w4": "*",
            "w5": "=w4",
            "w6": "*",
            "w7": "=w6",
        },
    ),
    GangCase(
        # minMember 6 of 8 members, 6 GPUs: the 6 that fit stay, 2 fail on their own.
        "minMember below the members: the quorum binds",
        [rack("n1", "a"), rack("n2", "a"), rack("n3", "b")],
        [worker(i) for i in range(8)],
        min_member=6,
        placed={f"w{i}": "?" for i in range(6)},
        failed=2,
    ),
    GangCase(
        # 2 members placed before count: 6 pending need 6 of 8, and 6 GPUs are left.
        "members placed before count towards minMember",
        [rack("n1", "a", gpus=4), rack("n2", "a", gpus=2), rack("n3", "b", gpus=2)],
        [worker(i) for i in range(2, 8)],
        min_member=8,
        before=[(worker(0), "n1"), (worker(1), "n1")],
        placed={f"w{i}": "?" for i in range(2, 8)},
    ),
    GangCase(
        # w0 holds a1's 2 GPUs; a2 (rack a) and b1 (rack b) are empty and score alike:
        # the rest of the gang goes to a2, in w0's rack.
        "a GPU gang stays in its rack",
        [rack("a1", "a"), rack("a2", "a"), rack("b1", "b")],
        [worker(1), worker(2)],
        min_member=3,
        before=[(worker(0, gpus=2), "a1")],
        placed={"w1": "a2", "w2": "a2"},
    ),
    GangCase(
        # A gang without GPUs is placed as any pods: LeastAllocated spreads it
        # (2 of 16 cores on the node it took, 0 on the other: the other wins).
        "a gang without GPUs spreads as the profile scores",
        [rack("a1", "a", gpus=0), rack("a2", "a", gpus=0)],
        [worker(i, gpus=0, cpu="2") for i in range(2)],
        min_member=2,
        placed={"w0": "*", "w1": "!w0"},
    ),
]


def snapshot(state: ClusterState) -> tuple[Any, ...]:
    return (
        dict(state.placements),
        state.requested.copy().tolist(),
        state.gpu_free_milli.copy().tolist(),
    )


def run(case: GangCase) -> tuple[GangOutcome, ClusterState, tuple[Any, ...]]:
    state = make_state(case.nodes, case.before)
    before = snapshot(state)
    rng = np.random.default_rng(7)
    group = PodGroup("default", "job", case.min_member)

    def decide(pod: Pod, narrow: NodeNarrowing | None) -> Decision:
        return schedule_pod(state, pod, PROFILE, rng, narrow=narrow)

    def assume(decision: Decision) -> None:
        state.place(decision.pod, decision.node, decision.gpu_indices)

    def forget(decision: Decision) -> None:
        state.remove(decision.pod.key)

    rows = [state.node_index[node] for _, node in case.before]
    outcome = place_gang(state, group, case.members, rows, decide, assume, forget)
    return outcome, state, before


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_place_gang(case: GangCase) -> None:
    outcome, state, before = run(case)
    where = {d.pod.name: d.node for d in outcome.placed}
    assert sorted(where) == sorted(case.placed)
    for name, expected in case.placed.items():
        if expected.startswith("="):  # on the same node as another member
            assert where[name] == where[expected[1:]], where
        elif expected.startswith("!"):
            assert where[name] != where[expected[1:]], where
        elif expected not in ("*", "?"):
            assert where[name] == expected, where
        assert state.placements[f"default/{name}"].node == where[name]
    assert len(outcome.given_back) == case.given_back
    assert len(outcome.failed) == case.failed
    assert outcome.quorum == bool(case.placed)
    if not case.placed:
        assert snapshot(state) == before  # every place given back


def test_rejection_names_the_group_the_count_and_the_first_failure() -> None:
    outcome, _, _ = run(CASES[0])
    message = outcome.rejection()
    assert message.startswith(
        "PodGroup default/job gets rejected: 6 of the 8 pods it needs could be placed at once "
        "(minMember 8); none is bound. Pod w6: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    ), message


@pytest.mark.parametrize(
    ("members", "min_member", "expected"),
    [
        (8, 8, ""),
        (9, 8, ""),
        (
            5,
            8,
            "pre-filter pod w0 cannot find enough sibling pods, "
            "current pods number: 5, minMember of group: 8",
        ),
    ],
)
def test_quorum_shortfall(members: int, min_member: int, expected: str) -> None:
    assert quorum_shortfall(worker(0), PodGroup("default", "job", min_member), members) == expected


def group_manifest(spec: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": "team", "name": "job"}, "spec": spec}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"minMember": 8, "scheduleTimeoutSeconds": 60}, PodGroup("team", "job", 8, 60)),
        ({}, PodGroup("team", "job", 1)),  # the CRD's default
        ({"minMember": 2, "minResources": {"cpu": "4"}}, PodGroup("team", "job", 2)),
        ({"minMember": 0}, "podgroup team/job: spec.minMember: must be at least 1, got 0"),
        ({"minMember": "8"}, "podgroup team/job: spec.minMember: expected an integer, got '8'"),
        (
            {"minMember": 2, "scheduleTimeoutSeconds": -1},
            "podgroup team/job: spec.scheduleTimeoutSeconds: must not be negative, got -1",
        ),
        ([], "podgroup team/job: spec: expected an object, got list"),
    ],
)
def test_pod_group_from_manifest(spec: Any, expected: PodGroup | str) -> None:
    if isinstance(expected, PodGroup):
        assert pod_group_from_manifest(group_manifest(spec)) == expected
        return
    with pytest.raises(SchedulerInputError) as raised:
        pod_group_from_manifest(group_manifest(spec))
    assert str(raised.value) == expected


@pytest.mark.parametrize(
    ("labels", "scheduling_group", "expected"),
    [
        ({POD_GROUP_LABEL: "job"}, "", "team/job"),
        ({}, "", ""),
        (None, "", ""),
        ({POD_GROUP_LABEL: ""}, "", ""),
        # The Workload API's PodGroup, named in spec.schedulingGroup, comes first.
        ({}, "job", "scheduling.k8s.io:team/job"),
        ({POD_GROUP_LABEL: "other"}, "job", "scheduling.k8s.io:team/job"),
    ],
)
def test_pod_group_key(labels: dict[str, str] | None, scheduling_group: str, expected: str) -> None:
    assert pod_group_key("team", labels, scheduling_group) == expected


CORE = "podgroup.scheduling.k8s.io team/job"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"schedulingPolicy": {"gang": {"minCount": 4}}}, PodGroup("team", "job", 4, api=CORE_GROUP)),
        ({"schedulingPolicy": {"basic": {}}}, PodGroup("team", "job", 1, api=CORE_GROUP, gang=False)),
        (
            {"schedulingPolicy": {"basic": {}, "gang": {"minCount": 2}}},
            f"{CORE}: spec.schedulingPolicy: exactly one of basic and gang must be set",
        ),
        ({}, f"{CORE}: spec.schedulingPolicy: exactly one of basic and gang must be set"),
        (
            {"schedulingPolicy": {"gang": {}}},
            f"{CORE}: spec.schedulingPolicy.gang.minCount: must be at least 1, got 0",
        ),
        (
            {"schedulingPolicy": {"gang": {"minCount": "4"}}},
            f"{CORE}: spec.schedulingPolicy.gang.minCount: expected an integer, got '4'",
        ),
        (
            {"schedulingPolicy": {"gang": []}},
            f"{CORE}: spec.schedulingPolicy.gang: expected an object, got list",
        ),
        ({"schedulingPolicy": "gang"}, f"{CORE}: spec.schedulingPolicy: expected an object, got str"),
    ],
)
def test_core_pod_group_from_manifest(spec: Any, expected: PodGroup | str) -> None:
    if isinstance(expected, PodGroup):
        assert core_pod_group_from_manifest(group_manifest(spec)) == expected
        assert expected.key == "scheduling.k8s.io:team/job"
        return
    with pytest.raises(SchedulerInputError) as raised:
        core_pod_group_from_manifest(group_manifest(spec))
    assert str(raised.value) == expected
