"""DefaultPreemption on one node: which lower-priority pods must go for a pod to fit.

Follows kube-scheduler v1.36: ``SelectVictimsOnNode`` and ``filterPodsWithPDBViolation``
(``plugins/defaultpreemption/default_preemption.go``), ``MoreImportantPod``
(``pkg/scheduler/util``) and ``RunFilterPluginsWithNominatedPods`` (the framework
runtime). kube dry-runs on copies of a node. Where only the node's requests can change
the verdict (``preemption_reprieve``), the dry run is counted on a copy of the node's
requested row; elsewhere the state itself is changed and put back: every function leaves
the ``ClusterState`` exactly as it found it (arrays, GPU shares and indices, the
placement dicts and their order, node versions).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import TracebackType

import numpy as np
import numpy.typing as npt

from scheduler.framework.plugin import CycleContext, FilterPlugin, run_pre_filters
from scheduler.framework.preemption_reprieve import FitChecks, ResourceReprieve
from scheduler.framework.status import SUCCESS, Code, Status
from scheduler.objects.pod import Pod
from scheduler.objects.selectors import LabelSelector
from scheduler.plugins.filters.node_affinity import NodeAffinity
from scheduler.plugins.filters.node_name import NodeName
from scheduler.plugins.filters.node_unschedulable import NodeUnschedulable
from scheduler.plugins.filters.taint_toleration import TaintToleration
from scheduler.plugins.filters.unsupported import Unsupported
from scheduler.state.cluster_state import BoolArray, ClusterState, GpuUse, IntArray, Placement
from scheduler.state.gpu_fit import gpus_fitting

NO_VICTIMS = "No preemption victims found for incoming pod"
NamespaceLabels = Mapping[str, Mapping[str, str]]


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    """A ``policy/v1`` PodDisruptionBudget, as far as preemption reads it.

    ``selector`` None or empty matches no pod (kube: "A PDB with a nil or empty selector
    matches nothing"). ``disrupted_pods``: the names in ``status.disruptedPods``,
    evictions the API server has granted that the budget's status already counts.
    """

    namespace: str
    name: str
    selector: LabelSelector | None
    disruptions_allowed: int
    disrupted_pods: frozenset[str] = frozenset()

    def matches(self, pod: Pod) -> bool:
        if pod.namespace != self.namespace or self.selector is None or self.selector.is_empty:
            return False
        return self.selector.matches(pod.labels)


def split_by_pdb_violation(
    pods: Sequence[Pod], pdbs: Sequence[PodDisruptionBudget]
) -> tuple[list[Pod], list[Pod]]:
    """``filterPodsWithPDBViolation``: (violating, non-violating), each in input order.

    Walking the pods in order, each matching budget not already counting the pod (its
    name in ``disrupted_pods``) loses one allowed disruption; a pod is violating when
    that takes any of its budgets below zero. A pod without labels matches no budget.
    """
    allowed = [pdb.disruptions_allowed for pdb in pdbs]
    violating: list[Pod] = []
    non_violating: list[Pod] = []
    for pod in pods:
        violated = False
        if pod.labels:
            for i, pdb in enumerate(pdbs):
                if not pdb.matches(pod) or pod.name in pdb.disrupted_pods:
                    continue
                allowed[i] -= 1
                violated = violated or allowed[i] < 0
        (violating if violated else non_violating).append(pod)
    return violating, non_violating


def pod_start_time(pod: Pod, now: float) -> float:
    """``GetPodStartTime``: ``status.startTime``, or now for a pod not started yet."""
    return now if pod.start_time is None else pod.start_time


def by_importance(pods: Sequence[Pod], now: float) -> list[Pod]:
    """Most important first (``MoreImportantPod``): higher priority, then the one that
    started earlier. kube's ``sort.Slice`` leaves ties in no particular order; this sort
    is stable, so ties keep the node's order."""
    return sorted(pods, key=lambda p: (-p.priority, pod_start_time(p, now)))


@dataclass(frozen=True, slots=True)
class FilterPass:
    """PreFilter then Filter of a profile over some nodes, with each node's verdict.

    Per node the first plugin that rejects it decides, as kube's ``RunFilterPlugins``
    stops at the first failure; its code is the strongest of that plugin's rejections
    of the node (unresolvable over unschedulable). A PreFilter rejection is every node's.
    """

    nodes: IntArray  # state rows tried
    passed: BoolArray  # aligned with nodes
    codes: npt.NDArray[np.int8]  # aligned with nodes; SUCCESS where passed
    rejections: tuple[tuple[str, IntArray], ...]  # reason, rows it rejects
    pre_filter: Status = SUCCESS
    # aligned with nodes: the position in the filters of the plugin that rejected the
    # node, -1 where none did (passed, or a PreFilter rejection)
    rejected_by: npt.NDArray[np.int16] | None = None
    # the plugin behind each reason (a reason is one plugin's wording)
    origins: Mapping[str, str] = field(default_factory=dict)

    def reasons(self, row: int) -> tuple[str, ...]:
        if not self.pre_filter.ok:
            return self.pre_filter.reasons
        return tuple(reason for reason, rows in self.rejections if row in rows)

    def status(self, position: int) -> Status:
        """The verdict on ``nodes[position]`` as a status."""
        if not self.pre_filter.ok:
            return self.pre_filter
        if self.passed[position]:
            return SUCCESS
        reasons = self.reasons(int(self.nodes[position]))
        return Status(
            Code(int(self.codes[position])), reasons, self.origins.get(reasons[0], "") if reasons else ""
        )


def run_filter_pass(ctx: CycleContext, filters: Sequence[FilterPlugin], nodes: IntArray) -> FilterPass:
    """Run ``filters`` for ``ctx.pod`` on ``nodes`` (``run_filters``, keeping per-node codes)."""
    codes = np.zeros(nodes.size, np.int8)
    rejected_by = np.full(nodes.size, -1, np.int16)
    active, status = run_pre_filters(ctx, filters)
    if not status.ok:
        codes[:] = status.code
        return FilterPass(nodes, np.zeros(nodes.size, np.bool_), codes, (), status, rejected_by)
    position = {id(plugin): k for k, plugin in enumerate(filters)}
    alive = np.arange(nodes.size, dtype=np.int64)  # positions in nodes still passing
    rejections: list[tuple[str, IntArray]] = []
    origins: dict[str, str] = {}
    for plugin in active:
        if alive.size == 0:
            break
        rejected = np.zeros(alive.size, np.bool_)
        for rejection in plugin.filter(ctx, nodes[alive]):
            if not rejection.nodes.any():
                continue
            hit = alive[rejection.nodes]
            codes[hit] = np.maximum(codes[hit], int(rejection.code))
            rejections.append((rejection.reason, nodes[hit]))
            origins[rejection.reason] = plugin.name
            rejected |= rejection.nodes
        rejected_by[alive[rejected]] = position[id(plugin)]
        alive = alive[~rejected]
    passed = np.zeros(nodes.size, np.bool_)
    passed[alive] = True
    return FilterPass(nodes, passed, codes, tuple(rejections), rejected_by=rejected_by, origins=origins)


def node_status(
    state: ClusterState,
    filters: Sequence[FilterPlugin],
    pod: Pod,
    row: int,
    namespace_labels: NamespaceLabels | None = None,
) -> Status:
    """The filters' verdict on one node, from a fresh cycle (PreFilter sees the state as
    it is now, as kube's PreFilter extensions AddPod/RemovePod keep it)."""
    ctx = CycleContext(state, pod, namespace_labels or {})
    return run_filter_pass(ctx, filters, np.array([row], np.int64)).status(0)


def _same_pod(a: Pod, b: Pod) -> bool:
    return a.uid == b.uid if a.uid and b.uid else a.key == b.key


def counts_as_peer(state: ClusterState, pod: Pod, peer: Pod) -> bool:
    """Whether kube counts ``peer`` on its nominated node when filtering ``pod``
    (``addGENominatedPods``): priority at least ``pod``'s, not ``pod`` itself, not placed
    yet."""
    return (
        peer.priority >= pod.priority
        and not peer.node_name
        and peer.key not in state.placements
        and not _same_pod(peer, pod)
    )


def nominated_peers(state: ClusterState, pod: Pod, node: str, nominated: Sequence[Pod]) -> list[Pod]:
    """The pods kube counts on ``node`` when filtering ``pod``: nominated to it, and
    ``counts_as_peer``."""
    return [p for p in nominated if p.nominated_node_name == node and counts_as_peer(state, pod, p)]


def _assumed_gpu_use(state: ClusterState, pod: Pod, row: int) -> tuple[GpuUse, ...]:
    """Where a nominated pod's GPU request is counted: its GPUs are chosen when it binds,
    so it takes the first GPUs that fit it, then the first others (a share still weighs
    on one GPU as it will; kube's NodeInfo has no GPUs and just adds requests)."""
    count = int(state.gpu_count[row])
    if not pod.gpu.count or not count:
        return ()
    fits = gpus_fitting(state, np.array([row], np.int64), pod.gpu)[0, :count]
    order = [*np.flatnonzero(fits), *np.flatnonzero(~fits)][: pod.gpu.count]
    return state.gpu_use(pod, row, tuple(int(g) for g in order))


@contextmanager
def add_nominated_pods(state: ClusterState, pod: Pod, node: str, nominated: Sequence[Pod]) -> Iterator[bool]:
    """Place ``pod``'s nominated peers on ``node`` (``nominated_peers``) for the body of
    the ``with``; yields whether there were any. Removing them afterwards leaves the
    placement dicts in their order; the node's version is put back too."""
    peers = nominated_peers(state, pod, node, nominated) if nominated else []
    if not peers:
        yield False
        return
    row = state.node_index[node]
    version = int(state.node_version[row])
    placed: list[str] = []
    try:
        for peer in peers:
            state.place(peer, node, usage=_assumed_gpu_use(state, peer, row))
            placed.append(peer.key)
        yield True
    finally:
        for key in reversed(placed):
            state.remove(key)
        # The row is what it was at this version again; caches keyed on versions saw
        # only newer ones meanwhile, which are never reused.
        state.node_version[row] = version


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


# Filters whose PreFilter and Filter read only the pod and the node object, never other
# pods: on one node, for one pod, their verdict is the same whichever pods are placed.
NODE_ONLY_FILTERS: tuple[type, ...] = (
    Unsupported,
    NodeUnschedulable,
    NodeName,
    TaintToleration,
    NodeAffinity,
)


def pod_dependent_filters(filters: Sequence[FilterPlugin]) -> list[FilterPlugin]:
    """``filters`` without the node-only ones (``NODE_ONLY_FILTERS``), in order. Once the
    whole pipeline has passed a pod on a node, whether it still passes there after pods
    come and go is whether these pass: the others pass again, and a reprieve reads only
    the verdict, not which plugin gave it."""
    return [plugin for plugin in filters if type(plugin) not in NODE_ONLY_FILTERS]


@dataclass(frozen=True, slots=True)
class Victims:
    """The pods to evict from a node, most important first, and how many of them
    violate a PodDisruptionBudget."""

    pods: tuple[Pod, ...]
    num_pdb_violations: int


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
    checks: FitChecks | None = None,
    unaffected_pass: bool | None = None,
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

    ``now`` stands for the start time of pods not started; ``checks``: the pod's
    ``FitChecks`` over ``pod_dependent_filters(filters)``, made once for the nodes of a
    dry run (made here when not given); ``unaffected_pass``: whether the filters but
    NodeResourcesFit pass the pod on the node as it is, where the dry run ran them on all
    its nodes at once (run here when not given). The state is unchanged on return.
    """
    row = state.node_index[node]
    potential = [p for p in state.pods_on_node[row].values() if p.priority < pod.priority]
    if not potential:
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (NO_VICTIMS,))
    # The node-only filters pass the pod again once it passed the node whole.
    reprieve_filters = pod_dependent_filters(filters)
    peers = nominated_peers(state, pod, node, nominated) if nominated else []
    counted = ResourceReprieve.applies(
        state, reprieve_filters, pod, row, potential, peers, namespace_labels, checks
    )
    if counted is not None and (
        unaffected_pass
        if unaffected_pass is not None
        else node_status(state, counted.unaffected(filters), pod, row, namespace_labels).ok
    ):
        # The filters besides NodeResourcesFit pass here, and say the same with the pods
        # off: step 2 and each reprieve are counted, and the state is not touched.
        status = counted.status()
        if not status.ok:
            return status
        return _reprieve_in_order(potential, pdbs, now, counted.add_back)
    with _Eviction(state, row) as eviction:
        for victim in potential:
            eviction.remove(victim.key)
        status = run_filters_with_nominated_pods(state, filters, pod, row, nominated, namespace_labels)
        if not status.ok:
            return status

        def fits_back(candidate: Pod) -> bool:
            eviction.restore(candidate.key)
            fits = run_filters_with_nominated_pods(
                state, reprieve_filters, pod, row, nominated, namespace_labels
            ).ok
            if not fits:
                eviction.remove(candidate.key)
            return fits

        return _reprieve_in_order(potential, pdbs, now, fits_back)


def _reprieve_in_order(
    potential: Sequence[Pod],
    pdbs: Sequence[PodDisruptionBudget],
    now: float,
    fits_back: Callable[[Pod], bool],
) -> Victims:
    """Steps 3 to 5 of ``select_victims_on_node``: ``fits_back`` adds a pod back and says
    whether the pod being scheduled still fits (a pod after which it does not stays off)."""
    violating, non_violating = split_by_pdb_violation(by_importance(potential, now), pdbs)
    victims: list[Pod] = []
    num_violating = 0
    for candidate in violating:
        if not fits_back(candidate):
            victims.append(candidate)
            num_violating += 1
    for candidate in non_violating:
        if not fits_back(candidate):
            victims.append(candidate)
    if violating and non_violating:
        victims = by_importance(victims, now)
    return Victims(tuple(victims), num_violating)
