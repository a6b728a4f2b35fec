"""The binding cycle's built-in plugins (``binding_cycle``), each a thin step over the
module that does the work:

- ``VolumeBindingStep`` (Reserve, PreBind): ``volume_binder.VolumeBinder`` assumes the
  volumes for the chosen node and binds the claims before the Binding;
- ``HamiBinder`` (Reserve, Bind): on a node whose GPUs HAMi shares, the allocation of
  the pod's GPUs (``hami.allocation_text``) at Reserve, then the node lock and the
  Binding that carries it (``hami.bind_under_lock``); it skips every other pod;
- ``DefaultBinder`` (Bind): the ``pods/binding`` subresource.
"""

from __future__ import annotations

from scheduler.k8s.client.api import BindOutcome, BindResult, KubeApi
from scheduler.k8s.scheduling.binding_cycle import BindingCycle, PreBindError
from scheduler.k8s.scheduling.hami import NodeLocker, NodeLocks, allocation_text, bind_under_lock
from scheduler.k8s.scheduling.volume_binder import VolumeBinder, VolumeBindError
from scheduler.state.cluster_state import ClusterState
from scheduler.volumes.binding import PodVolumes

VOLUME_BINDING = "VolumeBinding"
HAMI_BINDER = "HAMiBinder"
DEFAULT_BINDER = "DefaultBinder"


class VolumeBindingStep:
    name = VOLUME_BINDING

    def __init__(self, binder: VolumeBinder) -> None:
        self.binder = binder

    def reserve(self, cycle: BindingCycle) -> None:
        cycle.held[self.name] = self.binder.reserve(cycle.pod, cycle.node_index)

    def unreserve(self, cycle: BindingCycle) -> None:
        volumes = cycle.held.pop(self.name, None)
        if isinstance(volumes, PodVolumes):
            self.binder.unreserve(volumes)

    async def pre_bind(self, cycle: BindingCycle) -> None:
        volumes = cycle.held.get(self.name)
        if not isinstance(volumes, PodVolumes) or volumes.empty:
            return
        try:
            await self.binder.pre_bind(cycle.pod, cycle.node, volumes)
        except VolumeBindError as error:
            # pre_bind gave the assumptions back already.
            cycle.held.pop(self.name, None)
            raise PreBindError(self.name, "volume-binding", str(error)) from None


class HamiBinder:
    name = HAMI_BINDER

    def __init__(self, state: ClusterState, locker: NodeLocker, locks: NodeLocks) -> None:
        self.state = state
        self.locker = locker
        self.locks = locks

    def reserve(self, cycle: BindingCycle) -> None:
        pod = cycle.pod
        if pod.gpu.count and self.state.gpu_sharing[cycle.node_index]:
            # HAMi's device plugin allocates what the pod's annotations say.
            cycle.held[self.name] = allocation_text(pod, self.state.placements[pod.key].gpu_use)

    def unreserve(self, cycle: BindingCycle) -> None:
        # The allocation is the cache's placement; forgetting the pod gives it back.
        cycle.held.pop(self.name, None)

    def allocation(self, cycle: BindingCycle) -> str | None:
        held = cycle.held.get(self.name)
        return held if isinstance(held, str) else None

    async def bind(self, cycle: BindingCycle) -> BindResult | None:
        allocation = self.allocation(cycle)
        if allocation is None:
            return None
        result = await bind_under_lock(self.locker, self.locks, cycle.pod, cycle.node, allocation)
        return BindResult(BindOutcome.NODE_LOCKED) if result is None else result


class DefaultBinder:
    name = DEFAULT_BINDER

    def __init__(self, api: KubeApi) -> None:
        self.api = api

    async def bind(self, cycle: BindingCycle) -> BindResult | None:
        return await self.api.bind(cycle.pod, cycle.node)
