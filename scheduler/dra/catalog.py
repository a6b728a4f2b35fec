"""What kube-scheduler's DynamicResources plugin reads: the ``resource.k8s.io/v1``
DeviceClasses, ResourceSlices and ResourceClaims the live scheduler lists and watches
(``scheduler.k8s.scheduling.dra_events``), which the Filter allocates over
(``plugins.filters.dynamic_resources``) and the Reserve/PreBind step writes through
(``scheduler.k8s.scheduling.dra_binder``). Empty in trace replays.

Each object is read on its own (``scheduler.dra.manifests``): one that does not read
raises to the caller's ``skipping`` (counted, logged) and its previous version is
dropped, so a claim that does not read makes its pods wait, as a missing claim does.

Claims in flight: at Reserve the chosen allocation is assumed here (kube's
``inFlightAllocations``), so the next pod does not take the same devices; after the
status write, the written claim replaces it (kube's assume cache) and a watch event
older than what is stored (a smaller ``resourceVersion``) does not take it back.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from scheduler.dra.constraints import DeviceId
from scheduler.dra.manifests import (
    device_class_from_manifest,
    resource_claim_from_manifest,
    resource_slice_from_manifest,
)
from scheduler.dra.objects import DeviceClass, ResourceClaim, ResourceSlice
from scheduler.dra.pools import SliceIndex
from scheduler.dra.verdicts import AllocationVerdicts

# resourceclaim.ErrClaimNotFound's text (k8s.io/dynamic-resource-allocation/resourceclaim).
NOT_CREATED_YET: Final = "ResourceClaim not created yet"
CLASSES: Final = "deviceclasses"
SLICES: Final = "resourceslices"
CLAIMS: Final = "resourceclaims"
NAMESPACED: Final = {CLASSES: False, SLICES: False, CLAIMS: True}


class ClaimLookupError(Exception):
    """A pod's claim cannot be named or found; ``str(error)`` is kube's status text."""


@dataclass(frozen=True, slots=True)
class StoredClaim:
    claim: ResourceClaim
    resource_version: str = ""


def _version(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0


def _metadata(manifest: Mapping[str, Any]) -> Mapping[str, Any]:
    metadata = manifest.get("metadata")
    return metadata if isinstance(metadata, Mapping) else {}


def object_key(manifest: Mapping[str, Any], namespaced: bool) -> str:
    metadata = _metadata(manifest)
    name = str(metadata.get("name"))
    return f"{metadata.get('namespace') or 'default'}/{name}" if namespaced else name


class DraCatalog:
    def __init__(self) -> None:
        self.classes: dict[str, DeviceClass] = {}
        self.slices: dict[str, ResourceSlice] = {}
        self.claims: dict[str, StoredClaim] = {}
        # Claims whose allocation this scheduler decided and has not written yet.
        self.in_flight: dict[str, ResourceClaim] = {}
        # ``in_use``, kept as claims change: per claim key the devices its allocation
        # (the in-flight one first) consumes, how many claims hold each device, and the
        # devices some claim holds.
        self._held: dict[str, tuple[DeviceId, ...]] = {}
        self._holders: Counter[DeviceId] = Counter()
        self._in_use: set[DeviceId] = set()
        self._slice_index: SliceIndex | None = None
        # Moves whenever a slice is added, changed or removed: what is computed from the
        # slices (``gpu_view``) is redone only then, never compared slice by slice.
        self.slices_generation = 0
        self._classes_generation = 0
        # Per (driver, pool): moves whenever one of its devices is taken or freed, so
        # that a node's kept allocator verdict is redone only then (``verdicts``).
        self.pool_versions: dict[tuple[str, str], int] = {}
        self._verdicts: tuple[int, int, AllocationVerdicts] | None = None

    # ---- watch events ---------------------------------------------------------------

    def apply(self, plural: str, event_type: str, manifest: Mapping[str, Any]) -> bool:
        """Apply one event; True when the catalog changed. A manifest that does not read
        drops the object's previous version and raises (``DraObjectError``)."""
        key = object_key(manifest, NAMESPACED[plural])
        if event_type == "DELETED":
            return self.delete(plural, key)
        try:
            return self._put(plural, key, manifest)
        except Exception:
            self.delete(plural, key)
            raise

    def _put(self, plural: str, key: str, manifest: Mapping[str, Any]) -> bool:
        # A class or slice equal to the one held (a relist, a watch that starts over, a
        # write that changed only metadata) keeps the object held: nothing changed, and
        # what was computed from it stays valid.
        if plural == CLASSES:
            device_class = device_class_from_manifest(manifest)
            if self.classes.get(key) == device_class:
                return False
            self.classes[key] = device_class
            self._classes_generation += 1
        elif plural == SLICES:
            resource_slice = resource_slice_from_manifest(manifest)
            if self.slices.get(key) == resource_slice:
                return False
            self.slices[key] = resource_slice
            self._slice_index = None
            self.slices_generation += 1
        else:
            version = str(_metadata(manifest).get("resourceVersion") or "")
            stored = self.claims.get(key)
            if stored is not None and _version(version) < _version(stored.resource_version):
                return False  # older than what this scheduler wrote (the assume cache's rule)
            self.claims[key] = StoredClaim(resource_claim_from_manifest(manifest), version)
            self._hold(key)
        return True

    def _table(self, plural: str) -> dict[str, Any]:
        tables: dict[str, dict[str, Any]] = {CLASSES: self.classes, SLICES: self.slices, CLAIMS: self.claims}
        return tables[plural]

    def delete(self, plural: str, key: str) -> bool:
        if self._table(plural).pop(key, None) is None:
            return False
        if plural == CLAIMS:
            self._hold(key)
        if plural == CLASSES:
            self._classes_generation += 1
        if plural == SLICES:
            self._slice_index = None
            self.slices_generation += 1
        return True

    def resync(self, plural: str, listed: set[str]) -> None:
        """Drop objects of ``plural`` that a fresh listing no longer has."""
        for key in [k for k in self._table(plural) if k not in listed]:
            self.delete(plural, key)

    # ---- what the Filter reads ------------------------------------------------------

    def claim(self, key: str) -> ResourceClaim | None:
        """The claim as this scheduler knows it: its in-flight allocation first."""
        flying = self.in_flight.get(key)
        if flying is not None:
            return flying
        stored = self.claims.get(key)
        return None if stored is None else stored.claim

    def resource_version(self, key: str) -> str:
        stored = self.claims.get(key)
        return "" if stored is None else stored.resource_version

    def slice_index(self) -> SliceIndex:
        """``slices`` indexed for gathering pools node by node, kept until a slice
        changes."""
        if self._slice_index is None:
            self._slice_index = SliceIndex.of(self.slices.values())
        return self._slice_index

    def verdicts(self) -> AllocationVerdicts:
        """The allocator's verdicts kept per node (``scheduler.dra.verdicts``) for the
        current classes and slices; valid with ``in_use()`` as the devices in use."""
        stamp = (self._classes_generation, self.slices_generation)
        if self._verdicts is None or self._verdicts[:2] != stamp:
            self._verdicts = (*stamp, AllocationVerdicts(self.pool_versions))
        return self._verdicts[2]

    def in_use(self) -> set[DeviceId]:
        """The devices every allocated claim consumes, in-flight allocations included
        (not to be changed by the caller)."""
        return self._in_use

    def _hold(self, key: str) -> None:
        """The claim ``key`` changed (stored, in flight, or gone): what it holds is
        counted again. Kept per claim rather than rebuilt from every claim: with 5,000
        claims each pod's claim changes several times (created, assumed, written)."""
        claim = self.claim(key)
        held = (
            ()
            if claim is None or claim.allocation is None
            else tuple((r.driver, r.pool, r.device) for r in claim.allocation.results if not r.admin_access)
        )
        for device in self._held.pop(key, ()):
            self._holders[device] -= 1
            if self._holders[device] <= 0:
                del self._holders[device]
                self._in_use.discard(device)
                self._pool_changed(device)
        if held:
            self._held[key] = held
            for device in held:
                self._holders[device] += 1
                if device not in self._in_use:
                    self._in_use.add(device)
                    self._pool_changed(device)

    def _pool_changed(self, device: DeviceId) -> None:
        pool = (device[0], device[1])
        self.pool_versions[pool] = self.pool_versions.get(pool, 0) + 1

    def pod_claims(
        self, namespace: str, pod_name: str, claim_names: Sequence[str | None]
    ) -> list[ResourceClaim]:
        """The claims named by the pod (``Pod.resource_claims``); raises
        ``ClaimLookupError`` with kube's text for one that is not created yet or not known."""
        claims = []
        for name in claim_names:
            if name is None:
                raise ClaimLookupError(f'pod "{namespace}/{pod_name}": {NOT_CREATED_YET}')
            claim = self.claim(f"{namespace}/{name}")
            if claim is None:
                raise ClaimLookupError(f'resourceclaim.resource.k8s.io "{name}" not found')
            claims.append(claim)
        return claims

    # ---- Reserve, PreBind, Unreserve -------------------------------------------------

    def assume(self, claim: ResourceClaim) -> None:
        """``claim`` with the allocation this scheduler chose, not written yet."""
        self.in_flight[claim.key] = claim
        self._hold(claim.key)

    def forget(self, key: str) -> None:
        if self.in_flight.pop(key, None) is not None:
            self._hold(key)

    def written(self, manifest: Mapping[str, Any]) -> None:
        """The claim as the API server answered a status write: it replaces the
        in-flight allocation (a later, older watch event does not undo it)."""
        self.apply(CLAIMS, "MODIFIED", manifest)
        self.forget(object_key(manifest, True))
