"""kube-scheduler's volume binder (pkg/scheduler/framework/plugins/volumebinding/
binder.go) over all candidate nodes at once.

PreFilter (``pod_claims``): every claim of the pod must exist (an ephemeral volume's
claim must be the pod's own), not be lost or being deleted; claims are then bound (a
volume named and ``pv.kubernetes.io/bind-completed``), unbound with a
``WaitForFirstConsumer`` class ("delayed", the scheduler's to bind), or unbound
otherwise, which the PV controller binds: the pod waits.

Filter (``find_pod_volumes``), per node:
- a bound claim's volume must exist and its ``spec.nodeAffinity`` match the node;
- a delayed claim with ``volume.kubernetes.io/selected-node`` fits only that node and
  is provisioned there;
- the other delayed claims, smallest request first, each take the smallest available
  PV of their class that fits (capacity, volume mode, attributes class, access modes,
  selector, node affinity; a PV pre-bound to the claim wins whenever it fits), one
  PV per claim;
- the claims left must be provisionable: a class with a provisioner (not
  ``kubernetes.io/no-provisioner``) whose ``allowedTopologies`` match the node.
Storage capacity (CSIStorageCapacity) is not checked: a provisioner without room
takes the selected-node annotation back and the pod is decided again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from scheduler.objects.pod import Pod
from scheduler.objects.volumes import Claim, PersistentVolume
from scheduler.state.cluster_state import BoolArray, ClusterState, IntArray
from scheduler.volumes.catalog import VolumeCatalog
from scheduler.volumes.node_masks import NodeLookup, selector_mask

NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"


@dataclass(frozen=True)
class PodClaims:
    """``GetPodVolumeClaims``: the pod's claims by binding state."""

    bound: tuple[Claim, ...] = ()
    delayed: tuple[Claim, ...] = ()
    immediate: tuple[Claim, ...] = ()


class ClaimProblemError(Exception):
    """A claim that keeps the pod off every node, in kube-scheduler's words."""


def pod_claims(pod: Pod, catalog: VolumeCatalog) -> PodClaims:
    """``podHasPVCs`` then ``GetPodVolumeClaims``; raises ``ClaimProblemError``."""
    claims: list[Claim] = []
    for volume in pod.volumes:
        claim = catalog.claim(pod.namespace, volume.claim)
        if claim is None:
            if volume.ephemeral:
                raise ClaimProblemError(
                    "waiting for ephemeral volume controller to create the persistentvolumeclaim "
                    f'"{volume.claim}"'
                )
            raise ClaimProblemError(f'persistentvolumeclaim "{volume.claim}" not found')
        if claim.phase == "Lost":
            raise ClaimProblemError(
                f'persistentvolumeclaim "{claim.name}" bound to non-existent persistentvolume '
                f'"{claim.volume_name}"'
            )
        if claim.deleting:
            raise ClaimProblemError(f'persistentvolumeclaim "{claim.name}" is being deleted')
        if volume.ephemeral and (not claim.controller_uid or claim.controller_uid != pod.uid):
            raise ClaimProblemError(
                f"PVC {claim.namespace}/{claim.name} was not created for pod {pod.namespace}/{pod.name} "
                "(pod is not owner)"
            )
        claims.append(claim)
    bound, delayed, immediate = [], [], []
    for claim in claims:
        if claim.fully_bound:
            bound.append(claim)
        elif catalog.is_delay_binding(claim) and not claim.volume_name:
            delayed.append(claim)
        else:  # pre-bound claims too: the PV controller binds them
            immediate.append(claim)
    return PodClaims(tuple(bound), tuple(delayed), tuple(immediate))


def _fits_statically(volume: PersistentVolume, claim: Claim) -> bool:
    """``FindMatchingVolume``'s checks before node affinity, for any volume."""
    return (
        volume.capacity_bytes >= claim.request_bytes
        and volume.volume_mode == claim.volume_mode
        and volume.attributes_class == claim.attributes_class
        and not volume.deleting
    )


def _available_for(volume: PersistentVolume, claim: Claim) -> bool:
    """An unbound volume the claim may take (the node aside)."""
    return (
        volume.claim_ref is None
        and _fits_statically(volume, claim)
        and volume.phase == "Available"
        and (claim.selector is None or claim.selector.matches(volume.labels))
        and volume.storage_class == claim.storage_class
        and set(claim.access_modes) <= set(volume.access_modes)
    )


@dataclass
class StaticMatch:
    """For one delayed claim: its candidate volumes and, per node, the one it takes
    (an index into ``candidates``; -1: none, the claim must be provisioned)."""

    claim: Claim
    candidates: list[PersistentVolume]
    choice: IntArray


@dataclass
class PodVolumes:
    """What binding the pod's volumes on one node takes: volumes to bind to claims,
    and claims to provision there."""

    static: tuple[tuple[Claim, PersistentVolume], ...] = ()
    provisions: tuple[Claim, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.static and not self.provisions


@dataclass
class VolumeFit:
    """Per candidate node (aligned with the ``nodes`` given): why the pod's volumes do
    not fit, and what the delayed claims would take."""

    node_conflict: BoolArray
    pv_missing: BoolArray
    bind_conflict: BoolArray
    matches: list[StaticMatch] = field(default_factory=list)
    # Delayed claims with a selected node (provisioned there).
    selected: tuple[Claim, ...] = ()

    def pod_volumes(self, position: int) -> PodVolumes:
        """The bindings and provisions for the node at ``position`` in ``nodes``."""
        static = []
        provisions = list(self.selected)
        for match in self.matches:
            chosen = int(match.choice[position])
            if chosen >= 0:
                static.append((match.claim, match.candidates[chosen]))
            else:
                provisions.append(match.claim)
        return PodVolumes(tuple(static), tuple(provisions))


def _check_bound(
    state: ClusterState, catalog: VolumeCatalog, claims: PodClaims, nodes: IntArray
) -> tuple[BoolArray, BoolArray]:
    """``checkBoundClaims``: (node affinity conflict, volume missing), claims in order;
    a node's first failing claim decides."""
    node_conflict = np.zeros(nodes.size, np.bool_)
    pv_missing = np.zeros(nodes.size, np.bool_)
    for claim in claims.bound:
        volume = catalog.volume(claim.volume_name)
        if volume is None:
            pv_missing |= ~node_conflict
            break
        node_conflict |= ~selector_mask(state, volume.node_affinity)[nodes]
    return node_conflict, pv_missing


def _match_static(
    state: ClusterState, catalog: VolumeCatalog, claims: list[Claim], nodes: IntArray
) -> list[StaticMatch]:
    """``findMatchingVolumes`` on every node: claims by increasing request, each taking
    the smallest fitting volume not taken by an earlier claim on that node."""
    lookup = NodeLookup(state)
    # Position of each state node among ``nodes`` (-1: not a candidate).
    position = np.full(len(state), -1, np.int64)
    position[nodes] = np.arange(nodes.size)
    # Positions where each volume is taken by an earlier claim.
    taken: dict[str, IntArray] = {}
    matches = []
    for claim in sorted(claims, key=lambda c: c.request_bytes):
        volumes = catalog.volumes_of_class(claim.storage_class)
        choice = np.full(nodes.size, -1, np.int64)
        prebound = [v for v in volumes if v.bound_to(claim) and _fits_statically(v, claim)]
        if prebound:
            # A volume pre-bound to the claim is the only match, where it fits.
            candidates = prebound[:1]
            choice[selector_mask(state, candidates[0].node_affinity)[nodes]] = 0
        else:
            candidates = sorted(
                (v for v in volumes if _available_for(v, claim)), key=lambda v: v.capacity_bytes
            )
            unchosen = nodes.size
            for i, volume in enumerate(candidates):
                where = position[lookup.matching(volume.node_affinity)]
                where = where[where >= 0]
                where = where[choice[where] < 0]
                if volume.name in taken:
                    where = where[~np.isin(where, taken[volume.name])]
                if where.size:
                    choice[where] = i
                    earlier = taken.get(volume.name)
                    taken[volume.name] = where if earlier is None else np.concatenate([earlier, where])
                    unchosen -= where.size
                    if unchosen == 0:
                        break
        matches.append(StaticMatch(claim, candidates, choice))
    return matches


def _provisionable(state: ClusterState, catalog: VolumeCatalog, claim: Claim, nodes: IntArray) -> BoolArray:
    """``checkVolumeProvisions`` for one claim: its class provisions, where its
    allowed topologies match (a class gone since counts as not provisioning)."""
    storage_class = catalog.storage_class(claim.storage_class)
    if storage_class is None or not storage_class.provisions:
        return np.zeros(nodes.size, np.bool_)
    return selector_mask(state, storage_class.allowed_topologies)[nodes]


def find_pod_volumes(state: ClusterState, claims: PodClaims, nodes: IntArray) -> VolumeFit:
    """``FindPodVolumes`` for every node in ``nodes`` (indices into the state)."""
    catalog = state.volumes
    node_conflict, pv_missing = _check_bound(state, catalog, claims, nodes)
    bind_conflict = np.zeros(nodes.size, np.bool_)
    selected = tuple(c for c in claims.delayed if c.selected_node is not None)
    if selected:
        names = np.asarray([state.nodes[int(i)].name for i in nodes], dtype=object)
    for claim in selected:
        bind_conflict |= names != claim.selected_node
        bind_conflict |= ~_provisionable(state, catalog, claim, nodes)
    to_match = [c for c in claims.delayed if c.selected_node is None]
    matches = _match_static(state, catalog, to_match, nodes)
    for match in matches:
        unmatched = match.choice < 0
        if unmatched.any():
            bind_conflict |= unmatched & ~_provisionable(state, catalog, match.claim, nodes)
    return VolumeFit(node_conflict, pv_missing, bind_conflict, matches, selected)
