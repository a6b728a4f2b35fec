"""PodDisruptionBudgets as preemption reads them, and what a victim is told."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, cast

import numpy as np
import pytest

from scheduler.errors import SchedulerInputError
from scheduler.framework.preemption import (
    PreemptionFailure,
    PreemptionOutcome,
    filter_with_nominated_pods,
    pod_eligible_to_preempt_others,
)
from scheduler.framework.profile import schedule_pod
from scheduler.k8s.client.api import KubeApi
from scheduler.k8s.scheduling.budgets import DisruptionBudgets, budget_from_manifest
from scheduler.k8s.scheduling.cache import SchedulerCache
from scheduler.k8s.scheduling.preemptor import (
    Preemptor,
    disruption_target,
    failed_scheduling_message,
)
from scheduler.objects.pod import Pod
from scheduler.plugins.profiles import build_profile
from tests.builders import make_pod, node_manifest, pod_manifest

IN_DB_OR_CACHE = {"key": "app", "operator": "In", "values": ["db", "cache"]}


def budget(spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    manifest: dict[str, Any] = {"metadata": {"namespace": "ml", "name": "guard"}, "spec": spec}
    if status is not None:
        manifest["status"] = status
    return manifest


@pytest.mark.parametrize(
    ("manifest", "labels", "matches", "allowed", "disrupted"),
    [
        pytest.param(
            budget({"selector": {"matchLabels": {"app": "db"}}}, {"disruptionsAllowed": 1}),
            {"app": "db"}, True, 1, frozenset(),
            id="matchLabels, one disruption allowed",
        ),
        pytest.param(
            budget(
                {"selector": {"matchExpressions": [IN_DB_OR_CACHE]}},
                {"disruptionsAllowed": 0, "disruptedPods": {"db-0": "2026-01-01T00:00:00Z"}},
            ),
            {"app": "cache"}, True, 0, frozenset({"db-0"}),
            id="matchExpressions, an eviction already granted",
        ),
        pytest.param(
            budget({"selector": {}}, {"disruptionsAllowed": 3}), {"app": "db"}, False, 3, frozenset(),
            id="an empty selector matches nothing (kube)",
        ),
        pytest.param(
            budget({"selector": {"matchLabels": {"app": "db"}}}), {"app": "db"}, True, 0, frozenset(),
            id="no status yet: nothing may be disrupted",
        ),
    ],
)  # fmt: skip
def test_budgets_are_read_as_preemption_needs_them(
    manifest: dict[str, Any], labels: dict[str, str], matches: bool, allowed: int, disrupted: frozenset[str]
) -> None:
    pdb = budget_from_manifest(manifest)
    assert pdb.matches(make_pod("p", namespace="ml", labels=labels)) is matches
    assert not pdb.matches(make_pod("p", namespace="other", labels=labels))
    assert (pdb.disruptions_allowed, pdb.disrupted_pods) == (allowed, disrupted)


def test_a_bad_budget_names_itself_and_the_field() -> None:
    with pytest.raises(SchedulerInputError) as caught:
        budget_from_manifest(
            budget({"selector": {"matchLabels": {"app": "db"}}}, {"disruptionsAllowed": "one"})
        )
    assert "poddisruptionbudget ml/guard" in str(caught.value)
    assert "status.disruptionsAllowed" in str(caught.value)


def test_a_victim_is_told_who_preempts_it_as_kube_tells_it() -> None:
    condition = disruption_target(make_pod("high"))
    assert {k: condition[k] for k in ("type", "status", "reason")} == {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
    }
    assert condition["message"] == "rl-scheduler: preempting to accommodate a higher priority pod"


def test_a_failed_preemption_is_reported_in_kubes_words() -> None:
    post = "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    failure = PreemptionFailure(f"0/2 nodes are available: 2 Insufficient cpu. {post}", post, True)
    assert failed_scheduling_message(failure) == (
        "0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )


class NoReads:
    """Stands in for the API: a decision must not read it (the budgets come from the watch)."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the decision called the API: {name}")


def guarded_db(allowed: int) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "default", "name": "db"},
        "spec": {"selector": {"matchLabels": {"app": "db"}}},
        "status": {"disruptionsAllowed": allowed},
    }


@pytest.mark.parametrize(
    ("priority", "policy", "budgets", "victims"),
    [
        # n1: db (3 of 4 cpu, app=db); n2: low (3 of 4 cpu); the pod asks 2 cpu. Both
        # nodes are candidates with one victim of priority 0; kube picks the node whose
        # victims violate the fewest budgets, then (all else equal) the first.
        pytest.param(10, "PreemptLowerPriority", [], ["db"], id="no budget: the first node's victim"),
        pytest.param(10, "PreemptLowerPriority", [guarded_db(1)], ["db"], id="db may go: it goes"),
        pytest.param(10, "PreemptLowerPriority", [guarded_db(0)], ["low"], id="db guarded: low goes"),
        pytest.param(
            10, "PreemptLowerPriority", [guarded_db(0), {"metadata": {"name": "bad"}, "spec": 1}], ["low"],
            id="an unreadable budget is left out, the others kept",
        ),
        pytest.param(0, "PreemptLowerPriority", [], None, id="none lower: no victims"),
        pytest.param(10, "Never", [], None, id="preemptionPolicy Never: no victims"),
    ],
)  # fmt: skip
def test_a_decision_reads_the_watched_budgets_and_nominates_at_once(
    priority: int, policy: str, budgets: list[dict[str, Any]], victims: list[str] | None
) -> None:
    cache = SchedulerCache("rl-scheduler")
    for node, name, labels in (("n1", "db", {"app": "db"}), ("n2", "low", {})):
        cache.on_node("ADDED", node_manifest(node, cpu="4"))
        placed = pod_manifest(name, cpu="3", labels=labels)
        placed["spec"]["nodeName"] = node
        cache.on_pod("ADDED", placed)
    watched = DisruptionBudgets()
    watched.replace(budgets)
    preemptor = Preemptor(cast(KubeApi, NoReads()), cache, np.random.default_rng(0), watched)
    incoming = make_pod("high", cpu="2", priority=priority, preemption_policy=policy)
    outcome = preemptor.decide(incoming, build_profile("default"), {})
    if victims is None:
        assert isinstance(outcome, PreemptionFailure)
        assert cache.nominated == {}
    else:
        assert isinstance(outcome, PreemptionOutcome)
        assert [v.name for v in outcome.victims] == victims
        assert cache.nominated["default/high"].nominated_node_name == outcome.node  # the room is kept at once


@pytest.mark.parametrize(
    ("peer_cpu", "peer_priority", "fits_somewhere"),
    [
        # n1 and n2 each hold a 3-cpu pod of priority 0; "early" is nominated to n1.
        pytest.param("1", 10, False, id="a peer of equal priority counted on n1"),
        pytest.param("1", 0, False, id="a lower-priority peer: not counted"),
        pytest.param("3", 10, False, id="a peer that fills n1"),
    ],
)  # fmt: skip
def test_post_filter_starts_from_the_cycles_statuses(
    peer_cpu: str, peer_priority: int, fits_somewhere: bool
) -> None:
    """The cycle's pass with nominated pods is the one PostFilter would run again: the
    decision carries it, and preemption decides the same from it as from its own pass."""
    decisions = []
    for reuse in (True, False):
        cache = SchedulerCache("rl-scheduler")
        for node in ("n1", "n2"):
            cache.on_node("ADDED", node_manifest(node, cpu="4"))
            placed = pod_manifest(f"low-{node}", cpu="3")
            placed["spec"]["nodeName"] = node
            cache.on_pod("ADDED", placed)
        early = make_pod("early", cpu=peer_cpu, priority=peer_priority)
        cache.nominate(dataclasses.replace(early, nominated_node_name="n1"))
        preemptor = Preemptor(cast(KubeApi, NoReads()), cache, np.random.default_rng(0))
        incoming = make_pod("high", cpu="2", priority=10)
        profile = build_profile("default")
        nominated = preemptor.nominated_besides(incoming)
        decision = schedule_pod(cache.state, incoming, profile, np.random.default_rng(0), {}, nominated)
        assert decision.scheduled is fits_somewhere
        fresh = filter_with_nominated_pods(cache.state, profile.filters, incoming, nominated)
        assert decision.node_statuses is not None
        assert decision.node_statuses.codes.tolist() == fresh.codes.tolist()
        assert decision.node_statuses.reason_counts == fresh.reason_counts
        assert decision.node_statuses.message == fresh.message == decision.message
        outcome = preemptor.decide(incoming, profile, {}, decision.node_statuses if reuse else None)
        decisions.append(outcome)
    assert decisions[0] == decisions[1]
    assert isinstance(decisions[0], PreemptionOutcome)


class EvictingApi:
    """Records the evictions; deleting ``refused`` fails as the API would (False)."""

    def __init__(self, refused: str = "") -> None:
        self.refused = refused
        self.calls: list[tuple[str, str]] = []

    async def patch_pod_status(self, pod: Pod, status: dict[str, Any], what: str) -> bool:  # noqa: ARG002
        self.calls.append(("patch " + what, pod.name))
        return True

    async def delete_pod(self, pod: Pod) -> bool:
        self.calls.append(("delete", pod.name))
        return pod.name not in self.refused.split(",")

    async def post_event(self, pod: Pod, *, reason: str, **_: Any) -> None:
        self.calls.append((reason, pod.name))


@pytest.mark.parametrize(
    ("refused", "carried_out", "events"),
    [
        pytest.param("", True, ["a", "b"], id="both deleted: each gets Preempted"),
        pytest.param("b", False, ["a"], id="b refused: no event for it, the pod is tried again"),
    ],
)
def test_carrying_out_says_whether_every_victim_was_deleted(
    refused: str, carried_out: bool, events: list[str]
) -> None:
    api = EvictingApi(refused)
    preemptor = Preemptor(cast(KubeApi, api), SchedulerCache("rl-scheduler"), np.random.default_rng(0))
    victims = (make_pod("a"), make_pod("b"))
    outcome = PreemptionOutcome(node="n1", victims=victims, num_pdb_violations=0)
    assert asyncio.run(preemptor.carry_out(make_pod("high"), outcome)) is carried_out
    assert sorted(name for what, name in api.calls if what == "Preempted") == events
    assert sorted(name for what, name in api.calls if what == "delete") == ["a", "b"]


@pytest.mark.parametrize(
    ("refused", "terminating", "eligible"),
    [
        pytest.param("", {"a", "b"}, False, id="both deleted: a preemption is under way on n1"),
        pytest.param("b", {"a"}, False, id="b refused: a is still terminating"),
        pytest.param("a,b", set(), True, id="both refused: nothing under way"),
    ],
)
def test_a_deleted_victim_is_terminating_in_the_cache_before_the_watch_says_so(
    refused: str, terminating: set[str], eligible: bool
) -> None:
    """Between a victim's deletion and its watch event the preemptor may be tried again;
    it must see the preemption under way on its node, not preempt elsewhere."""
    cache = SchedulerCache("rl-scheduler")
    cache.on_node("ADDED", node_manifest("n1", cpu="4"))
    for name in ("a", "b"):
        placed = pod_manifest(name, cpu="2")
        placed["spec"]["nodeName"] = "n1"
        cache.on_pod("ADDED", placed)
    api = EvictingApi(refused)
    preemptor = Preemptor(cast(KubeApi, api), cache, np.random.default_rng(0))
    placed_victims = tuple(cache.state.placements[f"default/{name}"].pod for name in ("a", "b"))
    high = make_pod("high", cpu="4", priority=10)
    outcome = PreemptionOutcome(node="n1", victims=placed_victims, num_pdb_violations=0)
    asyncio.run(preemptor.carry_out(high, outcome))
    now = {name for name in ("a", "b") if cache.state.placements[f"default/{name}"].pod.terminating}
    assert now == terminating
    assert all(cache.state.placements[f"default/{name}"].pod.preempted_by_scheduler for name in terminating)
    nominated = dataclasses.replace(high, nominated_node_name="n1")
    assert pod_eligible_to_preempt_others(nominated, cache.state)[0] is eligible
