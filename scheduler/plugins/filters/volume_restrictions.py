"""VolumeRestrictions: a claim with the ``ReadWriteOncePod`` access mode already used
by a placed pod rejects every node (preemption may help, so the rejection is
resolvable); an inline disk the node already mounts conflicts (GCE PD and iSCSI
unless both mounts are read-only, RBD the same where monitors overlap, AWS EBS
always). Only ``persistentVolumeClaim`` volumes count, as in kube-scheduler."""

from __future__ import annotations

import numpy as np

from scheduler.framework.plugin import CycleContext, FilterBase, Rejection
from scheduler.framework.status import SKIP, SUCCESS, Status, unresolvable
from scheduler.objects.pod import Pod
from scheduler.objects.volumes import READ_WRITE_ONCE_POD
from scheduler.state.cluster_state import ClusterState, IntArray

DISK_CONFLICT = "node(s) had no available disk"
READ_WRITE_ONCE_POD_CONFLICT = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
    "already in-use by another pod"
)


def claims_in_use(state: ClusterState, namespace: str, claims: set[str]) -> int:
    """How many of ``claims`` (in ``namespace``) placed pods use (``IsPVCUsedByPods``)."""
    used: set[str] = set()
    for placement in state.placements.values():
        pod = placement.pod
        if pod.namespace != namespace:
            continue
        used.update(v.claim for v in pod.volumes if not v.ephemeral and v.claim in claims)
    return len(used)


def shares_a_claim(pod: Pod, other: Pod) -> bool:
    """Whether the two pods name a claim in common (``persistentVolumeClaim`` volumes)."""
    if pod.namespace != other.namespace:
        return False
    mine = {v.claim for v in pod.volumes if not v.ephemeral}
    return any(not v.ephemeral and v.claim in mine for v in other.volumes)


def disk_conflict(pod: Pod, other: Pod) -> bool:
    return any(mine.conflicts(theirs) for mine in pod.inline_disks for theirs in other.inline_disks)


class VolumeRestrictions(FilterBase):
    name = "VolumeRestrictions"

    def pre_filter(self, ctx: CycleContext) -> Status:
        pod, catalog = ctx.pod, ctx.state.volumes
        if not pod.volumes and not pod.inline_disks:
            return SKIP
        once: set[str] = set()
        for volume in pod.volumes:
            if volume.ephemeral:
                continue
            claim = catalog.claim(pod.namespace, volume.claim)
            if claim is None:
                return unresolvable(self.name, f'persistentvolumeclaim "{volume.claim}" not found')
            if READ_WRITE_ONCE_POD in claim.access_modes:
                once.add(claim.name)
        conflicting = claims_in_use(ctx.state, pod.namespace, once) if once else 0
        if not pod.inline_disks and conflicting == 0:
            return SKIP
        ctx.data[self.name] = conflicting
        return SUCCESS

    def filter(self, ctx: CycleContext, nodes: IntArray) -> list[Rejection]:
        pod, pods_on_node = ctx.pod, ctx.state.pods_on_node
        conflict = np.zeros(nodes.size, np.bool_)
        if pod.inline_disks:
            conflict = np.fromiter(
                (any(disk_conflict(pod, other) for other in pods_on_node[i].values()) for i in nodes),
                np.bool_,
                nodes.size,
            )
        rejections = [Rejection(DISK_CONFLICT, conflict)]
        if ctx.data[self.name]:
            # A node's disk conflict is its reason; every other node gets the claim's.
            rejections.append(Rejection(READ_WRITE_ONCE_POD_CONFLICT, ~conflict))
        return rejections
