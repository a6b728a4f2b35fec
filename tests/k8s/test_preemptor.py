"""PodDisruptionBudgets as preemption reads them, and what a victim is told."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import numpy as np
import pytest

from scheduler.errors import SchedulerInputError
from scheduler.framework.preemption import PreemptionFailure, PreemptionOutcome
from scheduler.k8s.client.api import KubeApi
from scheduler.k8s.scheduling.cache import SchedulerCache
from scheduler.k8s.scheduling.preemptor import (
    Preemptor,
    budget_from_manifest,
    disruption_target,
    failed_scheduling_message,
)
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


class CountingApi:
    """Stands in for the API's one read here: the budgets, counted."""

    def __init__(self) -> None:
        self.listings = 0

    async def list_pod_disruption_budgets(self) -> list[dict[str, Any]]:
        self.listings += 1
        return []


@pytest.mark.parametrize(
    ("priority", "policy", "listings", "victims"),
    [
        pytest.param(10, "PreemptLowerPriority", 1, ["low"], id="lower-priority pods placed: budgets read"),
        pytest.param(0, "PreemptLowerPriority", 0, None, id="none lower: no API call, no victims"),
        pytest.param(10, "Never", 0, None, id="preemptionPolicy Never: no API call"),
    ],
)
def test_budgets_are_read_only_when_there_are_victims_to_choose(
    priority: int, policy: str, listings: int, victims: list[str] | None
) -> None:
    cache = SchedulerCache("rl-scheduler")
    cache.on_node("ADDED", node_manifest("n1", cpu="4"))
    low = pod_manifest("low", cpu="3")
    low["spec"]["nodeName"] = "n1"
    cache.on_pod("ADDED", low)
    api = CountingApi()
    preemptor = Preemptor(cast(KubeApi, api), cache, np.random.default_rng(0))
    incoming = make_pod("high", cpu="2", priority=priority, preemption_policy=policy)
    outcome = asyncio.run(preemptor.decide(incoming, build_profile("default"), {}))
    assert api.listings == listings
    if victims is None:
        assert isinstance(outcome, PreemptionFailure)
        assert cache.nominated == {}
    else:
        assert isinstance(outcome, PreemptionOutcome)
        assert [v.name for v in outcome.victims] == victims
        assert cache.nominated["default/high"].nominated_node_name == "n1"  # the room is kept at once
