"""PodGroups and their members, from watch events: what a gang cycle reads.

Members are the group's pods of any scheduler that are neither finished nor being
deleted (Coscheduling counts the group's pods the same way). A PodGroup that does not
parse is logged and left out: its pods then wait with "PodGroup ... not found" and the
reason in the log.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

from scheduler.k8s import paths
from scheduler.k8s.cache import TERMINAL_PHASES, pod_key
from scheduler.k8s.unreadable import Skipped, log_unreadable, skipping
from scheduler.objects.pod_group import (
    GROUP,
    VERSION,
    PodGroup,
    PodGroupError,
    pod_group_from_manifest,
    pod_group_key,
)

log = logging.getLogger(__name__)


class GangIndex:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.groups: dict[str, PodGroup] = {}
        # Group key -> keys of its member pods; pod key -> its group.
        self.members: dict[str, set[str]] = {}
        self._group_of: dict[str, str] = {}
        self.seen: dict[str, float] = {}
        # The API server does not serve PodGroups (the CRD is not installed).
        self.served = True

    # ---- PodGroups --------------------------------------------------------------

    def on_pod_group(self, event_type: str, manifest: Mapping[str, Any]) -> str:
        """Apply a PodGroup event; returns the group's key."""
        key = group_key(manifest)
        if event_type == "DELETED":
            self.seen.pop(key, None)
            self.groups.pop(key, None)
            return key
        self.seen[key] = self.clock()
        try:
            self.groups[key] = pod_group_from_manifest(manifest)
        except PodGroupError as error:
            log.warning("ignoring %s", error)
            self.groups.pop(key, None)
        return key

    def resync(self, listed: set[str], listed_at: float) -> None:
        """Drop groups a listing (started at ``listed_at``) no longer has and no event
        has shown since."""
        for key in [k for k, at in self.seen.items() if k not in listed and at < listed_at]:
            namespace, _, name = key.partition("/")
            self.on_pod_group("DELETED", {"metadata": {"namespace": namespace, "name": name}})

    # ---- member pods ------------------------------------------------------------

    def on_pod(self, event_type: str, manifest: Mapping[str, Any]) -> str:
        """Track the pod's membership; returns its group's key ("" for none)."""
        key = pod_key(manifest)
        metadata = manifest.get("metadata") or {}
        group = pod_group_key(str(metadata.get("namespace") or "default"), metadata.get("labels"))
        gone = (
            event_type == "DELETED"
            or (manifest.get("status") or {}).get("phase") in TERMINAL_PHASES
            or bool(metadata.get("deletionTimestamp"))
        )
        before = self._group_of.get(key, "")
        if before and (gone or before != group):
            self._leave(key, before)
        if group and not gone:
            self._group_of[key] = group
            self.members.setdefault(group, set()).add(key)
        return group

    def forget_pod(self, key: str) -> None:
        """A deletion a restarted watch never reported (the runtime's resync)."""
        before = self._group_of.get(key)
        if before:
            self._leave(key, before)

    def _leave(self, key: str, group: str) -> None:
        del self._group_of[key]
        members = self.members.get(group)
        if members is not None:
            members.discard(key)
            if not members:
                del self.members[group]


def group_key(manifest: Mapping[str, Any]) -> str:
    """``namespace/name`` of a PodGroup manifest."""
    metadata = manifest.get("metadata") or {}
    return f"{metadata.get('namespace') or 'default'}/{metadata.get('name')}"


async def list_pod_groups(
    list_with_version: Callable[..., Any], index: GangIndex, skipped: Skipped = log_unreadable
) -> str:
    """List PodGroups into ``index``; returns the listing's resourceVersion ("" when
    the API server does not serve PodGroups: the watch then retries until it does).
    A PodGroup that cannot be read goes to ``skipped``; the others are applied."""
    listed_at = index.clock()
    try:
        items, version = await list_with_version(paths.POD_GROUPS)
    except ApiException as error:
        if error.status != 404:
            raise
        if index.served:
            log.info("PodGroups (%s/%s) not served: gangs wait until the CRD is installed", GROUP, VERSION)
        index.served = False
        index.resync(set(), listed_at)
        return ""
    index.served = True
    for item in items:
        with skipping("podgroup", item, skipped):
            index.on_pod_group("ADDED", item)
    index.resync({group_key(item) for item in items}, listed_at)
    return str(version)
