"""Reprieves of SelectVictimsOnNode counted in requests, not run through the filters.

Once every lower-priority pod is off a node and the pod passes there, kube's
``SelectVictimsOnNode`` adds them back one at a time and keeps each after which the pod
still fits. Where nothing but the node's requests can change that verdict, the verdict is
NodeResourcesFit's arithmetic on the node's requested row less the pods taken off plus
those kept so far, plus the pods nominated to the node that count for the pod (kube's
pass with nominated pods places them; requests only add up, so the pass without them
passes whenever that one does): the other filters run once, on the state as it is, and
nothing is taken off or placed on the state. That holds (``ResourceReprieve.applies``)
when:

- every filter left after the node-only ones is NodeResourcesFit, InterPodAffinity, one
  that skipped the pod on grounds that never read placed pods (no host ports, no GPUs,
  no volumes the catalogs constrain, no DoNotSchedule spread, no resource claims), one
  that never reads placed pods (VolumeBinding, VolumeZone: the pod's claims, the
  catalogs and the node), or one that reads only placed pods' volumes (NodeVolumeLimits,
  VolumeRestrictions) while none of the pods taken off, added back or nominated has a
  volume or an inline disk (PreemptionPVs: preemptors with a volume evict pods without);
- InterPodAffinity can only say what it said already: the pod has no required affinity
  or anti-affinity term and none of the pods added back or nominated has required
  anti-affinity, so the existing pods' anti-affinity it checks is what it was when the
  pod passed.

``preemption.filter_with_nominated_pods`` counts the nominated pods the same way when it
filters a pod on a node that has some.

Otherwise, or where those other filters reject the node, the caller takes the pods off
the state and runs the filters for each reprieve. tests/unit/test_preemption_equivalence.py
holds both to the dry run that always did (tests/unit/preemption_reference.py).
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scheduler.framework.plugin import CycleContext, FilterPlugin
from scheduler.framework.status import SUCCESS, Code, Status
from scheduler.objects.pod import PODS, Pod
from scheduler.plugins.filters.dynamic_resources import DynamicResources
from scheduler.plugins.filters.gpu_share import GpuShare
from scheduler.plugins.filters.inter_pod_affinity import InterPodAffinity
from scheduler.plugins.filters.node_ports import NodePorts
from scheduler.plugins.filters.node_resources_fit import (
    TOO_MANY_PODS,
    NodeResourcesFit,
    insufficient,
    is_checked_resource,
)
from scheduler.plugins.filters.node_volume_limits import NodeVolumeLimits
from scheduler.plugins.filters.pod_topology_spread import PodTopologySpread
from scheduler.plugins.filters.volume_binding import VolumeBinding
from scheduler.plugins.filters.volume_restrictions import VolumeRestrictions
from scheduler.plugins.filters.volume_zone import VolumeZone
from scheduler.state.cluster_state import ClusterState, IntArray

# Filters whose PreFilter SKIP reads only the pod and the volume and claim catalogs,
# never placed pods: a SKIP on one state is a SKIP on the node with other pods back.
SKIP_READS_NO_PODS: tuple[type, ...] = (
    NodePorts,
    GpuShare,
    PodTopologySpread,
    DynamicResources,
)
# Filters that read nothing of placed pods: their verdict is the same with any of them.
READS_NO_PODS: tuple[type, ...] = (VolumeBinding, VolumeZone)
# Filters that read placed pods' volumes and inline disks only (claims in use, volumes
# attached, disk conflicts): their verdict is the same with pods that have neither.
READS_POD_VOLUMES: tuple[type, ...] = (VolumeRestrictions, NodeVolumeLimits)


def has_volumes(pod: Pod) -> bool:
    """Whether ``pod`` has what ``READS_POD_VOLUMES`` filters read."""
    return bool(pod.volumes or pod.inline_disks)


@dataclass(frozen=True, slots=True)
class FitChecks:
    """What NodeResourcesFit checks for one pod, made once per cycle, over the few
    resources it reads: ``columns`` are the state's columns of ``pods`` and of each
    resource some instance checks, and a node's row is read as Python ints at those
    columns only (``at``); ``checks`` holds, for each instance, (resource, position in
    ``columns``, amount) in the pod's order (position None: a resource the state has no
    column for, which fails as the plugin does). ``counted`` says whether, for this pod,
    nothing but NodeResourcesFit among the filters reads the pods taken off, added back
    or nominated (``counted_fits``); ``volume_free_peers``, that this holds only while
    those pods have no volumes (a ``READS_POD_VOLUMES`` filter did not skip the pod).

    Python ints on two or three columns rather than numpy rows: PreemptionBasic's dry
    runs at 500 nodes read a few pods' requests on 150 nodes per preemptor, where each
    numpy operation on a short row costs more than the arithmetic."""

    fit_plugins: tuple[NodeResourcesFit, ...]
    checks: tuple[tuple[tuple[str, int | None, int], ...], ...]
    columns: tuple[int, ...]  # the pods column first
    names: tuple[str, ...]  # resource of each column
    counted: bool
    volume_free_peers: bool = False

    @staticmethod
    def of(
        state: ClusterState,
        filters: Sequence[FilterPlugin],
        pod: Pod,
        namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
    ) -> FitChecks:
        """``filters``: the node-only ones left out (``pod_dependent_filters``)."""
        counted = counted_fits(state, filters, pod, namespace_labels)
        fits, volume_free_peers = counted if counted is not None else ([], False)
        plugins = tuple(fits)
        names = [PODS]
        checks: list[tuple[tuple[str, int | None, int], ...]] = []
        for fit in plugins:
            checked: list[tuple[str, int | None, int]] = []
            for name, amount in pod.requests.items():
                if amount <= 0 or name in fit.ignored_resources or not is_checked_resource(name):
                    continue
                position = None
                if name in state.resource_index:
                    if name not in names:
                        names.append(name)
                    position = names.index(name)
                checked.append((name, position, amount))
            checks.append(tuple(checked))
        columns = tuple(state.resource_index[name] for name in names)
        return FitChecks(
            plugins, tuple(checks), columns, tuple(names), counted is not None, volume_free_peers
        )

    def counts(self, peers_anti: bool, others: Sequence[Pod]) -> bool:
        """Whether the count holds with ``others`` taken off, added back or nominated:
        ``counted``, none of them with a required anti-affinity term where
        InterPodAffinity reads them (``peers_anti``: ``reads_peer_anti_affinity``), and
        none with a volume where ``volume_free_peers``."""
        if not self.counted:
            return False
        if peers_anti and any(p.pod_anti_affinity.required for p in others):
            return False
        return not (self.volume_free_peers and any(has_volumes(p) for p in others))

    def unaffected(self, filters: Sequence[FilterPlugin]) -> list[FilterPlugin]:
        """``filters`` but NodeResourcesFit: the ones whose verdict the pods taken off,
        added back or nominated do not change."""
        return [plugin for plugin in filters if all(plugin is not fit for fit in self.fit_plugins)]

    def at(self, state: ClusterState, row: int) -> tuple[list[int], list[int]]:
        """Node ``row``'s allocatable and requested at ``columns``, as Python ints."""
        allocatable: list[int] = state.allocatable[row].tolist()
        requested: list[int] = state.requested[row].tolist()
        return [allocatable[c] for c in self.columns], [requested[c] for c in self.columns]

    def vector(self, pod: Pod) -> list[int]:
        """``pod``'s requests at ``columns`` (``ClusterState.request_vector``'s, there)."""
        requests = pod.requests
        vector = [1]
        for name in self.names[1:]:
            vector.append(requests.get(name, 0))
        return vector

    def patterns(self, allocatable: IntArray, requested: IntArray) -> npt.NDArray[np.bool_]:
        """Per node (rows of ``allocatable`` and ``requested``, both at ``columns``),
        which of the conditions ``status`` reads hold: the node is full, then per check
        of every instance, the resource is short and the node too small for it. A node
        passes where none holds; equal rows make equal statuses."""
        bits = [requested[:, 0] + 1 > allocatable[:, 0]]
        for checks in self.checks:
            for _, position, amount in checks:
                if position is None:
                    bits.append(np.ones(len(requested), np.bool_))
                    bits.append(np.ones(len(requested), np.bool_))
                else:
                    bits.append(amount > allocatable[:, position] - requested[:, position])
                    bits.append(bits[-1] & (amount > allocatable[:, position]))
        return np.stack(bits, axis=1)

    def fits(self, allocatable: Sequence[int], requested: Sequence[int]) -> bool:
        """NodeResourcesFit's verdict (every instance's) on a node with ``requested``
        (both at ``columns``)."""
        if requested[0] + 1 > allocatable[0]:
            return False
        for checks in self.checks:
            for _, position, amount in checks:
                if position is None or amount > allocatable[position] - requested[position]:
                    return False
        return True

    def status(self, allocatable: Sequence[int], requested: Sequence[int]) -> Status:
        """What the filters say on a node with ``requested`` (both at ``columns``), given
        that every filter but NodeResourcesFit passes it: the first instance that rejects
        it, with its reasons in its order and the strongest of their codes, as
        ``run_filter_pass`` reports a node."""
        full = requested[0] + 1 > allocatable[0]
        for checks in self.checks:
            rejections: list[tuple[str, Code]] = [(TOO_MANY_PODS, Code.UNSCHEDULABLE)] if full else []
            for name, position, amount in checks:
                if position is None:
                    rejections.append((insufficient(name), Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
                elif amount > allocatable[position] - requested[position]:
                    too_small = amount > allocatable[position]
                    code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if too_small else Code.UNSCHEDULABLE
                    rejections.append((insufficient(name), code))
            if rejections:
                reasons = tuple(reason for reason, _ in rejections)
                return Status(max(code for _, code in rejections), reasons, NodeResourcesFit.name)
        return SUCCESS


def added(requested: Sequence[int], vector: Sequence[int]) -> list[int]:
    """``requested`` with ``vector`` added, element by element (same lengths)."""
    return list(map(operator.add, requested, vector))


def taken_off(requested: Sequence[int], vector: Sequence[int]) -> list[int]:
    """``requested`` with ``vector`` taken off, element by element (same lengths)."""
    return list(map(operator.sub, requested, vector))


class ResourceReprieve:
    """NodeResourcesFit's verdict on one node as pods are added back, kept as the node's
    requested row at the checked columns (``requested``) with the pods kept so far and
    the nominated peers."""

    def __init__(
        self,
        state: ClusterState,
        checks: FitChecks,
        row: int,
        off: Sequence[Pod],
        nominated: Sequence[Pod] = (),
    ) -> None:
        self.checks = checks
        self.allocatable, requested = checks.at(state, row)
        self.vectors = {p.key: checks.vector(p) for p in off}
        for vector in self.vectors.values():
            requested = taken_off(requested, vector)
        for peer in nominated:
            requested = added(requested, checks.vector(peer))
        self.requested = requested

    def unaffected(self, filters: Sequence[FilterPlugin]) -> list[FilterPlugin]:
        return self.checks.unaffected(filters)

    def fits(self, requested: Sequence[int] | None = None) -> bool:
        """NodeResourcesFit's verdict with the node's requested row ``requested`` (at the
        checked columns; default: the pods kept so far)."""
        return self.checks.fits(self.allocatable, self.requested if requested is None else requested)

    def status(self) -> Status:
        """``FitChecks.status`` with the pods kept so far."""
        return self.checks.status(self.allocatable, self.requested)

    def add_back(self, pod: Pod) -> bool:
        """Whether the pod still fits with ``pod`` (one taken off) back on the node; if
        so it stays."""
        requested = added(self.requested, self.vectors[pod.key])
        if not self.fits(requested):
            return False
        self.requested = requested
        return True

    @staticmethod
    def applies(
        state: ClusterState,
        filters: Sequence[FilterPlugin],
        pod: Pod,
        row: int,
        added_back: Sequence[Pod],
        nominated: Sequence[Pod] = (),
        namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
        checks: FitChecks | None = None,
    ) -> ResourceReprieve | None:
        """A reprieve for ``pod`` on ``row`` with the pods of ``added_back`` taken off the
        node (they are on it in ``state``) and ``nominated`` (the node's nominated peers,
        ``preemption_victims.nominated_peers``) counted, over ``filters`` (the node-only
        ones left out), or None where the filters must run. ``checks``: the pod's, made
        once for all the nodes of a dry run (made here when not given)."""
        if checks is None:
            checks = FitChecks.of(state, filters, pod, namespace_labels)
        if not checks.counts(reads_peer_anti_affinity(filters), (*added_back, *nominated)):
            return None
        return ResourceReprieve(state, checks, row, added_back, nominated)


def counted_fits(
    state: ClusterState,
    filters: Sequence[FilterPlugin],
    pod: Pod,
    namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
) -> tuple[list[NodeResourcesFit], bool] | None:
    """The NodeResourcesFit instances of ``filters`` (the node-only ones left out) when
    for ``pod`` nothing else among them can read the pods taken off, added back or
    nominated, or only their volumes (then True beside them: those pods must have none;
    the pod's part of ``ResourceReprieve.applies``); None otherwise."""
    ctx = CycleContext(state, pod, namespace_labels or {})
    fits: list[NodeResourcesFit] = []
    volume_free_peers = False
    for plugin in filters:
        kind = type(plugin)
        if type(plugin) is NodeResourcesFit:
            fits.append(plugin)
        elif kind is InterPodAffinity:
            if pod.pod_affinity.required or pod.pod_anti_affinity.required:
                return None
        elif kind in READS_POD_VOLUMES:
            volume_free_peers = volume_free_peers or plugin.pre_filter(ctx).code != Code.SKIP
        elif kind in SKIP_READS_NO_PODS:
            if plugin.pre_filter(ctx).code != Code.SKIP:
                return None
        elif kind not in READS_NO_PODS:
            return None
    return fits, volume_free_peers


def reads_peer_anti_affinity(filters: Sequence[FilterPlugin]) -> bool:
    """Whether ``filters`` read the required anti-affinity of pods placed or nominated
    (InterPodAffinity is among them): ``FitChecks.counts``' question, asked once."""
    return any(type(plugin) is InterPodAffinity for plugin in filters)
