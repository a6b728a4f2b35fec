"""DefaultPreemption (PostFilter) without the API: which node a pod that fits nowhere
should preempt on, and whose pods it evicts.

Follows kube-scheduler v1.36 (``plugins/defaultpreemption/default_preemption.go``,
``framework/preemption/preemption.go``): ``Preempt`` checks the pod may preempt, dry-runs
``SelectVictimsOnNode`` (``preemption_victims``) on the nodes the filters rejected as
resolvable, from a random offset until enough candidates are found, and picks one with
``pickOneNodeForPreemption``. Evicting the victims, setting ``nominatedNodeName`` and
clearing lower-priority nominations are the caller's (the API layer's); the outcome
says what to do. The dry runs are sequential, in the state's node order, so the result
is reproducible where kube's parallel one is not.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from scheduler.errors import SchedulerInputError
from scheduler.framework.diagnosis import fit_error_message
from scheduler.framework.plugin import CycleContext, FilterPlugin
from scheduler.framework.preemption_reprieve import FitChecks, reads_peer_anti_affinity
from scheduler.framework.preemption_victims import (
    FilterPass,
    NamespaceLabels,
    PodDisruptionBudget,
    Victims,
    add_nominated_pods,
    counts_as_peer,
    node_status,
    pod_dependent_filters,
    pod_start_time,
    run_filter_pass,
    select_victims_on_node,
)
from scheduler.framework.status import Code, Status
from scheduler.objects.pod import Pod
from scheduler.state.cluster_state import ClusterState, IntArray

MAX_INT32 = 2**31 - 1
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."
NOT_HELPFUL = "Preemption is not helpful for scheduling"


@dataclass(frozen=True, slots=True)
class PreemptionArgs:
    """``DefaultPreemptionArgs``: dry runs stop once this many candidates are found
    (at least one of them without PDB violations): ``max(nodes * percentage / 100,
    absolute)``, at most the nodes that could help."""

    min_candidate_nodes_percentage: int = 10
    min_candidate_nodes_absolute: int = 100

    def __post_init__(self) -> None:
        # ValidateDefaultPreemptionArgs.
        obj = "DefaultPreemptionArgs"
        if not 0 <= self.min_candidate_nodes_percentage <= 100:
            raise SchedulerInputError(
                obj,
                "minCandidateNodesPercentage",
                f"must be in 0..100, got {self.min_candidate_nodes_percentage}",
            )
        if self.min_candidate_nodes_absolute < 0:
            raise SchedulerInputError(
                obj,
                "minCandidateNodesAbsolute",
                f"must not be negative, got {self.min_candidate_nodes_absolute}",
            )
        if self.min_candidate_nodes_percentage == 0 and self.min_candidate_nodes_absolute == 0:
            raise SchedulerInputError(
                obj, "minCandidateNodesPercentage, minCandidateNodesAbsolute", "must not both be 0"
            )


def calculate_num_candidates(num_nodes: int, args: PreemptionArgs) -> int:
    """``calculateNumCandidates``: ``max(num_nodes * percentage // 100, absolute)``,
    capped at ``num_nodes``."""
    wanted = max(num_nodes * args.min_candidate_nodes_percentage // 100, args.min_candidate_nodes_absolute)
    return min(wanted, num_nodes)


def offset_and_num_candidates(
    num_nodes: int, args: PreemptionArgs, rng: np.random.Generator
) -> tuple[int, int]:
    """``GetOffsetAndNumCandidates``: where in the node list dry runs start, uniform in
    ``[0, num_nodes)``, and how many candidates end them. When every node is tried the
    offset only reorders ties, so it is 0 (kube draws it anyway)."""
    count = calculate_num_candidates(num_nodes, args)
    offset = 0 if count >= num_nodes else int(rng.integers(num_nodes))
    return offset, count


@dataclass
class NodeStatuses:
    """Filter's verdict per node (kube's ``NodeToStatus``): feasible nodes, and for the
    others a code and reasons. Nodes rejected only as unschedulable are the ones
    preemption may help."""

    node_names: list[str]
    feasible: IntArray
    codes: npt.NDArray[np.int8]  # Code per state row; SUCCESS where feasible
    reason_counts: Counter[str]
    pre_filter_message: str = ""
    _rejections: tuple[tuple[str, IntArray], ...] = ()
    _pre_filter_reasons: tuple[str, ...] = ()
    _overrides: dict[int, tuple[str, ...]] = field(default_factory=dict)
    # the plugin behind each reason, and the one whose PreFilter rejected every node
    _origins: dict[str, str] = field(default_factory=dict)
    _pre_filter_plugin: str = ""

    @property
    def plugins(self) -> frozenset[str]:
        """The plugins that rejected the pod somewhere (kube's ``UnschedulablePlugins``)."""
        if self._pre_filter_plugin:
            return frozenset({self._pre_filter_plugin})
        return frozenset(
            self._origins[r] for r, n in self.reason_counts.items() if n > 0 and r in self._origins
        )

    @property
    def total_nodes(self) -> int:
        return len(self.node_names)

    def code(self, node: str) -> Code:
        """A node's code; a node the state does not have is unresolvable (kube's
        absent-node status)."""
        if node not in self.node_names:
            return Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        return Code(int(self.codes[self.node_names.index(node)]))

    def reasons(self, row: int) -> tuple[str, ...]:
        if self._pre_filter_reasons:
            return self._pre_filter_reasons
        if row in self._overrides:
            return self._overrides[row]
        return tuple(reason for reason, rows in self._rejections if row in rows)

    def nodes_with_code(self, code: Code) -> IntArray:
        return np.flatnonzero(self.codes == code)

    def override(self, row: int, status: Status) -> None:
        """``row`` failed with ``status`` instead (its pass with nominated pods)."""
        self.override_all({row: status})

    def override_all(self, failed: Mapping[int, Status]) -> None:
        """Each row of ``failed`` failed with its status instead; at once, since hundreds
        of nodes can have pods nominated to them."""
        if not failed or self._pre_filter_reasons:
            return
        rows = np.fromiter(failed, np.int64, len(failed))
        again = [row for row in failed if row in self._overrides]
        for row in again:
            self.reason_counts.subtract(self._overrides[row])
        fresh = rows if not again else np.setdiff1d(rows, np.array(again, np.int64))
        for reason, hit in self._rejections:
            self.reason_counts[reason] -= int(np.isin(hit, fresh).sum())
        by_status: dict[Status, list[int]] = {}
        for row, status in failed.items():
            by_status.setdefault(status, []).append(row)
            self._overrides[row] = status.reasons
            if status.plugin:
                self._origins.update(dict.fromkeys(status.reasons, status.plugin))
        for status, same in by_status.items():
            for reason in status.reasons:
                self.reason_counts[reason] += len(same)
            self.codes[same] = status.code
        self.reason_counts = +self.reason_counts
        self.feasible = self.feasible[~np.isin(self.feasible, rows)]

    @property
    def message(self) -> str:
        """The FitError message, ``0/N nodes are available: ...``."""
        return fit_error_message(self.total_nodes, self.reason_counts, self.pre_filter_message)


def filter_without_nominated_pods(
    state: ClusterState,
    filters: Sequence[FilterPlugin],
    pod: Pod,
    namespace_labels: NamespaceLabels | None = None,
) -> tuple[NodeStatuses, FilterPass]:
    """The vectorised pass over every node with no nominated pod counted: its statuses
    and the pass itself (which plugin rejected each node)."""
    ctx = CycleContext(state, pod, namespace_labels or {})
    rows = np.arange(len(state), dtype=np.int64)
    base = run_filter_pass(ctx, filters, rows)
    counts: Counter[str] = Counter()
    for reason, hit in base.rejections:
        counts[reason] += hit.size
    statuses = NodeStatuses(
        state.node_names,
        rows[base.passed],
        base.codes.copy(),
        counts,
        pre_filter_message=base.pre_filter.message if not base.pre_filter.ok else "",
        _rejections=base.rejections,
        _pre_filter_reasons=base.pre_filter.reasons if not base.pre_filter.ok else (),
        _origins=dict(base.origins),
        _pre_filter_plugin=base.pre_filter.plugin if not base.pre_filter.ok else "",
    )
    return statuses, base


def filter_with_nominated_pods(
    state: ClusterState,
    filters: Sequence[FilterPlugin],
    pod: Pod,
    nominated: Sequence[Pod] = (),
    namespace_labels: NamespaceLabels | None = None,
) -> NodeStatuses:
    """Filter ``pod`` on every node, counting nominated pods as kube's
    ``RunFilterPluginsWithNominatedPods`` does: on a node with peers nominated to it
    (priority at least ``pod``'s, not ``pod``), the pod must pass both with them placed
    and without; its status is the pass with them when that one fails.

    One vectorised pass without nominated pods (all there is when none apply); then the
    nodes whose peers only NodeResourcesFit can tell apart are counted at once
    (``CountedPeers.failures``), and each other node with peers gets a single-node pass
    with them placed. The state is unchanged on return.
    """
    statuses, base = filter_without_nominated_pods(state, filters, pod, namespace_labels)
    if not nominated or not base.pre_filter.ok:
        return statuses
    # Each node's peers (``nominated_peers``), in one pass over the nominated pods.
    peers_by_node: dict[str, list[Pod]] = {}
    for peer in nominated:
        node = peer.nominated_node_name
        if node in state.node_index and counts_as_peer(state, pod, peer):
            peers_by_node.setdefault(node, []).append(peer)
    counted = CountedPeers.of(state, filters, pod, namespace_labels)
    anti = reads_peer_anti_affinity(filters)
    failed: dict[int, Status] = {}
    counted_rows: list[tuple[int, list[Pod]]] = []
    for node, peers in peers_by_node.items():
        row = state.node_index[node]
        if counted is not None and counted.checks.counts(anti, peers):
            counted_rows.append((row, peers))
            continue
        with add_nominated_pods(state, pod, node, peers):
            status = node_status(state, filters, pod, row, namespace_labels)
        if not status.ok:
            failed[row] = status
    if counted is not None and counted_rows:
        failed.update(counted.failures(state, counted_rows, base))
    statuses.override_all(failed)
    return statuses


@dataclass(frozen=True, slots=True)
class CountedPeers:
    """The pass with nominated pods counted in requests rather than placed, where only
    NodeResourcesFit can tell the two passes apart (``preemption_reprieve.counted_fits``):
    the filters before it say what they said without the peers, NodeResourcesFit is
    counted on the node's requested row plus the peers', and the filters after it say
    what they said without them. In PreemptionBasic's shape at 500 nodes (every measured
    pod preempts, hundreds wait nominated) placing and removing the peers cost most of
    each cycle."""

    checks: FitChecks
    fit_position: int  # of the one NodeResourcesFit, in the filters

    @staticmethod
    def of(
        state: ClusterState,
        filters: Sequence[FilterPlugin],
        pod: Pod,
        namespace_labels: NamespaceLabels | None = None,
    ) -> CountedPeers | None:
        checks = FitChecks.of(state, pod_dependent_filters(filters), pod, namespace_labels)
        if not checks.counted or len(checks.fit_plugins) != 1:
            return None
        fit = checks.fit_plugins[0]
        return CountedPeers(checks, next(k for k, plugin in enumerate(filters) if plugin is fit))

    def failures(
        self, state: ClusterState, nodes: Sequence[tuple[int, Sequence[Pod]]], base: FilterPass
    ) -> dict[int, Status]:
        """``status`` for each (row, peers) of ``nodes``, at once: the rows whose status
        is not SUCCESS, with it. NodeResourcesFit's arithmetic runs on all the rows as
        arrays, and a status is made once per pattern of which checks fail (the status
        is a function of that pattern); hundreds of nodes can have pods nominated to
        them (PreemptionBasic at 1,000 nodes)."""
        assert base.rejected_by is not None
        checks = self.checks
        columns = list(checks.columns)
        rows = np.fromiter((row for row, _ in nodes), np.int64, len(nodes))
        rejected_by = base.rejected_by[rows].astype(np.int64)
        keep = ~((rejected_by >= 0) & (rejected_by < self.fit_position))  # else rejected either way
        if not keep.any():
            return {}
        allocatable = state.allocatable[rows][:, columns]
        requested = state.requested[rows][:, columns]
        positions = [k for k, (_, peers) in enumerate(nodes) for _ in peers]
        vectors = [checks.vector(peer) for _, peers in nodes for peer in peers]
        with_peers = requested.copy()
        np.add.at(with_peers, positions, np.array(vectors, np.int64))
        patterns = checks.patterns(allocatable, with_peers)
        without = checks.patterns(allocatable, requested)
        # Each distinct pattern (with the peers or without) as one number: its bits, or,
        # past 62 of them (dozens of checked resources), its rank among the patterns.
        both = np.concatenate([patterns, without])
        if both.shape[1] <= 62:
            numbers = both.astype(np.int64) @ (1 << np.arange(both.shape[1], dtype=np.int64))
        else:
            numbers = np.unique(both, axis=0, return_inverse=True)[1].reshape(-1)
        codes, codes_without = numbers[: len(rows)], numbers[len(rows) :]
        failing = np.flatnonzero(keep & patterns.any(axis=1))
        made: dict[int, Status] = {}  # status per pattern's number
        for k in failing.tolist():
            for code, row in ((int(codes[k]), with_peers[k]), (int(codes_without[k]), requested[k])):
                if code not in made:
                    made[code] = checks.status(allocatable[k].tolist(), row.tolist())
        out: dict[int, Status] = {}
        fit_rejected = rejected_by == self.fit_position
        for k, row, code, before in zip(
            failing.tolist(),
            rows[failing].tolist(),
            codes[failing].tolist(),
            codes_without[failing].tolist(),
            strict=True,
        ):
            verdict = made[code]
            if fit_rejected[k] and verdict == made[before]:
                continue  # rejected as it was without them
            out[row] = verdict
        return out


def pod_eligible_to_preempt_others(
    pod: Pod, state: ClusterState, nominated_node_code: Code | None = None
) -> tuple[bool, str]:
    """``PodEligibleToPreemptOthers``: (eligible, why not).

    - ``preemptionPolicy: Never``: not eligible.
    - A pod nominated to a node it was then found unresolvable on may preempt again.
    - Otherwise, while its nominated node still has a lower-priority pod terminating
      because a scheduler preempted it, the pod waits for that preemption to finish.
    """
    if pod.preemption_policy == "Never":
        return False, NOT_ELIGIBLE_NEVER
    node = pod.nominated_node_name
    if node:
        if nominated_node_code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            return True, ""
        row = state.node_index.get(node)
        if row is not None:
            for other in state.pods_on_node[row].values():
                if other.priority < pod.priority and other.terminating and other.preempted_by_scheduler:
                    return False, NOT_ELIGIBLE_TERMINATING
    return True, ""


@dataclass(frozen=True, slots=True)
class Candidate:
    """A node the pod fits on once ``victims`` (most important first) are evicted."""

    node: str
    victims: tuple[Pod, ...]
    num_pdb_violations: int


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
    checks = FitChecks.of(state, pod_dependent_filters(filters), pod, namespace_labels)
    by_node: defaultdict[str, list[Pod]] = defaultdict(list)
    for other in nominated:
        by_node[other.nominated_node_name].append(other)
    unaffected: dict[int, bool] = {}
    if checks.counted and count:
        # The filters NodeResourcesFit aside, on every node as it is, in one pass.
        ctx = CycleContext(state, pod, namespace_labels or {})
        rows = np.asarray(potential_nodes, np.int64)
        unaffected = dict(
            zip(
                rows.tolist(),
                run_filter_pass(ctx, checks.unaffected(filters), rows).passed.tolist(),
                strict=True,
            )
        )
    for k in range(count):
        row = int(potential_nodes[(offset + k) % count])
        name = state.nodes[row].name
        result = select_victims_on_node(
            state,
            filters,
            pod,
            name,
            pdbs,
            nominated=by_node.get(name, ()),
            namespace_labels=namespace_labels,
            now=now,
            checks=checks,
            unaffected_pass=unaffected.get(row),
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


def earliest_start_of_most_important(victims: Sequence[Pod], now: float) -> float:
    """``GetEarliestPodStartTime``: the earliest start among the highest-priority victims."""
    top = max(p.priority for p in victims)
    return min(pod_start_time(p, now) for p in victims if p.priority == top)


def pick_one_node_for_preemption(
    candidates: Sequence[Candidate], now: float | None = None
) -> Candidate | None:
    """``SelectCandidate``/``pickOneNodeForPreemption``: each rule keeps the candidates
    with the best score, and the first rule that leaves one decides:

    1. fewest PDB violations;
    2. lowest priority of the most important victim;
    3. smallest sum of victim priorities, each plus 2^31 (MaxInt32 + 1), so a node with
       more victims of the same negative priority does not win;
    4. fewest victims;
    5. latest start of the earliest-started highest-priority victim;
    6. then the first remaining (kube's is a map's first: any).

    v1.36 has no rule for a candidate without victims: dry runs never make one.
    """
    if not candidates:
        return None
    clock = time.time() if now is None else now
    rules: tuple[Callable[[Candidate], float], ...] = (
        lambda c: -c.num_pdb_violations,
        lambda c: -c.victims[0].priority,
        lambda c: -sum(v.priority + MAX_INT32 + 1 for v in c.victims),
        lambda c: -len(c.victims),
        lambda c: earliest_start_of_most_important(c.victims, clock),
    )
    remaining = list(candidates)
    for rule in rules:
        if len(remaining) == 1:
            break
        scores = [rule(c) for c in remaining]
        best = max(scores)
        remaining = [c for c, s in zip(remaining, scores, strict=True) if s == best]
    return remaining[0]


@dataclass(frozen=True, slots=True)
class PreemptionOutcome:
    """Evict ``victims`` from ``node`` and nominate the pod there; clear the nominations
    of ``nominations_to_clear`` (lower-priority pods nominated to ``node``, which may no
    longer fit: kube moves them back to the active queue)."""

    node: str
    victims: tuple[Pod, ...]
    num_pdb_violations: int
    nominations_to_clear: tuple[Pod, ...] = ()


@dataclass(frozen=True, slots=True)
class PreemptionFailure:
    """No preemption: ``message`` is the pod's FailedScheduling message (the filters'
    FitError, then ``post_filter_message``); ``clears_nomination`` when kube also resets
    the pod's ``nominatedNodeName`` (no candidate anywhere); ``code`` is ERROR when dry
    runs failed, UNSCHEDULABLE otherwise."""

    message: str
    post_filter_message: str
    clears_nomination: bool
    code: Code = Code.UNSCHEDULABLE

    def __str__(self) -> str:
        return self.message


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
