"""Reprieves of SelectVictimsOnNode counted in requests, not run through the filters.

Once every lower-priority pod is off a node and the pod passes there, kube's
``SelectVictimsOnNode`` adds them back one at a time and keeps each after which the pod
still fits. Where nothing but the node's requests can change that verdict, the verdict is
NodeResourcesFit's arithmetic on the node's requested row less the pods taken off plus
those kept so far: the other filters run once, on the state as it is, and nothing is
taken off the state. That holds (``ResourceReprieve.applies``) when:

- no pod is nominated to the node (their pass would place them);
- every filter left after the node-only ones is NodeResourcesFit, InterPodAffinity, or one
  that skipped the pod on grounds that never read placed pods (no host ports, no GPUs,
  no volumes the catalogs constrain, no DoNotSchedule spread, no resource claims);
- InterPodAffinity can only say what it said already: the pod has no required affinity
  or anti-affinity term and none of the pods added back has required anti-affinity, so
  the existing pods' anti-affinity it checks is what it was when the pod passed.

Otherwise, or where those other filters reject the node, the caller takes the pods off
the state and runs the filters for each reprieve. tests/unit/test_preemption_equivalence.py
holds both to the dry run that always did (tests/unit/preemption_reference.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

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
    VolumeRestrictions,
    NodeVolumeLimits,
    VolumeBinding,
    VolumeZone,
    PodTopologySpread,
    DynamicResources,
)


class ResourceReprieve:
    """NodeResourcesFit's verdict on one node as pods are added back, kept as the node's
    requested row (``requested``) with the pods kept so far."""

    def __init__(
        self,
        state: ClusterState,
        fits: Sequence[NodeResourcesFit],
        pod: Pod,
        row: int,
        taken_off: Sequence[Pod],
    ) -> None:
        self.fit_plugins = tuple(fits)
        self.allocatable: IntArray = state.allocatable[row]
        self.pods_column = state.resource_index[PODS]
        self.vectors = {p.key: state.request_vector(p) for p in taken_off}
        self.requested: IntArray = state.requested[row] - sum(self.vectors.values())
        # (resource, column, amount) each plugin checks, in the pod's order; a missing
        # column fails as the plugin does.
        self.checks: list[list[tuple[str, int | None, int]]] = [
            [
                (name, state.resource_index.get(name), amount)
                for name, amount in pod.requests.items()
                if amount > 0 and name not in fit.ignored_resources and is_checked_resource(name)
            ]
            for fit in fits
        ]

    def unaffected(self, filters: Sequence[FilterPlugin]) -> list[FilterPlugin]:
        """``filters`` but NodeResourcesFit: the ones whose verdict the pods taken off
        and added back do not change."""
        return [plugin for plugin in filters if all(plugin is not fit for fit in self.fit_plugins)]

    def fits(self, requested: IntArray | None = None) -> bool:
        """NodeResourcesFit's verdict (every instance's) with the node's requested row
        ``requested`` (default: the pods kept so far)."""
        requested = self.requested if requested is None else requested
        allocatable = self.allocatable
        if requested[self.pods_column] + 1 > allocatable[self.pods_column]:
            return False
        for checks in self.checks:
            for _, column, amount in checks:
                if column is None or amount > allocatable[column] - requested[column]:
                    return False
        return True

    def status(self) -> Status:
        """What the filters say on the node with the pods kept so far, given that every
        filter but NodeResourcesFit passes it: the first instance that rejects it, with
        its reasons in its order and the strongest of their codes, as ``run_filter_pass``
        reports a node."""
        requested, allocatable = self.requested, self.allocatable
        full = bool(requested[self.pods_column] + 1 > allocatable[self.pods_column])
        for checks in self.checks:
            rejections: list[tuple[str, Code]] = [(TOO_MANY_PODS, Code.UNSCHEDULABLE)] if full else []
            for name, column, amount in checks:
                if column is None:
                    rejections.append((insufficient(name), Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
                elif amount > allocatable[column] - requested[column]:
                    too_small = amount > allocatable[column]
                    code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if too_small else Code.UNSCHEDULABLE
                    rejections.append((insufficient(name), code))
            if rejections:
                return Status(max(code for _, code in rejections), tuple(reason for reason, _ in rejections))
        return SUCCESS

    def add_back(self, pod: Pod) -> bool:
        """Whether the pod still fits with ``pod`` (one taken off) back on the node; if
        so it stays."""
        requested = self.requested + self.vectors[pod.key]
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
        nominated: Sequence[Pod],
        namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
    ) -> ResourceReprieve | None:
        """A reprieve for ``pod`` on ``row`` with the pods of ``added_back`` taken off the
        node (they are on it in ``state``), over ``filters`` (the node-only ones left
        out), or None where the filters must run."""
        node = state.nodes[row].name
        if any(p.nominated_node_name == node for p in nominated):
            return None
        ctx = CycleContext(state, pod, namespace_labels or {})
        fits: list[NodeResourcesFit] = []
        for plugin in filters:
            if type(plugin) is NodeResourcesFit:
                fits.append(plugin)
            elif type(plugin) is InterPodAffinity:
                if pod.pod_affinity.required or pod.pod_anti_affinity.required:
                    return None
                if any(p.pod_anti_affinity.required for p in added_back):
                    return None
            elif type(plugin) in SKIP_READS_NO_PODS:
                if plugin.pre_filter(ctx).code != Code.SKIP:
                    return None
            else:
                return None
        return ResourceReprieve(state, fits, pod, row, added_back)
