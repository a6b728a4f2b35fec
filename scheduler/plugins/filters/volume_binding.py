"""VolumeBinding: a pod's PersistentVolumeClaims and generic ephemeral volumes must be
bindable on the node, as kube-scheduler's VolumeBinding decides
(``scheduler.volumes.binding`` has the rules). PreFilter rejects every node for a
missing, lost or deleted claim, and for an unbound claim the PV controller binds
(``pod has unbound immediate PersistentVolumeClaims``); Filter rejects, per node, a
bound volume whose node affinity does not match, a bound volume that does not exist,
and unbound ``WaitForFirstConsumer`` claims that find no volume and cannot be
provisioned there. All its rejections are unresolvable, as kube-scheduler's are."""

from __future__ import annotations

from scheduler.framework.plugin import CycleContext, FilterBase, Rejection
from scheduler.framework.status import SKIP, SUCCESS, Code, Status, unresolvable
from scheduler.state.cluster_state import IntArray
from scheduler.volumes.binding import (
    BIND_CONFLICT,
    NODE_CONFLICT,
    PV_NOT_EXIST,
    UNBOUND_IMMEDIATE,
    ClaimProblemError,
    PodClaims,
    find_pod_volumes,
    pod_claims,
)


class VolumeBinding(FilterBase):
    name = "VolumeBinding"

    def pre_filter(self, ctx: CycleContext) -> Status:
        if not ctx.pod.volumes:
            return SKIP
        try:
            claims = pod_claims(ctx.pod, ctx.state.volumes)
        except ClaimProblemError as problem:
            return unresolvable(self.name, str(problem))
        if claims.immediate:
            return unresolvable(self.name, UNBOUND_IMMEDIATE)
        ctx.data[self.name] = claims
        return SUCCESS

    def filter(self, ctx: CycleContext, nodes: IntArray) -> list[Rejection]:
        claims: PodClaims = ctx.data[self.name]
        if not claims.bound and not claims.delayed:
            return []
        fit = find_pod_volumes(ctx.state, claims, nodes)
        unresolvable_code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        return [
            Rejection(NODE_CONFLICT, fit.node_conflict, unresolvable_code),
            Rejection(BIND_CONFLICT, fit.bind_conflict, unresolvable_code),
            Rejection(PV_NOT_EXIST, fit.pv_missing, unresolvable_code),
        ]
