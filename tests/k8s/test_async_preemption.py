"""Preemption in the runtime, as kube's async preemption: decided and nominated in the
pod's scheduling cycle on the watched budgets, the victims evicted in the background,
and a pod whose victim was not deleted tried again. The API is a recording stand-in."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from scheduler.k8s.scheduling.queue import QueueName
from scheduler.k8s.scheduling.runtime import SchedulerRuntime
from scheduler.objects.pod import Pod
from tests.builders import node_manifest, pod_manifest
from tests.k8s.test_runtime import RecordingApi, runtime_with, settle


@dataclass
class EvictingApi(RecordingApi):
    """Also records status patches and deletions; deleting ``refused`` fails."""

    refused: str = ""
    deleted: list[str] = field(default_factory=list)
    nominations: list[tuple[str, str | None]] = field(default_factory=list)

    async def patch_pod_status(self, pod: Pod, status: Any, what: str) -> bool:  # noqa: ARG002
        return True

    async def delete_pod(self, pod: Pod) -> bool:
        self.deleted.append(pod.name)
        return pod.name != self.refused

    async def set_pod_scheduled_condition(
        self, pod: Pod, *, reason: str, message: str, nominated_node: str | None = None
    ) -> None:
        await super().set_pod_scheduled_condition(pod, reason=reason, message=message)
        self.nominations.append((pod.key, nominated_node))


def placed(name: str, node: str, cpu: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    manifest = pod_manifest(name, cpu=cpu, labels=labels or {})
    manifest["spec"]["nodeName"] = node
    return manifest


def try_high(runtime: SchedulerRuntime) -> None:
    """The pod "high" (2 cpu, priority 10) arrives and is tried once."""
    incoming = pod_manifest("high", cpu="2")
    incoming["spec"]["priority"] = 10
    runtime.on_pod_event("ADDED", incoming)
    entry = runtime.queue.pop()
    assert entry is not None
    runtime.schedule_one(entry)


GUARD = {
    "metadata": {"namespace": "default", "name": "guard"},
    "spec": {"selector": {"matchLabels": {"app": "db"}}},
    "status": {"disruptionsAllowed": 0},
}


@pytest.mark.parametrize(
    ("budgets", "refused", "victim", "queued"),
    [
        # n1 holds db (3 of 4 cpu, app=db), n2 holds low (3 of 4 cpu); "high" asks 2 cpu.
        pytest.param([], "", "db", QueueName.UNSCHEDULABLE,
                     id="no budget: db goes; the pod waits for its deletion"),
        pytest.param([("ADDED", GUARD)], "", "low", QueueName.UNSCHEDULABLE,
                     id="a watched budget guards db: low goes"),
        pytest.param([("ADDED", GUARD), ("DELETED", GUARD)], "", "db", QueueName.UNSCHEDULABLE,
                     id="the budget deleted: db goes again"),
        pytest.param([], "db", "db", QueueName.BACKOFF,
                     id="db not deleted: the pod is tried again"),
    ],
)  # fmt: skip
def test_a_preemption_is_decided_in_the_cycle_and_carried_out_in_the_background(
    budgets: list[tuple[str, dict[str, Any]]], refused: str, victim: str, queued: QueueName
) -> None:
    async def body() -> None:
        api = EvictingApi(refused=refused)
        runtime = runtime_with(api, node_manifest("n1", cpu="4"), node_manifest("n2", cpu="4"))
        runtime.on_pod_event("ADDED", placed("db", "n1", "3", {"app": "db"}))
        runtime.on_pod_event("ADDED", placed("low", "n2", "3"))
        for event_type, manifest in budgets:
            runtime.on_budget_event(event_type, manifest)
        try_high(runtime)
        # Nominated in the cycle itself, before any API call was answered.
        node = runtime.cache.nominated["default/high"].nominated_node_name
        assert node == {"db": "n1", "low": "n2"}[victim]
        assert api.deleted == []
        assert "default/high" in runtime.preemptor.in_flight
        assert runtime.queue._pods["default/high"].where is QueueName.GATED  # not tried meanwhile
        await settle(runtime)
        assert api.deleted == [victim]
        assert api.nominations == [("default/high", node)]
        assert "default/high" not in runtime.preemptor.in_flight
        assert runtime.queue._pods["default/high"].where is queued

    asyncio.run(body())


@pytest.mark.parametrize(
    ("deletion_seen", "queued"),
    [(False, QueueName.UNSCHEDULABLE), (True, QueueName.BACKOFF)],
    ids=["the victim still placed: the pod waits", "its deletion seen meanwhile: tried again"],
)
def test_after_its_evictions_a_preemptor_waits_only_for_victims_still_placed(
    deletion_seen: bool, queued: QueueName
) -> None:
    async def body() -> None:
        api = EvictingApi()
        runtime = runtime_with(api, node_manifest("n1", cpu="4"))
        runtime.on_pod_event("ADDED", placed("low", "n1", "3"))
        try_high(runtime)
        if deletion_seen:  # the watch was faster than the answers
            runtime.on_pod_event("DELETED", placed("low", "n1", "3"))
        assert runtime.queue._pods["default/high"].where is QueueName.GATED
        await settle(runtime)
        assert api.deleted == ["low"]
        assert runtime.queue._pods["default/high"].where is queued

    asyncio.run(body())


def test_an_unreadable_budget_is_skipped_and_counted() -> None:
    runtime = runtime_with(RecordingApi())
    runtime.on_budget_event("ADDED", GUARD)
    runtime.on_budget_event("ADDED", {"metadata": {"namespace": "default", "name": "bad"}, "spec": 1})
    assert [b.name for b in runtime.budgets.all()] == ["guard"]
    samples = next(iter(runtime.metrics.unreadable_objects.collect())).samples
    counted = {s.labels["kind"]: s.value for s in samples if s.name.endswith("_total")}
    assert counted.get("poddisruptionbudget") == 1
