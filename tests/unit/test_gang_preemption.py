"""Table tests for a gang's preemption dry run (``framework.gang_preemption``): victims
only where the gang has no room, chosen as DefaultPreemption chooses for one pod,
PodDisruptionBudgets respected, and nothing evicted unless the whole gang fits. After
every call the state is exactly what it was (``snapshot`` of test_preemption)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pytest

from scheduler.framework.gang_preemption import GangPreemption, GangPreemptionArgs, preempt_gang
from scheduler.framework.preemption_victims import PodDisruptionBudget
from scheduler.framework.profile import Decision, NodeNarrowing, schedule_pod
from scheduler.objects.node import Node
from scheduler.objects.pod import Pod
from scheduler.objects.pod_group import POD_GROUP_LABEL, PodGroup
from scheduler.objects.selectors import LabelSelector
from scheduler.plugins.profiles import build_profile
from tests.builders import make_node, make_pod, make_state
from tests.unit.test_preemption import NOW, snapshot

PROFILE = build_profile("default")


def worker(i: int, *, gpus: int = 1, priority: int = 100, **kwargs: str) -> Pod:
    return make_pod(f"w{i}", cpu="1", gpus=gpus, priority=priority, labels={POD_GROUP_LABEL: "job"}, **kwargs)


def resident(name: str, *, gpus: int, priority: int, app: str = "batch") -> Pod:
    return make_pod(name, cpu="1", gpus=gpus, priority=priority, labels={"app": app})


def gpu_node(name: str, gpus: int = 2) -> Node:
    return make_node(name, cpu="16", memory="64Gi", gpus=gpus)


@dataclass
class Case:
    name: str
    nodes: Sequence[Node]
    residents: Sequence[tuple[Pod, str]]
    members: Sequence[Pod]
    min_member: int
    victims: set[str] = field(default_factory=set)  # empty: no preemption
    nominated: dict[str, str] = field(default_factory=dict)  # member -> node ("*": any)
    why: str = ""  # the start of the reason when there is none
    pdbs: Sequence[PodDisruptionBudget] = ()


def no_disruption(app: str) -> PodDisruptionBudget:
    return PodDisruptionBudget("default", app, LabelSelector((("app", app),)), 0)


CASES = [
    Case(
        # n1 has 1 GPU free: w0 goes there; w1 fits nowhere. Evicting low (priority 0)
        # on n1 or mid (priority 5) on n2 both make room; the least important goes.
        "victims only for the member without room, the least important",
        [gpu_node("n1"), gpu_node("n2")],
        [(resident("low", gpus=1, priority=0), "n1"), (resident("mid", gpus=2, priority=5), "n2")],
        [worker(0), worker(1)],
        min_member=2,
        victims={"low"},
        nominated={"w0": "n1", "w1": "n1"},
    ),
    Case(
        # The same, but low is under a budget that allows no disruption: mid goes
        # (fewest PDB violations comes first).
        "a PodDisruptionBudget moves the eviction to another node",
        [gpu_node("n1"), gpu_node("n2")],
        [(resident("low", gpus=1, priority=0, app="db"), "n1"), (resident("mid", gpus=2, priority=5), "n2")],
        [worker(0), worker(1)],
        min_member=2,
        victims={"mid"},
        nominated={"w0": "n1", "w1": "n2"},
        pdbs=[no_disruption("db")],
    ),
    Case(
        # Four 1-GPU members on 2 x 2 GPUs, both nodes full of priority-0 pods: both go.
        "a gang that needs every node evicts every lower-priority pod",
        [gpu_node("n1"), gpu_node("n2")],
        [(resident("a", gpus=2, priority=0), "n1"), (resident("b", gpus=2, priority=0), "n2")],
        [worker(i) for i in range(4)],
        min_member=4,
        victims={"a", "b"},
        nominated={"w0": "*", "w1": "*", "w2": "*", "w3": "*"},
    ),
    Case(
        # Five members, four GPUs in the cluster: even with every victim gone it falls
        # short, so no one is evicted.
        "a gang that falls short even with every victim gone evicts no one",
        [gpu_node("n1"), gpu_node("n2")],
        [(resident("a", gpus=2, priority=0), "n1"), (resident("b", gpus=2, priority=0), "n2")],
        [worker(i) for i in range(5)],
        min_member=5,
        why="preemption: 0/2 nodes are available",
    ),
    Case(
        # Pods of the gang's priority or higher are never victims.
        "pods of equal or higher priority are never victims",
        [gpu_node("n1")],
        [(resident("peer", gpus=1, priority=100), "n1"), (resident("top", gpus=1, priority=200), "n1")],
        [worker(0)],
        min_member=1,
        why="preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
    ),
    Case(
        "a member with preemptionPolicy Never keeps the gang from preempting",
        [gpu_node("n1")],
        [(resident("low", gpus=2, priority=0), "n1")],
        [worker(0), worker(1, preemption_policy="Never")],
        min_member=2,
        why="preemption: not eligible due to preemptionPolicy=Never.",
    ),
    Case(
        "a gang with room evicts no one",
        [gpu_node("n1")],
        [],
        [worker(0), worker(1)],
        min_member=2,
        why="preemption: the gang fits without evicting anyone",
    ),
    Case(
        # minMember 2 of 3 members: w0 and w1 take a's place, w2 finds none (b is
        # priority 200): the quorum is met, a goes, w2 is not nominated.
        "the quorum is enough",
        [gpu_node("n1"), gpu_node("n2")],
        [(resident("a", gpus=2, priority=0), "n1"), (resident("b", gpus=2, priority=200), "n2")],
        [worker(i) for i in range(3)],
        min_member=2,
        victims={"a"},
        nominated={"w0": "n1", "w1": "n1"},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_preempt_gang(case: Case) -> None:
    state = make_state(case.nodes, case.residents)
    before = snapshot(state)
    rng = np.random.default_rng(0)

    def decide(pod: Pod, narrow: NodeNarrowing | None) -> Decision:
        return schedule_pod(state, pod, PROFILE, rng, narrow=narrow)

    how = GangPreemptionArgs(lambda _: PROFILE.filters, rng, pdbs=case.pdbs, now=NOW)
    outcome = preempt_gang(state, PodGroup("default", "job", case.min_member), case.members, [], decide, how)
    assert snapshot(state) == before
    if not case.victims:
        assert isinstance(outcome, str)
        assert outcome.startswith(case.why), outcome
        return
    assert isinstance(outcome, GangPreemption), outcome
    assert {victim.name for victim in outcome.victims} == case.victims
    where = {pod.name: node for pod, node in outcome.nominations}
    assert sorted(where) == sorted(case.nominated)
    for name, node in case.nominated.items():
        assert node in ("*", where[name]), where
    assert outcome.num_pdb_violations == 0
