"""Listings and watch events of DRA's objects (``resource.k8s.io/v1`` DeviceClasses,
ResourceSlices, ResourceClaims) into the state's ``DraCatalog``. Each object is applied
inside ``skipping``: one that does not read costs that object (counted by the runtime's
``skip_unreadable``). An API server that does not serve the group (404) means no DRA
objects are known: pods with claims wait, and the watch retries until it is served."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException

from scheduler.dra.catalog import CLAIMS, CLASSES, NAMESPACED, SLICES, DraCatalog, object_key
from scheduler.k8s.client import paths
from scheduler.k8s.client.unreadable import Skipped, log_unreadable, skipping

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DraKind:
    kind: str  # for log lines and the watch thread's name
    plural: str  # the catalog's table and the listing's key
    path: str  # the collection over all namespaces, listed and watched


DRA_KINDS = (
    DraKind("deviceclass", CLASSES, paths.DEVICE_CLASSES),
    DraKind("resourceslice", SLICES, paths.RESOURCE_SLICES),
    DraKind("resourceclaim", CLAIMS, paths.RESOURCE_CLAIMS),
)


async def list_dra(
    list_with_version: Callable[..., Any], catalog: DraCatalog, skipped: Skipped = log_unreadable
) -> dict[str, str]:
    """List the three kinds into ``catalog`` and drop what the listings no longer have;
    returns each listing's resourceVersion by plural ("" when not served)."""
    versions: dict[str, str] = {}
    for kind in DRA_KINDS:
        try:
            items, version = await list_with_version(kind.path)
        except ApiException as error:
            if error.status != 404:
                raise
            log.debug("%s not served by the API server", kind.path)
            catalog.resync(kind.plural, set())
            versions[kind.plural] = ""
            continue
        for item in items:
            with skipping(kind.kind, item, skipped):
                catalog.apply(kind.plural, "ADDED", item)
        catalog.resync(kind.plural, {object_key(item, NAMESPACED[kind.plural]) for item in items})
        versions[kind.plural] = str(version)
    return versions
