"""The scheduler's side of policy versions as custom resources
(``scheduler.online.store_crd``): the channel's current version, mirrored into a local
folder store that the policy manager and the lifetime source load as before.

Every replica mirrors on its own; none writes. At start, before the first profile is
built, ``sync`` reads the channel and its version (two GETs), so a replica schedules
its first pod with the current version. From then on kopf's event handlers
(``register``) feed the mirror: kopf is the process's framework for watching objects
of modest rate, restarts its watches and retries, and these objects change a few
times an hour, so its per-event cost (the reason pods and nodes have watches of our
own) does not matter here. kopf starts once the scheduler first runs out of work, at
most ``KOPF_START_LATEST_S`` after its start; a switch made in that window is seen when
its watch lists the objects.

Following a switch: the version's object (from the watch's index, or one GET when its
event has not arrived yet) is decoded and each file checked against its SHA-256, the
folder installed (staged, renamed) and the local ``current`` link pointed at it; the
policy manager's reload (``policy_reload_s``) sees the new folder and swaps the profile
in. A bad object (bad base64, a digest that does not match, no manifest, a channel
naming a version that does not exist) is refused with a log line naming the object and
the field, counted in ``rl_scheduler_policy_load_failures_total`` (``corrupt`` or
``missing``), and the replica keeps the version it has. Two replicas that see the same
channel therefore load the same version, each from its own cache folder.

``KubePolicyObjects`` is the store's ``PolicyObjects`` in plain JSON over the blocking
client (``scheduler.k8s.client.blocking``), for the scheduler and the trainer
(``rl-scheduler trainer --policy-namespace``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from scheduler.k8s.client.blocking import BlockingClient
from scheduler.online.store import CURRENT, PolicyStore
from scheduler.online.store_crd import (
    API_VERSION,
    CHANNEL_LABEL,
    CHANNELS,
    GROUP,
    VERSIONS,
    PolicyVersionError,
    VersionExistsError,
    describe,
    materialise,
    pointed_version,
    version_object_name,
    version_of,
)

if TYPE_CHECKING:
    import kopf
    from kubernetes import client

log = logging.getLogger(__name__)

TIMEOUT_S = (5.0, 30.0)
MERGE_PATCH = "application/merge-patch+json"


class KubePolicyObjects:
    """``PolicyObjects`` in ``namespace`` over ``api_client``'s Configuration and
    credentials (a ``BlockingClient`` of its own). An answer that is not an object,
    or a listing whose ``items`` is not a list of objects, raises ``PolicyVersionError``
    naming the collection and the field."""

    def __init__(self, api_client: client.ApiClient, namespace: str) -> None:
        self.http = BlockingClient(api_client.configuration, api_client)
        self.namespace = namespace

    def path(self, plural: str, name: str = "", subresource: str = "") -> str:
        """The path of a collection of ours in the namespace, or of one object in it."""
        collection = f"/apis/{GROUP}/{API_VERSION}/namespaces/{_segment(self.namespace)}/{plural}"
        path = f"{collection}/{_segment(name)}" if name else collection
        return f"{path}/{subresource}" if subresource else path

    def get(self, plural: str, name: str) -> dict[str, Any] | None:
        from kubernetes.client.exceptions import ApiException  # noqa: PLC0415

        path = self.path(plural, name)
        try:
            return _object(self.http.json("GET", path, timeout=TIMEOUT_S), path)
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    def list(self, plural: str, label_selector: str) -> list[dict[str, Any]]:
        path = f"{self.path(plural)}?{urlencode({'labelSelector': label_selector})}"
        items = _object(self.http.json("GET", path, timeout=TIMEOUT_S), path).get("items") or []
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            raise PolicyVersionError(path, "items", "not a list of objects")
        return items

    def create(self, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        from kubernetes.client.exceptions import ApiException  # noqa: PLC0415

        path = self.path(plural)
        try:
            return _object(self.http.json("POST", path, body, timeout=TIMEOUT_S), path)
        except ApiException as error:
            if error.status == 409:
                raise VersionExistsError(body["metadata"]["name"]) from None
            raise

    def merge_patch(
        self, plural: str, name: str, patch: dict[str, Any], subresource: str = ""
    ) -> dict[str, Any] | None:
        from kubernetes.client.exceptions import ApiException  # noqa: PLC0415

        path = self.path(plural, name, subresource)
        try:
            answer = self.http.json("PATCH", path, patch, content_type=MERGE_PATCH, timeout=TIMEOUT_S)
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return _object(answer, path)

    def close(self) -> None:
        self.http.close()


def _segment(name: str) -> str:
    return quote(name, safe="")


def _object(answer: Any, path: str) -> dict[str, Any]:
    if not isinstance(answer, dict):
        raise PolicyVersionError(path, "(answer)", f"not a JSON object but {type(answer).__name__}")
    return answer


class PolicyVersionMirror:
    """The channel's current version, installed in ``cache`` (a folder store) and
    pointed at by its ``current`` link. Thread-safe: kopf's handlers and the start's
    ``sync`` call it from worker threads."""

    def __init__(
        self,
        objects: Any,  # PolicyObjects
        channel: str,
        cache: Path,
        on_refused: Callable[[str], None] = lambda _reason: None,
    ) -> None:
        self.objects = objects
        self.channel = channel
        self.folder = PolicyStore(cache)
        self.on_refused = on_refused
        self.bodies: dict[str, dict[str, Any]] = {}  # version -> PolicyVersion, from the watch
        self.pointed: str | None = None
        self._refused: set[tuple[str, str]] = set()  # (object, resourceVersion) already logged
        self._lock = threading.Lock()

    @property
    def namespace(self) -> str:
        return str(self.objects.namespace)

    @property
    def where(self) -> str:
        return f"PolicyChannel {self.namespace}/{self.channel}"

    def sync(self) -> None:
        """Read the channel and follow it (at start, before kopf watches)."""
        self.on_channel(self.objects.get(CHANNELS, self.channel))

    def on_channel(self, body: Mapping[str, Any] | None) -> None:
        with self._lock:
            try:
                self.pointed = pointed_version(body)
            except PolicyVersionError as error:
                self._refuse(body or {}, error, "corrupt")
                return
            self._follow()

    def on_version(self, event_type: str, body: Mapping[str, Any]) -> None:
        labels = (body.get("metadata") or {}).get("labels") or {}
        if labels.get(CHANNEL_LABEL) != self.channel:
            return
        with self._lock:
            try:
                version = version_of(body)
            except PolicyVersionError as error:
                self._refuse(body, error, "corrupt")
                return
            if event_type == "DELETED":
                self.bodies.pop(version, None)
                return
            previous = self.bodies.get(version)
            self.bodies[version] = dict(body)
            if version == self.pointed:
                # an object seen for the first time, or deleted and created again: check
                # the cached copy against it
                uid = (body.get("metadata") or {}).get("uid")
                self._follow(recheck=previous is None or (previous.get("metadata") or {}).get("uid") != uid)
            if self.pointed is not None and self.folder.current() == self.pointed:
                self._mark_current(self.pointed)

    def _follow(self, recheck: bool = False) -> None:
        """Install and point at the channel's version; ``recheck``: even when it is
        current already (its object is new: the cache is checked against it)."""
        version = self.pointed
        if version is None:
            return
        if not recheck and self.folder.current() == version and (self.folder.root / version).is_dir():
            return
        body = self.bodies.get(version)
        if body is None:  # the channel's event came before the version's
            body = self.objects.get(VERSIONS, version_object_name(self.channel, version))
        if body is None:
            missing = PolicyVersionError(self.where, "spec.currentVersion", f"no PolicyVersion {version}")
            self._refuse({"metadata": {"name": self.channel, "resourceVersion": version}}, missing, "missing")
            return
        try:
            materialise(self.folder, body, version)
        except PolicyVersionError as error:
            self._refuse(body, error, "corrupt")
            return
        if self.folder.current() != version or not (self.folder.root / CURRENT).is_symlink():
            self.folder.point_current(version)
            log.info("%s: current version %s (%s)", self.where, version, describe(body))
        self._mark_current(version)

    def _mark_current(self, version: str) -> None:
        """``status.current`` of the versions the watch has shown, for ``kubectl get
        policyversions``' Current column; every replica writes the same values, and a
        failure costs only the column."""
        for known, body in list(self.bodies.items()):
            wanted = known == version
            if (body.get("status") or {}).get("current") is wanted:
                continue
            name = (body.get("metadata") or {}).get("name", version_object_name(self.channel, known))
            try:
                patched = self.objects.merge_patch(VERSIONS, name, {"status": {"current": wanted}}, "status")
            except Exception as error:  # the column only; the version in use is unaffected
                log.warning("%s: status.current not written: %s", describe(body), str(error)[:300])
                return
            if patched is not None:
                self.bodies[known] = patched

    def _refuse(self, body: Mapping[str, Any], error: PolicyVersionError, reason: str) -> None:
        meta = body.get("metadata") or {}
        key = (str(error.obj), str(meta.get("resourceVersion", "")))
        if key in self._refused:
            return
        self._refused.add(key)
        self.on_refused(reason)
        log.error("policy version refused, the policy in use keeps scheduling: %s", error)


def register(registry: kopf.OperatorRegistry, mirror: PolicyVersionMirror) -> None:
    """kopf event handlers for the two kinds, in the mirror's namespace."""
    import kopf  # noqa: PLC0415 - imported where kopf runs

    def ours(namespace: str | None, **_: Any) -> bool:
        return namespace == mirror.namespace

    @kopf.on.event(GROUP, API_VERSION, CHANNELS, registry=registry, when=ours)
    async def channel_event(event: Mapping[str, Any], body: Mapping[str, Any], **_: Any) -> None:
        if event.get("type") == "DELETED" or (body.get("metadata") or {}).get("name") != mirror.channel:
            return
        await asyncio.to_thread(mirror.on_channel, _plain(body))

    @kopf.on.event(GROUP, API_VERSION, VERSIONS, registry=registry, when=ours)
    async def version_event(event: Mapping[str, Any], body: Mapping[str, Any], **_: Any) -> None:
        await asyncio.to_thread(mirror.on_version, str(event.get("type") or "ADDED"), _plain(body))


def _plain(body: Mapping[str, Any]) -> dict[str, Any]:
    """kopf's read-only body as plain dicts and lists."""
    import json  # noqa: PLC0415

    return dict(json.loads(json.dumps(body, default=dict)))
