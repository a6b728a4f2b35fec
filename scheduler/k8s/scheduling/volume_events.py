"""Watch events and listings of storage objects into the state's ``VolumeCatalog``:
PersistentVolumeClaims, PersistentVolumes, StorageClasses and CSINodes, the objects
kube-scheduler's volume plugins read. An object that does not parse is logged and
left out (its previous version too): a pod using it then waits with a reason."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.errors import SchedulerInputError
from scheduler.k8s.client import paths
from scheduler.k8s.client.unreadable import Skipped, log_unreadable, skipping
from scheduler.objects.volume_manifest import (
    claim_from_manifest,
    csi_node_from_manifest,
    storage_class_from_manifest,
    volume_from_manifest,
)
from scheduler.volumes.catalog import VolumeCatalog

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class VolumeKind:
    kind: str  # for log lines and the watch thread's name
    namespaced: bool
    path: str  # the collection over all namespaces, listed and watched

    @property
    def plural(self) -> str:
        """The listing's key: the collection's last path segment."""
        return self.path.rsplit("/", 1)[1]


CLAIMS = "persistentvolumeclaims"
VOLUME_KINDS = (
    VolumeKind("persistentvolumeclaim", True, paths.PERSISTENT_VOLUME_CLAIMS),
    VolumeKind("persistentvolume", False, paths.PERSISTENT_VOLUMES),
    VolumeKind("storageclass", False, paths.STORAGE_CLASSES),
    VolumeKind("csinode", False, paths.CSI_NODES),
)


def pvc_key(kind: VolumeKind, manifest: Mapping[str, Any]) -> str | None:
    """namespace/name of a PersistentVolumeClaim's event (None for the other kinds)."""
    return object_key(manifest, namespaced=True) if kind.plural == CLAIMS else None


def object_key(manifest: Mapping[str, Any], namespaced: bool) -> str:
    metadata = manifest.get("metadata") or {}
    name = str(metadata.get("name"))
    return f"{metadata.get('namespace') or 'default'}/{name}" if namespaced else name


class VolumeEvents:
    """Applies events of the four kinds to ``catalog``; remembers when each object was
    last seen so a listing can drop what a restarted watch never reported deleted."""

    def __init__(self, catalog: VolumeCatalog, clock: Callable[[], float] = time.monotonic) -> None:
        self.catalog = catalog
        self.clock = clock
        self.seen: dict[str, dict[str, float]] = {k.plural: {} for k in VOLUME_KINDS}

    def apply(self, kind: VolumeKind, event_type: str, manifest: Mapping[str, Any]) -> bool:
        """Apply one event; True when the catalog changed."""
        key = object_key(manifest, kind.namespaced)
        if event_type == "DELETED":
            self.seen[kind.plural].pop(key, None)
            self._delete(kind, key)
            return True
        self.seen[kind.plural][key] = self.clock()
        try:
            self._put(kind, manifest)
        except SchedulerInputError as error:
            log.warning("ignoring %s %s: %s", kind.kind, key, error)
            self._delete(kind, key)
        return True

    def _put(self, kind: VolumeKind, manifest: Mapping[str, Any]) -> None:
        catalog = self.catalog
        if kind.plural == CLAIMS:
            catalog.put_claim(claim_from_manifest(manifest))
        elif kind.plural == "persistentvolumes":
            catalog.put_volume(volume_from_manifest(manifest))
        elif kind.plural == "storageclasses":
            catalog.put_class(storage_class_from_manifest(manifest))
        else:
            catalog.put_csi_node(csi_node_from_manifest(manifest))

    def _delete(self, kind: VolumeKind, key: str) -> None:
        catalog = self.catalog
        if kind.plural == CLAIMS:
            catalog.delete_claim(key)
        elif kind.plural == "persistentvolumes":
            catalog.delete_volume(key)
        elif kind.plural == "storageclasses":
            catalog.delete_class(key)
        else:
            catalog.delete_csi_node(key)

    def resync(self, kind: VolumeKind, listed: set[str], listed_at: float) -> None:
        """Drop objects of ``kind`` a listing (started at ``listed_at``) no longer has
        and no event has shown since."""
        seen = self.seen[kind.plural]
        for key in [k for k, at in seen.items() if k not in listed and at < listed_at]:
            del seen[key]
            self._delete(kind, key)


async def list_volumes(
    list_with_version: Callable[..., Any], events: VolumeEvents, skipped: Skipped = log_unreadable
) -> dict[str, str]:
    """List the four kinds, apply them and drop what the listings no longer have;
    returns each listing's resourceVersion by plural (where its watch starts). An
    object that cannot be read goes to ``skipped``; the others are applied."""
    versions: dict[str, str] = {}
    for kind in VOLUME_KINDS:
        listed_at = events.clock()
        items, versions[kind.plural] = await list_with_version(kind.path)
        for item in items:
            with skipping(kind.kind, item, skipped):
                events.apply(kind, "ADDED", item)
        events.resync(kind, {object_key(item, kind.namespaced) for item in items}, listed_at)
    return versions
