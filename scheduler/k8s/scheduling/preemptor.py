"""DefaultPreemption through the API, as kube-scheduler's ``prepareCandidateAsync`` does it.

The decision is the core's (``scheduler.framework.preemption``), made in the pod's
scheduling cycle on the cache and on the PodDisruptionBudgets kept from their watch
(``scheduler.k8s.scheduling.budgets``): no API call. The pod's nomination is taken in the
cache at once (so the next pods leave the room to it); then, off the scheduling loop
(kube's async preemption, on by default since v1.33), each victim gets the
``DisruptionTarget`` condition, is deleted (only if it is still the pod of that UID) and
gets kube's ``Preempted`` event, and lower-priority pods nominated to the node lose their
nomination. The pod itself is decided again when its victims are gone (their deletion
is a cluster event) and goes to its nominated node if it fits there.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

import numpy as np

from scheduler.dra.node_filter import post_filter_message
from scheduler.framework.gang_preemption import GangPreemption
from scheduler.framework.preemption import (
    NodeStatuses,
    PreemptionFailure,
    PreemptionOutcome,
    filter_with_nominated_pods,
    preempt,
)
from scheduler.framework.preemption_victims import PodDisruptionBudget
from scheduler.framework.profile import Profile
from scheduler.k8s.client.api import KubeApi, now
from scheduler.k8s.scheduling.budgets import DisruptionBudgets
from scheduler.k8s.scheduling.cache import SchedulerCache
from scheduler.objects.pod import Pod

log = logging.getLogger(__name__)


def failed_scheduling_message(failure: PreemptionFailure, has_claims: bool = False) -> str:
    """The FailedScheduling message of a pod preemption did not help, as kube's: kube
    v1.36's default profile runs DynamicResources' PostFilter before DefaultPreemption
    and joins their messages with ", " (``has_claims``: the pod has resource claims;
    seen in the e2e parity tests against kube-scheduler)."""
    fit = failure.message.removesuffix(failure.post_filter_message).rstrip()
    return f"{fit} {post_filter_message(has_claims)}, {failure.post_filter_message}"


def disruption_target(pod: Pod) -> dict[str, Any]:
    """The condition kube-scheduler sets on a victim before deleting it."""
    return {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": f"{pod.scheduler_name}: preempting to accommodate a higher priority pod",
        "lastTransitionTime": now().strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


class Preemptor:
    def __init__(
        self,
        api: KubeApi,
        cache: SchedulerCache,
        rng: np.random.Generator,
        budgets: DisruptionBudgets | None = None,
    ) -> None:
        self.api = api
        self.cache = cache
        self.rng = rng
        # Kept from the budgets' watch by the runtime (``budgets.DisruptionBudgets``).
        self.disruption_budgets = budgets if budgets is not None else DisruptionBudgets()
        # Pods whose preemption is being decided or carried out: one at a time each.
        self.in_flight: set[str] = set()

    def nominated_besides(self, pod: Pod) -> list[Pod]:
        return [p for key, p in self.cache.nominated.items() if key != pod.key]

    async def budgets(self) -> list[PodDisruptionBudget]:
        """The budgets as the watch has them (a gang's dry run awaits this; no API call)."""
        return self.disruption_budgets.all()

    def decide(
        self,
        pod: Pod,
        profile: Profile,
        namespace_labels: Mapping[str, Mapping[str, str]],
        statuses: NodeStatuses | None = None,
    ) -> PreemptionOutcome | PreemptionFailure | None:
        """The PostFilter decision on the cache and the watched budgets; the nomination
        is taken in the cache before it returns. None when the pod fits somewhere now
        (the cluster changed since its filters ran: it is decided again). ``statuses``:
        the cycle's own pass with the nominated pods counted, on the cache as it is now
        (same cycle, nothing awaited since: kube's PostFilter reads the cycle's
        ``NodeToStatus`` too); the pass is run here when None."""
        state = self.cache.state
        budgets = self.disruption_budgets.all()
        nominated = self.nominated_besides(pod)
        if statuses is None:
            statuses = filter_with_nominated_pods(state, profile.filters, pod, nominated, namespace_labels)
        if statuses.feasible.size:
            return None
        outcome = preempt(
            state,
            profile.filters,
            pod,
            statuses,
            self.rng,
            pdbs=budgets,
            nominated=nominated,
            args=profile.preemption,
            namespace_labels=namespace_labels,
        )
        if isinstance(outcome, PreemptionOutcome):
            self.cache.nominate(dataclasses.replace(pod, nominated_node_name=outcome.node))
            for other in outcome.nominations_to_clear:
                self.cache.nominate(dataclasses.replace(other, nominated_node_name=""))
        elif outcome.clears_nomination:
            self.cache.nominated.pop(pod.key, None)
        return outcome

    async def carry_out(self, pod: Pod, outcome: PreemptionOutcome) -> bool:
        """Evict the victims (at once, as kube's parallel loop does) and clear the
        lower-priority nominations on the node. False when a victim was not deleted
        (the API said why; logged): the pod should be tried again."""
        log.info(
            "pod %s preempts %d pod(s) on %s: %s",
            pod.key,
            len(outcome.victims),
            outcome.node,
            ", ".join(v.key for v in outcome.victims),
        )
        deleted = await asyncio.gather(
            *(self._evict(pod, victim, outcome.node) for victim in outcome.victims),
            *(self._clear_nomination(other) for other in outcome.nominations_to_clear),
        )
        return all(deleted[: len(outcome.victims)])

    async def carry_out_gang(self, outcome: GangPreemption) -> None:
        """A gang's evictions, each for the member nominated to the victim's node."""
        log.info(
            "%d gang member(s) preempt %d pod(s): %s",
            len(outcome.nominations),
            len(outcome.evictions),
            ", ".join(f"{e.victim.key} on {e.node}" for e in outcome.evictions),
        )
        await asyncio.gather(
            *(self._evict(e.preemptor, e.victim, e.node) for e in outcome.evictions),
            *(self._clear_nomination(other) for other in outcome.nominations_to_clear),
        )

    async def _evict(self, pod: Pod, victim: Pod, node: str) -> bool:
        """True when the victim is deleted (or already gone)."""
        await self.api.patch_pod_status(victim, {"conditions": [disruption_target(pod)]}, "DisruptionTarget")
        deleted = await self.api.delete_pod(victim)
        if deleted:
            self._mark_terminating(victim)
            await self.api.post_event(
                victim,
                type_="Normal",
                reason="Preempted",
                action="Preempting",
                note=f"Preempted by pod {pod.uid} on node {node}",
                related=pod,
            )
        return deleted

    def _mark_terminating(self, victim: Pod) -> None:
        """The server has the victim terminating, with the DisruptionTarget condition,
        once its deletion is answered: the cache says so before the watch does. Else the
        preemptor, tried again in between, saw no preemption under way on its node
        (``pod_eligible_to_preempt_others``) and preempted again elsewhere: 8 of 1,000
        preemptors in PreemptionBasic at 1,000 nodes, in a trial where a preemptor's retry
        no longer waited for its FailedScheduling event to be posted (docs/throughput.md,
        "Events beside the binds")."""
        if self.cache.still_placed(victim) and not self.cache.state.placements[victim.key].pod.terminating:
            self.cache.state.amend(victim.key, terminating=True, preempted_by_scheduler=True)

    async def _clear_nomination(self, other: Pod) -> bool:
        return await self.api.patch_pod_status(other, {"nominatedNodeName": None}, "nominatedNodeName")
