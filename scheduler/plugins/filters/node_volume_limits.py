"""NodeVolumeLimits: where a node's CSINode gives a CSI driver an allocatable count,
the distinct volumes of that driver used by the node's pods plus the pod's new ones
must not exceed it. A claim's driver and volume handle come from its bound
PersistentVolume (CSI, or an in-tree source kube counts as the CSI driver it migrated
to: ``objects.csi_migration``), else (unbound) from its class's provisioner (an in-tree
one as its CSI driver) with a handle of the claim's own. Not counted, unlike
kube-scheduler: VolumeAttachments (volumes still attached for pods that are gone) and
inline in-tree volumes in the pod spec.

A node's volumes in use are kept between cycles while neither the node's row
(``ClusterState.node_version``: pods placed or removed) nor the catalog's claims, volumes
and classes (``VolumeCatalog.generation``) moved: reading every placed pod's claims
again for every node made this filter 13 of the 15 s that 1,000 cycles of
scheduler_perf's SchedulingCSIPVs took at 1,000 nodes (py-spy on the live scheduler)."""

from __future__ import annotations

import uuid
from collections import Counter

import numpy as np

from scheduler.framework.plugin import CycleContext, Rejection, SkipUnlessBase
from scheduler.objects.csi_migration import migrated_driver
from scheduler.objects.pod import Pod
from scheduler.state.cluster_state import ClusterState, IntArray
from scheduler.volumes.catalog import VolumeCatalog

REASON = "node(s) exceed max volume count"


class NodeVolumeLimits(SkipUnlessBase):
    name = "NodeVolumeLimits"

    def __init__(self) -> None:
        # Handles of volumes not provisioned yet must not collide with real ones.
        self._unbound_prefix = uuid.uuid4().hex
        # Per node row: (state serial, node version, catalog generation) when read, the
        # names of the volumes its pods use, and how many of each driver.
        self._in_use: dict[int, tuple[tuple[int, int, int], frozenset[str], Counter[str]]] = {}

    def applies(self, ctx: CycleContext) -> bool:
        return bool(ctx.pod.volumes) and bool(ctx.state.volumes.csi_nodes)

    def attachable(self, pod: Pod, catalog: VolumeCatalog) -> dict[str, str]:
        """``filterAttachableVolumes``: ``{driver/handle: driver}`` of the pod's claims
        (claims that do not exist are not counted)."""
        out: dict[str, str] = {}
        for volume in pod.volumes:
            claim = catalog.claim(pod.namespace, volume.claim)
            if claim is None:
                continue
            bound = catalog.volume(claim.volume_name) if claim.volume_name else None
            if bound is not None:
                driver, handle = bound.csi_driver, bound.csi_handle
            else:
                storage_class = catalog.storage_class(claim.storage_class) if claim.storage_class else None
                if storage_class is None:
                    continue
                driver = migrated_driver(storage_class.provisioner)
                handle = f"{self._unbound_prefix}-{claim.key}"
            if driver and handle:
                out[f"{driver}/{handle}"] = driver
        return out

    def filter(self, ctx: CycleContext, nodes: IntArray) -> list[Rejection]:
        state, catalog = ctx.state, ctx.state.volumes
        new = self.attachable(ctx.pod, catalog)
        exceeded = np.zeros(nodes.size, np.bool_)
        if not new:
            return []
        versions = state.node_version
        for position, i in enumerate(nodes):
            row = int(i)
            csi_node = catalog.csi_nodes.get(state.nodes[row].name)
            if csi_node is None or not csi_node.limits:
                continue
            attached, in_use = self._node_in_use(state, row, int(versions[row]))
            wanted = Counter(driver for name, driver in new.items() if name not in attached)
            exceeded[position] = any(
                in_use[driver] + count > csi_node.limits[driver]
                for driver, count in wanted.items()
                if driver in csi_node.limits
            )
        return [Rejection(REASON, exceeded)]

    def _node_in_use(
        self, state: ClusterState, row: int, version: int
    ) -> tuple[frozenset[str], Counter[str]]:
        """The volumes the node's pods use (``driver/handle``) and their count per driver."""
        key = (state.serial, version, state.volumes.generation)
        kept = self._in_use.get(row)
        if kept is not None and kept[0] == key:
            return kept[1], kept[2]
        attached: dict[str, str] = {}
        for other in state.pods_on_node[row].values():
            attached.update(self.attachable(other, state.volumes))
        names, in_use = frozenset(attached), Counter(attached.values())
        self._in_use[row] = (key, names, in_use)
        return names, in_use
