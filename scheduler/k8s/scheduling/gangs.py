"""PodGroups and their members, from watch events: what a gang cycle reads.

PodGroups come from two APIs (``objects.pod_group``): scheduler-plugins' and, where the
API server serves it, the Workload API's; one index holds both, by key. Members are
the group's pods of any scheduler that are neither finished nor being deleted
(Coscheduling counts the group's pods the same way). A PodGroup that does not parse is
logged and left out: its pods then wait with "PodGroup ... not found" and the reason in
the log.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

from scheduler.k8s.client import paths
from scheduler.k8s.client.unreadable import Skipped, log_unreadable, skipping
from scheduler.k8s.scheduling.cache import TERMINAL_PHASES, pod_key
from scheduler.objects.pod_group import (
    CORE_GROUP,
    CORE_VERSION,
    GROUP,
    VERSION,
    PodGroup,
    PodGroupError,
    core_pod_group_from_manifest,
    group_key,
    pod_group_from_manifest,
    pod_group_key,
)

# Per API: where its PodGroups are listed, and how one is read.
PATHS = {GROUP: paths.POD_GROUPS, CORE_GROUP: paths.CORE_POD_GROUPS}
READERS: dict[str, Callable[[Mapping[str, Any]], PodGroup]] = {
    GROUP: pod_group_from_manifest,
    CORE_GROUP: core_pod_group_from_manifest,
}
NAMES = {GROUP: f"{GROUP}/{VERSION}", CORE_GROUP: f"{CORE_GROUP}/{CORE_VERSION}"}

log = logging.getLogger(__name__)


class GangIndex:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.groups: dict[str, PodGroup] = {}
        # Group key -> keys of its member pods; pod key -> its group.
        self.members: dict[str, set[str]] = {}
        self._group_of: dict[str, str] = {}
        # Key -> when an event or listing last showed it, per API.
        self.seen: dict[str, dict[str, float]] = {api: {} for api in PATHS}
        # Whether the API server serves each API's PodGroups (a CRD, a feature gate).
        self.served = dict.fromkeys(PATHS, True)

    # ---- PodGroups --------------------------------------------------------------

    def on_pod_group(self, event_type: str, manifest: Mapping[str, Any], api: str = GROUP) -> str:
        """Apply a PodGroup event of ``api``; returns the group's key."""
        key = manifest_key(manifest, api)
        seen = self.seen[api]
        if event_type == "DELETED":
            seen.pop(key, None)
            self.groups.pop(key, None)
            return key
        seen[key] = self.clock()
        try:
            self.groups[key] = READERS[api](manifest)
        except PodGroupError as error:
            log.warning("ignoring %s", error)
            self.groups.pop(key, None)
        return key

    def resync(self, listed: set[str], listed_at: float, api: str = GROUP) -> None:
        """Drop ``api``'s groups a listing (started at ``listed_at``) no longer has and
        no event has shown since."""
        for key in [k for k, at in self.seen[api].items() if k not in listed and at < listed_at]:
            self.seen[api].pop(key, None)
            self.groups.pop(key, None)

    # ---- member pods ------------------------------------------------------------

    def on_pod(self, event_type: str, manifest: Mapping[str, Any]) -> str:
        """Track the pod's membership; returns its group's key ("" for none)."""
        key = pod_key(manifest)
        metadata = manifest.get("metadata") or {}
        spec = manifest.get("spec")
        named = spec.get("schedulingGroup") if isinstance(spec, Mapping) else None
        scheduling_group = named.get("podGroupName") if isinstance(named, Mapping) else None
        group = pod_group_key(
            str(metadata.get("namespace") or "default"),
            metadata.get("labels"),
            scheduling_group if isinstance(scheduling_group, str) else "",
        )
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


def manifest_key(manifest: Mapping[str, Any], api: str = GROUP) -> str:
    """The key of a PodGroup manifest of ``api``."""
    metadata = manifest.get("metadata") or {}
    return group_key(str(metadata.get("namespace") or "default"), str(metadata.get("name")), api)


async def list_pod_groups(
    list_with_version: Callable[..., Any],
    index: GangIndex,
    skipped: Skipped = log_unreadable,
    api: str = GROUP,
) -> str:
    """List ``api``'s PodGroups into ``index``; returns the listing's resourceVersion
    ("" when the API server does not serve them: the watch then retries until it does).
    A PodGroup that cannot be read goes to ``skipped``; the others are applied."""
    listed_at = index.clock()
    try:
        items, version = await list_with_version(PATHS[api])
    except ApiException as error:
        if error.status != 404:
            raise
        if index.served[api]:
            log.info("PodGroups (%s) not served: their gangs wait until they are", NAMES[api])
        index.served[api] = False
        index.resync(set(), listed_at, api)
        return ""
    index.served[api] = True
    for item in items:
        with skipping("podgroup", item, skipped):
            index.on_pod_group("ADDED", item, api)
    index.resync({manifest_key(item, api) for item in items}, listed_at, api)
    return str(version)
