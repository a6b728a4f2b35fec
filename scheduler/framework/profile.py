"""A profile (which filters, which weighted scores, how GPUs are picked) and the
scheduling cycle that runs it for one pod: PreFilter, Filter, Score, select, GPUs.

The cycle only decides; the caller applies the decision (``ClusterState.place``)
after binding succeeds (live) or at once (simulator).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from scheduler.framework.diagnosis import fit_error_message
from scheduler.framework.plugin import CycleContext, FilterPlugin, GpuSelector, ScorePlugin, run_pre_filters
from scheduler.framework.preemption import NodeStatuses, PreemptionArgs, filter_with_nominated_pods
from scheduler.framework.preemption_victims import run_filters_with_nominated_pods
from scheduler.framework.status import SUCCESS, Code, Status
from scheduler.objects.pod import Pod
from scheduler.state.cluster_state import ClusterState, IntArray

TieBreak = Literal["random", "first"]
# Keeps some of the feasible nodes a pod may go to, never none (a gang's locality).
NodeNarrowing = Callable[[IntArray], IntArray]


@dataclass(frozen=True)
class WeightedScore:
    plugin: ScorePlugin
    weight: int


@dataclass
class Profile:
    """What runs, in order: kube-scheduler's ``KubeSchedulerProfile`` in miniature.

    ``tie_break``: ``random`` picks uniformly among the best nodes, as kube-scheduler's
    ``selectHost`` does; ``first`` takes the best node that comes first in the state's
    node order (the FGD simulator's seeded fixed order).

    ``preferences`` (policy profiles): scores of what the pod's owner asked for
    (preferred affinities, soft spread, PreferNoSchedule taints). When they tell the
    feasible nodes apart, only the nodes with the highest weighted sum go on to
    ``scores``: the user's preferences first, the policy among the nodes they prefer.

    ``unrequested`` (policy profiles): the scores, ties random, for a pod that asks for
    nothing (``Pod.asks_for_nothing``). A packing policy has nothing of such a pod to
    pack, and its ties (``first``) would stack every such pod on one node up to the
    node's pod limit; kube's default resource score spreads them instead.
    """

    name: str
    filters: Sequence[FilterPlugin]
    scores: Sequence[WeightedScore]
    gpu_selector: GpuSelector
    tie_break: TieBreak = "random"
    preferences: Sequence[WeightedScore] = ()
    # DefaultPreemption's arguments when the profile runs it at PostFilter (live only:
    # the simulator's replays never evict).
    preemption: PreemptionArgs | None = None
    # Coscheduling: a PodGroup's pods are decided together (live only).
    gangs: bool = True
    unrequested: Sequence[WeightedScore] = ()


@dataclass
class Decision:
    """What the cycle decided for one pod."""

    pod: Pod
    status: Status
    node: str = ""
    node_index: int = -1
    gpu_indices: tuple[int, ...] = ()
    feasible: IntArray = field(default_factory=lambda: np.zeros(0, np.int64))
    total_nodes: int = 0
    reason_counts: Mapping[str, int] = field(default_factory=dict)
    pre_filter_message: str = ""
    # Seconds spent per extension point (filter, score), for metrics.
    timings: dict[str, float] = field(default_factory=dict)
    # The nodes the profile's scores ran on: the feasible ones, or those of them the
    # pod's preferences rank highest.
    scored: IntArray = field(default_factory=lambda: np.zeros(0, np.int64))
    # Total score of each scored node (aligned with ``scored``), when scored.
    scores: npt.NDArray[np.int64] | None = None
    # Filter's verdict per node when the pass counted nominated pods and none passed:
    # PostFilter (preemption) starts from it in the same cycle instead of filtering again.
    node_statuses: NodeStatuses | None = None
    # The plugins that rejected the pod on some node, or whose PreFilter rejected it
    # (kube's ``UnschedulablePlugins``, the label of ``scheduler_unschedulable_pods``).
    plugins: frozenset[str] = frozenset()

    def top_scores(self, state: ClusterState, count: int = 8) -> list[tuple[str, int]]:
        """The best ``count`` nodes by total score, for the experience log."""
        if self.scores is None or self.scores.size == 0:
            return [(self.node, 0)] if self.scheduled else []
        best = np.argsort(-self.scores, kind="stable")[:count]
        return [(state.nodes[int(self.scored[i])].name, int(self.scores[i])) for i in best]

    @property
    def scheduled(self) -> bool:
        return self.node_index >= 0

    @property
    def message(self) -> str:
        """kube-scheduler's FailedScheduling message (empty when scheduled)."""
        if self.scheduled:
            return ""
        if self.status.code == Code.ERROR:
            return self.status.message
        return fit_error_message(self.total_nodes, self.reason_counts, self.pre_filter_message)


def run_filters(
    ctx: CycleContext, filters: Sequence[FilterPlugin], nodes: IntArray | None = None
) -> Decision:
    """PreFilter and Filter: returns the feasible nodes, or why there are none.
    ``nodes``: filter only these rows (a queue asking whether a pod fits the nodes an
    event changed); all nodes when None."""
    pod, n = ctx.pod, len(ctx.state)
    decision = Decision(pod, SUCCESS, total_nodes=n)
    active, status = run_pre_filters(ctx, filters)
    if not status.ok:
        decision.status = status
        decision.pre_filter_message = status.message
        decision.plugins = frozenset({status.plugin} if status.plugin else ())
        return decision
    candidates = np.arange(n, dtype=np.int64) if nodes is None else nodes
    counts: Counter[str] = Counter()
    plugins: set[str] = set()
    for plugin in active:
        if candidates.size == 0:
            break
        rejected = np.zeros(candidates.size, np.bool_)
        for rejection in plugin.filter(ctx, candidates):
            hits = int(np.count_nonzero(rejection.nodes))
            if hits:
                counts[rejection.reason] += hits
                rejected |= rejection.nodes
        if rejected.any():
            plugins.add(plugin.name)
            candidates = candidates[~rejected]
    decision.feasible = candidates
    decision.reason_counts = counts
    decision.plugins = frozenset(plugins)
    if candidates.size == 0:
        # kube-scheduler reports a FitError as Unschedulable whatever the plugins' codes.
        decision.status = Status(Code.UNSCHEDULABLE, tuple(sorted(counts)))
    return decision


def total_scores(
    ctx: CycleContext, scores: Sequence[WeightedScore], nodes: IntArray
) -> npt.NDArray[np.int64]:
    total = np.zeros(nodes.size, np.int64)
    for weighted in scores:
        total += weighted.weight * weighted.plugin.score(ctx, nodes)
    return total


def most_preferred(ctx: CycleContext, preferences: Sequence[WeightedScore], nodes: IntArray) -> IntArray:
    """The nodes with the highest weighted preference sum; all of ``nodes`` when the sums
    are equal (the pod asks for nothing the nodes differ in)."""
    totals = total_scores(ctx, preferences, nodes)
    best = totals == totals.max()
    return nodes if best.all() else nodes[best]


def select_node(total: npt.NDArray[np.int64], tie_break: TieBreak, rng: np.random.Generator) -> int:
    """Position (in ``total``) of the chosen node."""
    best = np.flatnonzero(total == total.max())
    if tie_break == "first" or best.size == 1:
        return int(best[0])
    return int(best[rng.integers(best.size)])


def filter_around_nominations(
    ctx: CycleContext, filters: Sequence[FilterPlugin], nominated: Sequence[Pod]
) -> Decision:
    """``run_filters`` that leaves the room preemptions cleared to the pods nominated
    there (kube's ``RunFilterPluginsWithNominatedPods``), and that keeps a nominated
    pod to its nominated node when it fits there: as kube's ``evaluateNominatedNode``,
    that node is filtered first, alone, and the other nodes only when it fails (a
    preemptor whose victims are gone is decided without filtering every node)."""
    row = ctx.state.node_index.get(ctx.pod.nominated_node_name)
    if row is not None:
        status = run_filters_with_nominated_pods(
            ctx.state, filters, ctx.pod, row, nominated, ctx.namespace_labels
        )
        if status.ok:
            decision = Decision(ctx.pod, SUCCESS, total_nodes=len(ctx.state))
            decision.feasible = np.array([row], np.int64)
            return decision
    statuses = filter_with_nominated_pods(ctx.state, filters, ctx.pod, nominated, ctx.namespace_labels)
    decision = Decision(ctx.pod, SUCCESS, total_nodes=len(ctx.state))
    decision.feasible = statuses.feasible
    decision.reason_counts = statuses.reason_counts
    decision.pre_filter_message = statuses.pre_filter_message
    decision.plugins = statuses.plugins
    if statuses.feasible.size == 0:
        decision.status = Status(Code.UNSCHEDULABLE, tuple(sorted(statuses.reason_counts)))
        decision.node_statuses = statuses
    return decision


def schedule_pod(
    state: ClusterState,
    pod: Pod,
    profile: Profile,
    rng: np.random.Generator,
    namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
    nominated: Sequence[Pod] = (),
    narrow: NodeNarrowing | None = None,
) -> Decision:
    """One scheduling cycle for ``pod``; does not change ``state``. ``nominated``: pods
    waiting for the room a preemption cleared (none in the simulator). ``narrow``: after
    the pod's own preferences, the nodes scores choose among (``framework.gang``)."""
    ctx = CycleContext(state, pod, namespace_labels or {})
    started = time.perf_counter()
    if nominated or pod.nominated_node_name:
        decision = filter_around_nominations(ctx, profile.filters, nominated)
    else:
        decision = run_filters(ctx, profile.filters)
    filtered = time.perf_counter()
    decision.timings["Filter"] = filtered - started
    if decision.feasible.size == 0:
        return decision
    nodes = decision.feasible
    if profile.preferences and nodes.size > 1:
        nodes = most_preferred(ctx, profile.preferences, nodes)
    if narrow is not None and nodes.size > 1:
        nodes = narrow(nodes)
    decision.scored = nodes
    scores, tie_break = profile.scores, profile.tie_break
    if profile.unrequested and pod.asks_for_nothing:
        scores, tie_break = profile.unrequested, "random"
    if nodes.size == 1 or not scores:
        choice = 0
    else:
        totals = total_scores(ctx, scores, nodes)
        choice = select_node(totals, tie_break, rng)
        decision.scores = totals
    scored = time.perf_counter()
    decision.timings["Score"] = scored - filtered
    decision.node_index = int(nodes[choice])
    decision.node = state.nodes[decision.node_index].name
    decision.gpu_indices = profile.gpu_selector.select_gpus(ctx, decision.node_index)
    decision.timings["Reserve"] = time.perf_counter() - scored
    return decision
