"""Storage objects as the volume filters see them: a pod's claims, PersistentVolumeClaims,
PersistentVolumes, StorageClasses and CSINodes' volume limits.

Classes and binding state follow component-helpers/storage/volume: a claim's or a
volume's class is the beta annotation ``volume.beta.kubernetes.io/storage-class`` if
set, else ``storageClassName``; a claim is bound when it names a volume and carries
``pv.kubernetes.io/bind-completed``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from scheduler.objects.selectors import LabelSelector, NodeSelector

BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
# A StorageClass provisioner that provisions nothing (local volumes).
NO_PROVISIONER = "kubernetes.io/no-provisioner"
READ_WRITE_ONCE_POD = "ReadWriteOncePod"

BindingMode = Literal["Immediate", "WaitForFirstConsumer"]


@dataclass(frozen=True, slots=True)
class PodVolume:
    """A volume of a pod that goes through a claim: ``persistentVolumeClaim``, or a
    generic ``ephemeral`` volume, whose claim the ephemeral-volume controller creates
    as ``<pod>-<volume>``, owned by the pod."""

    name: str
    claim: str
    ephemeral: bool = False


@dataclass(frozen=True, slots=True)
class InlineDisk:
    """An inline volume kube-scheduler's VolumeRestrictions checks for conflicts on a
    node: the same disk mounted twice conflicts unless every mount is read-only (GCE
    PD, iSCSI, RBD) or always (AWS EBS). ``identity`` names the disk within ``kind``;
    ``monitors`` (RBD) conflict when any overlaps."""

    kind: Literal["gcePersistentDisk", "awsElasticBlockStore", "iscsi", "rbd"]
    identity: tuple[str, ...]
    read_only: bool = False
    monitors: frozenset[str] = frozenset()

    def conflicts(self, other: InlineDisk) -> bool:
        if self.kind != other.kind or self.identity != other.identity:
            return False
        if self.kind == "awsElasticBlockStore":
            return True
        if self.kind == "rbd" and not (self.monitors & other.monitors):
            return False
        return not (self.read_only and other.read_only)


@dataclass(frozen=True, slots=True)
class ClaimRef:
    namespace: str
    name: str
    uid: str = ""


@dataclass(frozen=True, slots=True)
class Claim:
    """A PersistentVolumeClaim."""

    namespace: str
    name: str
    uid: str = ""
    resource_version: str = ""
    storage_class: str = ""
    volume_name: str = ""
    bind_completed: bool = False
    phase: str = "Pending"
    deleting: bool = False
    access_modes: tuple[str, ...] = ()
    volume_mode: str = "Filesystem"
    request_bytes: int = 0
    selector: LabelSelector | None = None
    attributes_class: str = ""
    # The node the scheduler chose for provisioning (``volume.kubernetes.io/selected-node``).
    selected_node: str | None = None
    # UID of the owner reference with ``controller: true`` (an ephemeral volume's pod).
    controller_uid: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def fully_bound(self) -> bool:
        """``isPVCFullyBound``: names a volume and the binding completed."""
        return bool(self.volume_name) and self.bind_completed


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    name: str
    resource_version: str = ""
    storage_class: str = ""
    capacity_bytes: int = 0
    access_modes: tuple[str, ...] = ()
    volume_mode: str = "Filesystem"
    phase: str = "Available"
    claim_ref: ClaimRef | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    # ``spec.nodeAffinity.required``; None: every node.
    node_affinity: NodeSelector | None = None
    deleting: bool = False
    attributes_class: str = ""
    # ``spec.csi``'s driver and handle, or those kube-scheduler counts a migrated in-tree
    # source as (``csi_migration``).
    csi_driver: str = ""
    csi_handle: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)

    def bound_to(self, claim: Claim) -> bool:
        """``IsVolumeBoundToClaim``: pre-bound or bound to ``claim`` (UID too if set)."""
        ref = self.claim_ref
        if ref is None or ref.name != claim.name or ref.namespace != claim.namespace:
            return False
        return not ref.uid or ref.uid == claim.uid


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    provisioner: str = ""
    binding_mode: BindingMode = "Immediate"
    # ``allowedTopologies`` as node selector terms (each expression ``key In values``);
    # None: every node.
    allowed_topologies: NodeSelector | None = None

    @property
    def provisions(self) -> bool:
        return self.provisioner not in ("", NO_PROVISIONER)


@dataclass(frozen=True, slots=True)
class CsiNode:
    """A CSINode: how many volumes each CSI driver may attach to the node
    (``spec.drivers[].allocatable.count``; drivers without a count have no limit)."""

    name: str
    limits: Mapping[str, int] = field(default_factory=dict)
