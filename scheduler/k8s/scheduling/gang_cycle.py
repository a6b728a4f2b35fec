"""A PodGroup's scheduling cycle in the running scheduler: its pending members taken
off the queue together and placed with ``framework.gang.place_gang``, each through
the runtime's own steps (decide, assume, bind or reject).

A gang that falls short, in a profile that runs DefaultPreemption, then gets its
PostFilter (``gang_post_filter``): the budgets are read, the whole gang's dry run
(``framework.gang_preemption``) runs on the cache as it is then, and either every
victim is evicted and each member nominated to its node (the gang is decided again
when the victims are gone, and the nominations keep other pods off the room), or no
one is evicted; each member's FailedScheduling says which, after the gang's message.
One dry run per group at a time."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Coroutine, Sequence
from typing import Any, Protocol

from scheduler.framework.gang import place_gang, quorum_shortfall
from scheduler.framework.gang_preemption import GangPreemption, GangPreemptionArgs, preempt_gang
from scheduler.framework.profile import Decision, NodeNarrowing
from scheduler.framework.status import unschedulable
from scheduler.k8s.scheduling.binding_cycle import BindingCycle
from scheduler.k8s.scheduling.cache import SchedulerCache
from scheduler.k8s.scheduling.gangs import GangIndex
from scheduler.k8s.scheduling.policy import ActiveProfile, PolicyManager
from scheduler.k8s.scheduling.preemptor import Preemptor
from scheduler.k8s.scheduling.queue import QueuedPod, SchedulingQueue
from scheduler.k8s.scheduling.reporting import Reporter
from scheduler.objects.pod import Pod

log = logging.getLogger(__name__)

# What a gang's waiting and failing members are unschedulable by (metrics, requeues):
# the plugin of scheduler-plugins whose PodGroups these are.
GANG_PLUGIN = "Coscheduling"


class SchedulerSteps(Protocol):
    """What a gang cycle uses of the runtime (``k8s.scheduling.runtime.SchedulerRuntime``)."""

    gangs: GangIndex
    queue: SchedulingQueue
    cache: SchedulerCache
    policy: PolicyManager
    preemptor: Preemptor
    reporter: Reporter

    def spawn(self, coroutine: Coroutine[Any, Any, None]) -> None: ...

    def decide(self, pod: Pod, active: ActiveProfile, narrow: NodeNarrowing | None = None) -> Decision: ...

    def observe_cycle(self, decision: Decision, started: float, active: ActiveProfile) -> None: ...

    def assume(self, decision: Decision) -> BindingCycle: ...

    def forget(self, cycle: BindingCycle) -> None: ...

    def accept(
        self,
        entry: QueuedPod,
        decision: Decision,
        started: float,
        active: ActiveProfile,
        cycle: BindingCycle,
    ) -> None: ...

    def reject(
        self,
        entry: QueuedPod,
        decision: Decision,
        active: ActiveProfile,
        started: float,
        gang_message: str = "",
        *,
        report: bool = True,
    ) -> None: ...


def schedule_gang(runtime: SchedulerSteps, entry: QueuedPod, group_key: str, started: float) -> None:
    """One cycle for the whole group ``group_key`` that ``entry``'s pod belongs to."""
    pod = entry.pod
    group = runtime.gangs.groups.get(group_key)
    members = runtime.gangs.members.get(group_key, set())
    waits = f"PodGroup {group_key} not found" if group is None else quorum_shortfall(pod, group, len(members))
    if group is None or waits:
        # Coscheduling's PreFilter: the pod waits, unschedulable, reported in its words.
        waiting = Decision(pod, unschedulable(GANG_PLUGIN, waits))
        active = runtime.policy.profile_for(pod.scheduler_name) or runtime.policy.active
        runtime.reject(entry, waiting, active, started, gang_message=waits)
        return
    entries = {pod.key: entry}
    for key in sorted(members - {pod.key}):
        sibling = runtime.queue.take(key)
        if sibling is not None:
            entries[key] = sibling
    state = runtime.cache.state
    placed_before = [
        state.node_index[state.placements[key].node]
        for key in members
        if key in state.placements and key not in entries
    ]
    profiles = {
        key: runtime.policy.profile_for(queued.pod.scheduler_name) or runtime.policy.active
        for key, queued in entries.items()
    }
    held: dict[str, BindingCycle] = {}

    def decide(member: Pod, narrow: NodeNarrowing | None) -> Decision:
        decision = runtime.decide(member, profiles[member.key], narrow)
        runtime.observe_cycle(decision, started, profiles[member.key])
        return decision

    def assume(decision: Decision) -> None:
        held[decision.pod.key] = runtime.assume(decision)

    def forget(decision: Decision) -> None:
        runtime.forget(held.pop(decision.pod.key))

    ordered = [entries[key].pod for key in sorted(entries)]
    outcome = place_gang(state, group, ordered, placed_before, decide, assume, forget)
    for decision in outcome.placed:
        key = decision.pod.key
        runtime.accept(entries[key], decision, started, profiles[key], held[key])
    message = "" if outcome.quorum else outcome.rejection()
    if message:
        log.info("%s", message)
    active = profiles[pod.key]
    in_flight = f"gang:{group_key}"
    preempts = bool(message) and active.profile.preemption is not None
    preempts = preempts and in_flight not in runtime.preemptor.in_flight
    for decision in (*outcome.failed, *outcome.given_back):
        key = decision.pod.key
        runtime.reject(
            entries[key], decision, profiles[key], started, gang_message=message, report=not preempts
        )
    if preempts:
        runtime.preemptor.in_flight.add(in_flight)
        runtime.spawn(
            gang_post_filter(
                runtime, group_key, [d.pod for d in outcome.failed + outcome.given_back], message, active
            )
        )


async def gang_post_filter(
    runtime: SchedulerSteps, group_key: str, pods: Sequence[Pod], message: str, active: ActiveProfile
) -> None:
    """The gang's PostFilter (see the module's docstring); ``runtime.preemptor.in_flight``
    holds ``gang:<group>`` until it is done."""
    try:
        outcome = await _gang_dry_run(runtime, group_key, pods, active)
        if isinstance(outcome, str):
            for pod in pods:
                await runtime.reporter.failed(pod, f"{message} {outcome}")
            return
        for pod, node in outcome.nominations:
            runtime.cache.nominate(dataclasses.replace(pod, nominated_node_name=node))
        for other in outcome.nominations_to_clear:
            runtime.cache.nominate(dataclasses.replace(other, nominated_node_name=""))
        victims = ", ".join(e.victim.key for e in outcome.evictions)
        reports = [
            runtime.reporter.failed(
                pod, f"{message} preemption: the gang evicts {victims}", nominated_node=node
            )
            for pod, node in outcome.nominations
        ]
        await asyncio.gather(runtime.preemptor.carry_out_gang(outcome), *reports)
    finally:
        runtime.preemptor.in_flight.discard(f"gang:{group_key}")


async def _gang_dry_run(
    runtime: SchedulerSteps, group_key: str, pods: Sequence[Pod], active: ActiveProfile
) -> GangPreemption | str:
    """The whole gang's dry run on the cache once the budgets are read."""
    preemptor = runtime.preemptor
    state = runtime.cache.state
    may_evict = any(
        placed.pod.priority < max(p.priority for p in pods) for placed in state.placements.values()
    )
    if not may_evict:
        return "preemption: 0 lower-priority pods to evict"
    budgets = await preemptor.budgets()
    group = runtime.gangs.groups.get(group_key)
    if group is None:
        return f"preemption: PodGroup {group_key} not found"
    members = runtime.gangs.members.get(group_key, set())
    pending = [p for p in pods if p.key not in state.placements and p.key in members]
    placed_before = [
        state.node_index[state.placements[key].node] for key in members if key in state.placements
    ]
    gang = {p.key for p in pending}
    how = GangPreemptionArgs(
        filters=lambda member: (runtime.policy.profile_for(member.scheduler_name) or active).profile.filters,
        rng=runtime.policy.rng,
        pdbs=budgets,
        nominated=[p for key, p in runtime.cache.nominated.items() if key not in gang],
        args=active.profile.preemption,
        namespace_labels=runtime.cache.namespace_labels,
    )

    def decide(member: Pod, narrow: NodeNarrowing | None) -> Decision:
        profile = runtime.policy.profile_for(member.scheduler_name) or active
        return runtime.decide(member, profile, narrow)

    return preempt_gang(state, group, pending, placed_before, decide, how)
