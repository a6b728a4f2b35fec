"""DefaultPreemption's dry run as it was before the per-node overlay: the state itself
changed and put back, every filter run whole on the node for each reprieve
(``select_victims_on_node``), candidates from ``dry_run_preemption``, the decision from
``preempt``, and nominated pods placed on their node for the pass with them
(``filter_with_nominated_pods``). The equivalence test (test_preemption_equivalence.py) and
benchmarks/preemption_cycle.py hold the dry run as it is to it."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from types import TracebackType

import numpy as np

from scheduler.framework.diagnosis import fit_error_message
from scheduler.framework.plugin import FilterPlugin
from scheduler.framework.preemption import (
    NOT_HELPFUL,
    Candidate,
    NodeStatuses,
    PreemptionArgs,
    PreemptionFailure,
    PreemptionOutcome,
    filter_without_nominated_pods,
    offset_and_num_candidates,
    pick_one_node_for_preemption,
    pod_eligible_to_preempt_others,
)
from scheduler.framework.preemption_victims import (
    NO_VICTIMS,
    NamespaceLabels,
    PodDisruptionBudget,
    Victims,
    add_nominated_pods,
    by_importance,
    node_status,
    nominated_peers,
    split_by_pdb_violation,
)
from scheduler.framework.status import Code, Status
from scheduler.objects.pod import Pod
from scheduler.state.cluster_state import ClusterState, Placement


def filter_with_nominated_pods(
    state: ClusterState,
    filters: Sequence[FilterPlugin],
    pod: Pod,
    nominated: Sequence[Pod] = (),
    namespace_labels: NamespaceLabels | None = None,
) -> NodeStatuses:
    """Every node filtered without nominated pods, then each node with peers filtered
    again with them placed on it; the pass with them decides where it fails."""
    statuses, base = filter_without_nominated_pods(state, filters, pod, namespace_labels)
    if not nominated or not base.pre_filter.ok:
        return statuses
    peers_by_node: defaultdict[str, list[Pod]] = defaultdict(list)
    for peer in nominated:
        if peer.nominated_node_name in state.node_index:
            peers_by_node[peer.nominated_node_name].append(peer)
    for node, peers in peers_by_node.items():
        if not nominated_peers(state, pod, node, peers):
            continue
        row = state.node_index[node]
        with add_nominated_pods(state, pod, node, peers):
            status = node_status(state, filters, pod, row, namespace_labels)
        if not status.ok:
            statuses.override(row, status)
    return statuses


def run_filters_with_nominated_pods(
    state: ClusterState,
    filters: Sequence[FilterPlugin],
    pod: Pod,
    row: int,
    nominated: Sequence[Pod] = (),
    namespace_labels: NamespaceLabels | None = None,
) -> Status:
    """``RunFilterPluginsWithNominatedPods`` on one node: with the node's nominated
    peers counted as placed, then, when they were some and the pod passed, once more
    without them; the pod fits only if it passes both (resources and anti-affinity fail
    more often with them, affinity without). The status is the first failing pass's."""
    node = state.nodes[row].name
    with add_nominated_pods(state, pod, node, nominated) as added:
        status = node_status(state, filters, pod, row, namespace_labels)
    if not added or not status.ok:
        return status
    return node_status(state, filters, pod, row, namespace_labels)


class _Eviction:
    """Pods taken off one node for a dry run and put back exactly on exit.

    The placement dicts and affinity key sets are swapped for copies while it runs (the
    originals, order included, come back untouched); the arrays are restored by placing
    the removed pods again with the GPU use they held, and the node's version is reset.
    """

    def __init__(self, state: ClusterState, row: int) -> None:
        self.state, self.row = state, row
        self.removed: dict[str, Placement] = {}

    def __enter__(self) -> _Eviction:
        state, row = self.state, self.row
        self._placements = state.placements
        self._on_node = state.pods_on_node[row]
        self._anti_affinity = state.anti_affinity_pod_keys
        self._affinity = state.affinity_pod_keys
        self._version = int(state.node_version[row])
        state.placements = dict(self._placements)
        state.pods_on_node[row] = dict(self._on_node)
        state.anti_affinity_pod_keys = set(self._anti_affinity)
        state.affinity_pod_keys = set(self._affinity)
        return self

    def remove(self, key: str) -> None:
        self.removed[key] = self.state.remove(key)

    def restore(self, key: str) -> None:
        placement = self.removed.pop(key)
        self.state.place(placement.pod, placement.node, usage=placement.gpu_use)

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        state, row = self.state, self.row
        for key in list(self.removed):
            self.restore(key)
        state.placements = self._placements
        state.pods_on_node[row] = self._on_node
        state.anti_affinity_pod_keys = self._anti_affinity
        state.affinity_pod_keys = self._affinity
        state.node_version[row] = self._version


def select_victims_on_node(
    state: ClusterState,
    filters: Sequence[FilterPlugin],
    pod: Pod,
    node: str,
    pdbs: Sequence[PodDisruptionBudget] = (),
    *,
    nominated: Sequence[Pod] = (),
    namespace_labels: NamespaceLabels | None = None,
    now: float,
) -> Victims | Status:
    """``SelectVictimsOnNode``: the fewest pods to evict from ``node`` for ``pod`` to fit.

    1. Remove every pod of lower priority than ``pod`` (none: unresolvable, "No
       preemption victims found for incoming pod").
    2. If ``pod`` does not fit even so (filters with nominated pods), return that status.
    3. Sort the removed pods most important first and split them into PDB-violating and
       the others (``split_by_pdb_violation``).
    4. Reprieve: add back each violating pod, then each other one, in that order; one
       after which ``pod`` no longer fits is removed again and becomes a victim.
    5. When there were pods of both kinds, sort the victims most important first.

    ``now`` stands for the start time of pods not started. The state is unchanged on return.
    """
    row = state.node_index[node]
    potential = [p for p in state.pods_on_node[row].values() if p.priority < pod.priority]
    if not potential:
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (NO_VICTIMS,))
    victims: list[Pod] = []
    num_violating = 0
    with _Eviction(state, row) as eviction:
        for victim in potential:
            eviction.remove(victim.key)
        status = run_filters_with_nominated_pods(state, filters, pod, row, nominated, namespace_labels)
        if not status.ok:
            return status
        violating, non_violating = split_by_pdb_violation(by_importance(potential, now), pdbs)

        def reprieve(candidate: Pod) -> bool:
            eviction.restore(candidate.key)
            fits = run_filters_with_nominated_pods(state, filters, pod, row, nominated, namespace_labels).ok
            if not fits:
                eviction.remove(candidate.key)
                victims.append(candidate)
            return fits

        for candidate in violating:
            if not reprieve(candidate):
                num_violating += 1
        for candidate in non_violating:
            reprieve(candidate)
    if violating and non_violating:
        victims = by_importance(victims, now)
    return Victims(tuple(victims), num_violating)


def dry_run_preemption(
    state: ClusterState,
    filters: Sequence[FilterPlugin],
    pod: Pod,
    potential_nodes: Sequence[int],
    pdbs: Sequence[PodDisruptionBudget],
    offset: int,
    num_candidates: int,
    *,
    nominated: Sequence[Pod] = (),
    namespace_labels: NamespaceLabels | None = None,
    now: float,
) -> tuple[list[Candidate], dict[str, Status]]:
    """``DryRunPreemption``: select victims on ``potential_nodes`` from ``offset`` (round
    the end) until at least one candidate without PDB violations is found and the
    candidates number ``num_candidates``; each kind keeps at most ``num_candidates``.
    Returns the candidates without violations, then those with, and each failed node's
    status. A node the pod fits on without evicting anyone is an error there ("expected
    at least one victim pod on node"): the filters said it did not fit."""
    clean: list[Candidate] = []
    violating: list[Candidate] = []
    statuses: dict[str, Status] = {}
    count = len(potential_nodes)
    for k in range(count):
        row = int(potential_nodes[(offset + k) % count])
        name = state.nodes[row].name
        result = select_victims_on_node(
            state, filters, pod, name, pdbs, nominated=nominated, namespace_labels=namespace_labels, now=now
        )
        if isinstance(result, Victims) and result.pods:
            kind = clean if result.num_pdb_violations == 0 else violating
            if len(kind) < num_candidates:
                kind.append(Candidate(name, result.pods, result.num_pdb_violations))
            if clean and len(clean) + len(violating) >= num_candidates:
                break
            continue
        if isinstance(result, Victims):
            result = Status(Code.ERROR, (f'expected at least one victim pod on node "{name}"',))
        statuses[name] = result
    return clean + violating, statuses


def _aggregate(errors: Sequence[str]) -> str:
    """``utilerrors.NewAggregate(...).Error()``: one message alone, else deduplicated in
    brackets."""
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(errors) == 1 else f"[{', '.join(unique)}]"


def preempt(
    state: ClusterState,
    filters: Sequence[FilterPlugin],
    pod: Pod,
    statuses: NodeStatuses,
    rng: np.random.Generator,
    *,
    pdbs: Sequence[PodDisruptionBudget] = (),
    nominated: Sequence[Pod] = (),
    args: PreemptionArgs | None = None,
    namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
    now: float | None = None,
) -> PreemptionOutcome | PreemptionFailure:
    """``Evaluator.Preempt`` for ``pod``, which ``statuses`` (``filter_with_nominated_pods``
    on this state) found no node for. ``now`` (default: the clock) stands for the start
    time of pods not started yet. The state is unchanged on return.

    1. Not eligible (``pod_eligible_to_preempt_others``): "preemption: <why>".
    2. Dry runs on the nodes rejected as unschedulable, not unresolvable
       (``offset_and_num_candidates``, ``dry_run_preemption``).
    3. None found: "preemption: 0/N nodes are available: <per-node reasons>", where
       every node not dry-run counts as "Preemption is not helpful for scheduling".
    4. Otherwise the candidate ``pick_one_node_for_preemption`` picks.
    """
    args = args or PreemptionArgs()
    clock = time.time() if now is None else now

    def failure(post: str, *, clears: bool, code: Code = Code.UNSCHEDULABLE) -> PreemptionFailure:
        post = f"preemption: {post}"
        return PreemptionFailure(f"{statuses.message} {post}", post, clears, code)

    eligible, why = pod_eligible_to_preempt_others(pod, state, statuses.code(pod.nominated_node_name))
    if not eligible:
        return failure(why, clears=False)
    if len(state) == 0:
        return failure("no nodes available", clears=False, code=Code.ERROR)
    potential = statuses.nodes_with_code(Code.UNSCHEDULABLE)
    candidates: list[Candidate] = []
    dry_run: dict[str, Status] = {}
    if potential.size:
        offset, count = offset_and_num_candidates(int(potential.size), args, rng)
        candidates, dry_run = dry_run_preemption(
            state,
            filters,
            pod,
            [int(row) for row in potential],
            pdbs,
            offset,
            count,
            nominated=nominated,
            namespace_labels=namespace_labels,
            now=clock,
        )
    errors = [status.message for status in dry_run.values() if status.code == Code.ERROR]
    if errors and not candidates:
        return failure(_aggregate(errors), clears=False, code=Code.ERROR)
    if not candidates:
        counts: Counter[str] = Counter()
        for status in dry_run.values():
            counts.update(status.reasons)
        counts[NOT_HELPFUL] += len(state) - len(dry_run)
        return failure(fit_error_message(len(state), +counts), clears=True)
    best = pick_one_node_for_preemption(candidates, clock)
    assert best is not None
    to_clear = tuple(p for p in nominated if p.nominated_node_name == best.node and p.priority < pod.priority)
    return PreemptionOutcome(best.node, best.victims, best.num_pdb_violations, to_clear)
