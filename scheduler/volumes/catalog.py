"""The cluster's storage objects, kept current from watch events, with the scheduler's
own assumptions on top (kube-scheduler's assume caches for PVs and PVCs).

When the scheduler decides to bind a volume to a claim, or asks for a volume to be
provisioned on a node, it assumes the result at once so the next decision does not
offer the same volume again; the assumption lasts until a watch event brings a newer
version of that object, or until the bind fails and it is restored.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from scheduler.objects.volumes import Claim, CsiNode, PersistentVolume, StorageClass

T = TypeVar("T")


@dataclass
class _Assumed(Generic[T]):
    base_version: str
    value: T


@dataclass
class VolumeCatalog:
    claims: dict[str, Claim] = field(default_factory=dict)
    volumes: dict[str, PersistentVolume] = field(default_factory=dict)
    classes: dict[str, StorageClass] = field(default_factory=dict)
    csi_nodes: dict[str, CsiNode] = field(default_factory=dict)
    _assumed_claims: dict[str, _Assumed[Claim]] = field(default_factory=dict)
    _assumed_volumes: dict[str, _Assumed[PersistentVolume]] = field(default_factory=dict)
    # PV names by class, sorted (the candidates of a class, in a stable order).
    _by_class: dict[str, list[str]] | None = None
    # Moves on every change to a claim, a volume or a class, watched or assumed: what a
    # cache derives from them (``NodeVolumeLimits``' volumes in use per node) is stale
    # once it moves. CSINodes do not move it.
    generation: int = 0

    # ---- reads (assumptions first) ------------------------------------------------

    def claim(self, namespace: str, name: str) -> Claim | None:
        key = f"{namespace}/{name}"
        assumed = self._assumed_claims.get(key)
        return assumed.value if assumed is not None else self.claims.get(key)

    def volume(self, name: str) -> PersistentVolume | None:
        assumed = self._assumed_volumes.get(name)
        return assumed.value if assumed is not None else self.volumes.get(name)

    def storage_class(self, name: str) -> StorageClass | None:
        return self.classes.get(name)

    def volumes_of_class(self, storage_class: str) -> list[PersistentVolume]:
        """``pvCache.ListPVs(class)``: every PV of the class, by name."""
        if self._by_class is None:
            by_class: dict[str, list[str]] = defaultdict(list)
            for name in sorted(self.volumes):
                by_class[self.volumes[name].storage_class].append(name)
            self._by_class = dict(by_class)
        out = []
        for name in self._by_class.get(storage_class, ()):
            volume = self.volume(name)
            if volume is not None:
                out.append(volume)
        return out

    def is_delay_binding(self, claim: Claim) -> bool:
        """``IsDelayBindingMode``: the claim's class exists and waits for a consumer."""
        storage_class = self.classes.get(claim.storage_class) if claim.storage_class else None
        return storage_class is not None and storage_class.binding_mode == "WaitForFirstConsumer"

    # ---- watch events -----------------------------------------------------------

    def put_claim(self, claim: Claim) -> None:
        self.generation += 1
        self.claims[claim.key] = claim
        self._expire(self._assumed_claims, claim.key, claim.resource_version)

    def delete_claim(self, key: str) -> None:
        self.generation += 1
        self.claims.pop(key, None)
        self._assumed_claims.pop(key, None)

    def put_volume(self, volume: PersistentVolume) -> None:
        self.generation += 1
        old = self.volumes.get(volume.name)
        self.volumes[volume.name] = volume
        if old is None or old.storage_class != volume.storage_class:
            self._by_class = None
        self._expire(self._assumed_volumes, volume.name, volume.resource_version)

    def delete_volume(self, name: str) -> None:
        self.generation += 1
        if self.volumes.pop(name, None) is not None:
            self._by_class = None
        self._assumed_volumes.pop(name, None)

    def put_class(self, storage_class: StorageClass) -> None:
        self.generation += 1
        self.classes[storage_class.name] = storage_class

    def delete_class(self, name: str) -> None:
        self.generation += 1
        self.classes.pop(name, None)

    def put_csi_node(self, csi_node: CsiNode) -> None:
        self.csi_nodes[csi_node.name] = csi_node

    def delete_csi_node(self, name: str) -> None:
        self.csi_nodes.pop(name, None)

    @staticmethod
    def _expire(assumed: dict[str, _Assumed[T]], key: str, version: str) -> None:
        """A newer version from the API replaces what we assumed."""
        entry = assumed.get(key)
        if entry is not None and version != entry.base_version:
            del assumed[key]

    # ---- our assumptions ----------------------------------------------------------

    def assume_volume(self, volume: PersistentVolume) -> None:
        """``volume`` (changed by us, same resourceVersion as the one it came from)
        stands in for the watched one until a newer version arrives."""
        self.generation += 1
        self._assumed_volumes[volume.name] = _Assumed(volume.resource_version, volume)

    def assume_claim(self, claim: Claim) -> None:
        self.generation += 1
        self._assumed_claims[claim.key] = _Assumed(claim.resource_version, claim)

    def restore(self, claims: Iterable[str] = (), volumes: Iterable[str] = ()) -> None:
        """Forget assumptions (a bind that failed)."""
        self.generation += 1
        for key in claims:
            self._assumed_claims.pop(key, None)
        for name in volumes:
            self._assumed_volumes.pop(name, None)
