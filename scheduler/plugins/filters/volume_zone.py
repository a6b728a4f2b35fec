"""VolumeZone: the zone and region labels of the PersistentVolumes bound to a pod's
claims (``topology.kubernetes.io/zone``, ``/region`` and their
``failure-domain.beta.kubernetes.io`` forms; a value may list zones joined by ``__``)
must hold on the node. A node with none of these labels fits any volume (a
single-zone cluster). Only ``persistentVolumeClaim`` volumes count, as in
kube-scheduler; unbound ``WaitForFirstConsumer`` claims are skipped."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scheduler.framework.plugin import CycleContext, FilterBase, Rejection
from scheduler.framework.status import SKIP, SUCCESS, Code, Status, unresolvable
from scheduler.objects.volumes import PersistentVolume
from scheduler.state.cluster_state import BoolArray, ClusterState, IntArray

REASON = "node(s) had no available volume zone"
NO_NAMES = "PersistentVolumeClaim had no pv name and storageClass name"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (BETA_ZONE, BETA_REGION, ZONE, REGION)
_GA = {BETA_ZONE: ZONE, BETA_REGION: REGION}


@dataclass(frozen=True)
class VolumeTopology:
    volume: str
    key: str
    values: frozenset[str]


def volume_topologies(volume: PersistentVolume) -> list[VolumeTopology]:
    """``getPVTopologies``: a label whose value has an empty zone is ignored."""
    out = []
    for key in TOPOLOGY_LABELS:
        value = volume.labels.get(key)
        if value is None:
            continue
        zones = [z.strip() for z in value.split("__")]
        if any(not z for z in zones):
            continue
        out.append(VolumeTopology(volume.name, key, frozenset(zones)))
    return out


def _label_in(state: ClusterState, key: str, values: frozenset[str]) -> tuple[BoolArray, BoolArray]:
    """(node has the label, its value is one of ``values``) over all nodes."""
    domains = state.label_domains(key)
    wanted = [domains.index[v] for v in values if v in domains.index]
    inside = np.isin(domains.ids, np.asarray(wanted, np.int64)) if wanted else np.zeros(len(state), np.bool_)
    return domains.ids >= 0, inside


class VolumeZone(FilterBase):
    name = "VolumeZone"

    def pre_filter(self, ctx: CycleContext) -> Status:
        pod, catalog = ctx.pod, ctx.state.volumes
        topologies: list[VolumeTopology] = []
        for volume in pod.volumes:
            if volume.ephemeral:
                continue
            claim = catalog.claim(pod.namespace, volume.claim)
            if claim is None:
                return unresolvable(self.name, f'persistentvolumeclaim "{volume.claim}" not found')
            if not claim.volume_name:
                if not claim.storage_class:
                    return unresolvable(self.name, NO_NAMES)
                storage_class = catalog.storage_class(claim.storage_class)
                if storage_class is None:
                    return unresolvable(
                        self.name, f'storageclass.storage.k8s.io "{claim.storage_class}" not found'
                    )
                if storage_class.binding_mode == "WaitForFirstConsumer":
                    continue
                return unresolvable(self.name, "PersistentVolume had no name")
            bound = catalog.volume(claim.volume_name)
            if bound is None:
                return unresolvable(self.name, f'persistentvolume "{claim.volume_name}" not found')
            topologies += volume_topologies(bound)
        if not topologies:
            return SKIP
        ctx.data[self.name] = topologies
        return SUCCESS

    def filter(self, ctx: CycleContext, nodes: IntArray) -> list[Rejection]:
        state = ctx.state
        topologies: list[VolumeTopology] = ctx.data[self.name]
        constrained = np.zeros(len(state), np.bool_)
        for key in TOPOLOGY_LABELS:
            constrained |= state.label_domains(key).ids >= 0
        fits = np.ones(len(state), np.bool_)
        for topology in topologies:
            has_key, inside = _label_in(state, topology.key, topology.values)
            ga = _GA.get(topology.key)
            if ga is not None:
                _, inside_ga = _label_in(state, ga, topology.values)
                inside = np.where(has_key, inside, inside_ga)
            fits &= inside
        rejected = constrained & ~fits
        return [Rejection(REASON, rejected[nodes], Code.UNSCHEDULABLE_AND_UNRESOLVABLE)]
