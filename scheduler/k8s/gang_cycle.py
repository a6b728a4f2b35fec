"""A PodGroup's scheduling cycle in the running scheduler: its pending members taken
off the queue together and placed with ``framework.gang.place_gang``, each through
the runtime's own steps (decide, assume, bind or reject)."""

from __future__ import annotations

import logging
from typing import Protocol

from scheduler.framework.gang import place_gang, quorum_shortfall
from scheduler.framework.profile import Decision, NodeNarrowing
from scheduler.framework.status import unschedulable
from scheduler.k8s.binding_cycle import BindingCycle
from scheduler.k8s.cache import SchedulerCache
from scheduler.k8s.gangs import GangIndex
from scheduler.k8s.policy import ActiveProfile, PolicyManager
from scheduler.k8s.queue import QueuedPod, SchedulingQueue
from scheduler.objects.pod import Pod

log = logging.getLogger(__name__)

# What a gang's waiting and failing members are unschedulable by (metrics, requeues):
# the plugin of scheduler-plugins whose PodGroups these are.
GANG_PLUGIN = "Coscheduling"


class SchedulerSteps(Protocol):
    """What a gang cycle uses of the runtime (``k8s.runtime.SchedulerRuntime``)."""

    gangs: GangIndex
    queue: SchedulingQueue
    cache: SchedulerCache
    policy: PolicyManager

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
    for decision in (*outcome.failed, *outcome.given_back):
        key = decision.pod.key
        runtime.reject(entries[key], decision, profiles[key], started, gang_message=message)
