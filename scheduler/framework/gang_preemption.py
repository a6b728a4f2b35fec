"""Preemption for a gang that cannot be placed whole: a dry run for the whole gang.

DefaultPreemption decides for one pod. A gang (``framework.gang``) needs room for
``minMember`` pods at once, and evicting for one member at a time would evict pods for
a gang that still falls short. So the dry run places the gang's pending members in
order on the state, as the gang cycle does, and a member that fits nowhere gets kube's
single-pod decision there and then (``preemption.preempt``: nodes the filters rejected
as resolvable, ``SelectVictimsOnNode`` with PodDisruptionBudgets respected, the
candidate with the fewest PDB violations, then the least important and fewest
victims); its victims leave the state before the next member is tried. A member that
fits without evicting anyone evicts no one, so victims are only taken where the gang
has no room, and each choice among them is DefaultPreemption's.

If the members placed so reach what the group still needs, the outcome nominates each
to its node and names the union of victims; otherwise no one is evicted and the reason
is the first member's preemption failure. A gang preempts only when every pending
member may (``preemptionPolicy`` not ``Never``). The state is unchanged on return.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from scheduler.framework.gang import DecideMember, gang_locality
from scheduler.framework.plugin import FilterPlugin
from scheduler.framework.preemption import (
    NOT_ELIGIBLE_NEVER,
    PreemptionArgs,
    PreemptionOutcome,
    filter_with_nominated_pods,
    preempt,
)
from scheduler.framework.preemption_victims import PodDisruptionBudget
from scheduler.objects.pod import Pod
from scheduler.objects.pod_group import PodGroup
from scheduler.state.cluster_state import ClusterState, IntArray, Placement


@dataclass(frozen=True)
class Eviction:
    """``victim`` leaves ``node`` for ``preemptor``, the member nominated there."""

    victim: Pod
    preemptor: Pod
    node: str


@dataclass(frozen=True)
class GangPreemption:
    """Evict, nominate each member to its node, and clear the nominations of
    lower-priority pods on the nodes freed (``nominations_to_clear``, as kube does)."""

    nominations: tuple[tuple[Pod, str], ...]
    evictions: tuple[Eviction, ...]
    num_pdb_violations: int
    nominations_to_clear: tuple[Pod, ...] = ()

    @property
    def victims(self) -> tuple[Pod, ...]:
        return tuple(eviction.victim for eviction in self.evictions)


@dataclass(frozen=True)
class GangPreemptionArgs:
    """What a member's single-pod decision needs besides the state."""

    filters: Callable[[Pod], Sequence[FilterPlugin]]
    rng: np.random.Generator
    pdbs: Sequence[PodDisruptionBudget] = ()
    nominated: Sequence[Pod] = ()
    args: PreemptionArgs | None = None
    namespace_labels: Mapping[str, Mapping[str, str]] | None = None
    now: float | None = None


@dataclass
class _DryRun:
    """Placements and removals on the state, all undone on exit, with the dicts' order
    and the node versions as they were (caches keyed on versions saw only new ones)."""

    state: ClusterState
    placed: list[str] = field(default_factory=list)
    removed: dict[str, Placement] = field(default_factory=dict)

    def place(self, pod: Pod, node: str, gpu_indices: tuple[int, ...]) -> None:
        self.state.place(pod, node, gpu_indices)
        self.placed.append(pod.key)

    def evict(self, victim: Pod) -> None:
        self.removed[victim.key] = self.state.remove(victim.key)

    def spare(self, victim: Pod) -> None:
        placement = self.removed.pop(victim.key)
        self.state.place(placement.pod, placement.node, usage=placement.gpu_use)


@contextmanager
def _dry_run(state: ClusterState) -> Iterator[_DryRun]:
    placements, on_node = state.placements, state.pods_on_node
    anti_affinity, affinity = state.anti_affinity_pod_keys, state.affinity_pod_keys
    versions = state.node_version.copy()
    state.placements = dict(placements)
    state.pods_on_node = [dict(pods) for pods in on_node]
    state.anti_affinity_pod_keys, state.affinity_pod_keys = set(anti_affinity), set(affinity)
    run = _DryRun(state)
    try:
        yield run
    finally:
        for key in reversed(run.placed):
            state.remove(key)
        for placement in run.removed.values():
            state.place(placement.pod, placement.node, usage=placement.gpu_use)
        state.placements, state.pods_on_node = placements, on_node
        state.anti_affinity_pod_keys, state.affinity_pod_keys = anti_affinity, affinity
        state.node_version[:] = versions


def _only(row: int) -> Callable[[IntArray], IntArray]:
    def narrow(nodes: IntArray) -> IntArray:
        kept = nodes[nodes == row]
        return kept if kept.size else nodes

    return narrow


def _single_pod(state: ClusterState, member: Pod, how: GangPreemptionArgs) -> PreemptionOutcome | str:
    """DefaultPreemption's decision for one member on the state as the dry run left it."""
    filters = how.filters(member)
    statuses = filter_with_nominated_pods(state, filters, member, how.nominated, how.namespace_labels)
    outcome = preempt(
        state,
        filters,
        member,
        statuses,
        how.rng,
        pdbs=how.pdbs,
        nominated=how.nominated,
        args=how.args,
        namespace_labels=how.namespace_labels,
        now=how.now,
    )
    return outcome if isinstance(outcome, PreemptionOutcome) else outcome.post_filter_message


def preempt_gang(
    state: ClusterState,
    group: PodGroup,
    members: Sequence[Pod],
    placed_before: Sequence[int],
    decide: DecideMember,
    how: GangPreemptionArgs,
) -> GangPreemption | str:
    """The dry run for ``members`` (pending, in order) of ``group``, whose members
    already placed are on the rows ``placed_before``; ``decide`` is the gang cycle's
    decision on the state as it is. Returns the preemption, or why there is none (a
    ``preemption: ...`` message)."""
    if any(member.preemption_policy == "Never" for member in members):
        return f"preemption: {NOT_ELIGIBLE_NEVER}"
    needed = max(0, group.min_member - len(placed_before))
    nominations: list[tuple[Pod, str]] = []
    evictions: dict[str, Eviction] = {}
    to_clear: dict[str, Pod] = {}
    violations = 0
    failures: list[str] = []
    with _dry_run(state) as run:
        rows = list(placed_before)
        for member in members:
            narrowing = gang_locality(state, rows) if member.gpu.count and rows else None
            decision = decide(member, narrowing)
            if not decision.scheduled:
                outcome = _single_pod(state, member, how)
                if isinstance(outcome, str):
                    failures.append(outcome)
                    continue
                for victim in outcome.victims:
                    run.evict(victim)
                decision = decide(member, _only(state.node_index[outcome.node]))
                if not decision.scheduled or decision.node != outcome.node:
                    for victim in outcome.victims:
                        run.spare(victim)
                    failures.append(
                        f"preemption: pod {member.name} does not fit {outcome.node} once it is free"
                    )
                    continue
                evictions.update((v.key, Eviction(v, member, outcome.node)) for v in outcome.victims)
                to_clear.update((p.key, p) for p in outcome.nominations_to_clear)
                violations += outcome.num_pdb_violations
            run.place(member, decision.node, decision.gpu_indices)
            nominations.append((member, decision.node))
            rows.append(decision.node_index)
    if len(nominations) < needed:
        return failures[0] if failures else "preemption: the gang still falls short"
    if not evictions:
        return "preemption: the gang fits without evicting anyone"
    members_keys = {member.key for member in members}
    clear = tuple(p for key, p in to_clear.items() if key not in members_keys)
    return GangPreemption(tuple(nominations), tuple(evictions.values()), violations, clear)
