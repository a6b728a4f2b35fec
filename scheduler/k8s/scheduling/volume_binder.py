"""VolumeBinding's Reserve and PreBind, as kube-scheduler does them (volumebinding/
binder.go: AssumePodVolumes, BindPodVolumes, checkBindings).

Reserve, right after the decision: for the chosen node, the volumes to bind to the
pod's unbound ``WaitForFirstConsumer`` claims and the claims to provision there are
assumed in the catalog, so the next decision does not offer the same volume.

PreBind, before the pod's Binding: each chosen volume gets the claim in
``spec.claimRef`` (and ``pv.kubernetes.io/bound-by-controller``), each claim to
provision gets ``volume.kubernetes.io/selected-node``; both patches carry the
object's resourceVersion, so a change since the decision fails them. Then it waits
(``BIND_TIMEOUT_S``, kube's default ``bindTimeoutSeconds``) until the PV controller
(or the external provisioner, then the PV controller) has bound every claim, and
fails as kube-scheduler does when a volume's claimRef is dropped, a provisioner
takes the selected node back, or the volume's node affinity no longer matches. A
failure releases the assumptions; the pod is decided again after a backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
from kubernetes.client.exceptions import ApiException

from scheduler.k8s.client.api import MERGE_PATCH, KubeApi, segment
from scheduler.objects.pod import Pod
from scheduler.objects.volumes import BOUND_BY_CONTROLLER, SELECTED_NODE, Claim, ClaimRef, PersistentVolume
from scheduler.state.cluster_state import ClusterState
from scheduler.volumes.binding import PodVolumes, find_pod_volumes, pod_claims
from scheduler.volumes.catalog import VolumeCatalog
from scheduler.volumes.node_masks import selector_mask

log = logging.getLogger(__name__)
BIND_TIMEOUT_S = 600.0
PREFIX = 'running PreBind plugin "VolumeBinding"'


class VolumeBindError(Exception):
    """PreBind failed; the message is kube-scheduler's."""


def _version(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0


class VolumeBinder:
    def __init__(
        self,
        api: KubeApi,
        state: ClusterState,
        pod_exists: Callable[[str], bool],
        timeout_s: float = BIND_TIMEOUT_S,
        poll_s: float = 1.0,
    ) -> None:
        self.api = api
        self.state = state
        self.pod_exists = pod_exists
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self._changed = asyncio.Event()

    @property
    def catalog(self) -> VolumeCatalog:
        return self.state.volumes

    def changed(self) -> None:
        """A storage object changed: binds waiting for their claims look again."""
        self._changed.set()
        self._changed = asyncio.Event()

    # ---- Reserve ----------------------------------------------------------------

    def reserve(self, pod: Pod, node_index: int) -> PodVolumes:
        """What binding the pod's volumes on the node takes, assumed in the catalog
        (empty when every claim is bound already)."""
        if not pod.volumes:
            return PodVolumes()
        claims = pod_claims(pod, self.catalog)
        if not claims.delayed:
            return PodVolumes()
        node = self.state.nodes[node_index].name
        volumes = find_pod_volumes(self.state, claims, np.array([node_index], np.int64)).pod_volumes(0)
        static = []
        for claim, volume in volumes.static:
            bound = replace(volume, claim_ref=ClaimRef(claim.namespace, claim.name, claim.uid))
            self.catalog.assume_volume(bound)
            static.append((claim, bound))
        provisions = []
        for claim in volumes.provisions:
            selected = replace(claim, selected_node=node)
            self.catalog.assume_claim(selected)
            provisions.append(selected)
        return PodVolumes(tuple(static), tuple(provisions))

    def unreserve(self, volumes: PodVolumes) -> None:
        self.catalog.restore(
            claims=[c.key for c in volumes.provisions], volumes=[v.name for _, v in volumes.static]
        )

    # ---- PreBind ----------------------------------------------------------------

    async def pre_bind(self, pod: Pod, node: str, volumes: PodVolumes) -> None:
        """Write the bindings and wait for them; raises ``VolumeBindError``."""
        try:
            written = await self._write(node, volumes)
        except ApiException as error:
            self.unreserve(volumes)
            raise VolumeBindError(f"{PREFIX}: {_api_reason(error)}") from None
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                if self._bound(pod, node, written):
                    return
            except VolumeBindError as error:
                self.unreserve(volumes)
                raise VolumeBindError(f"{PREFIX}: binding volumes: {error}") from None
            left = deadline - time.monotonic()
            if left <= 0:
                self.unreserve(volumes)
                raise VolumeBindError(f"{PREFIX}: binding volumes: context deadline exceeded")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(left, self.poll_s))

    async def _write(self, node: str, volumes: PodVolumes) -> dict[str, int]:
        """The patches; returns the resourceVersion each object got, by claim key or
        volume name."""
        written: dict[str, int] = {}
        for claim, volume in volumes.static:
            metadata: dict[str, Any] = {"resourceVersion": volume.resource_version}
            if BOUND_BY_CONTROLLER not in volume.annotations:
                metadata["annotations"] = {BOUND_BY_CONTROLLER: "yes"}
            ref = {
                "kind": "PersistentVolumeClaim",
                "apiVersion": "v1",
                "namespace": claim.namespace,
                "name": claim.name,
                "uid": claim.uid,
                "resourceVersion": claim.resource_version,
            }
            patch = {"metadata": metadata, "spec": {"claimRef": ref}}
            answer = await self.api.request_json(
                "PATCH", f"/api/v1/persistentvolumes/{segment(volume.name)}", patch, content_type=MERGE_PATCH
            )
            written[volume.name] = _version(str(answer.get("metadata", {}).get("resourceVersion", "")))
            log.info("volume %s bound to claim %s for the pod's node %s", volume.name, claim.key, node)
        for claim in volumes.provisions:
            patch = {
                "metadata": {"resourceVersion": claim.resource_version, "annotations": {SELECTED_NODE: node}}
            }
            answer = await self.api.request_json(
                "PATCH",
                f"/api/v1/namespaces/{segment(claim.namespace)}/persistentvolumeclaims/{segment(claim.name)}",
                patch,
                content_type=MERGE_PATCH,
            )
            written[claim.key] = _version(str(answer.get("metadata", {}).get("resourceVersion", "")))
            log.info("claim %s to be provisioned on %s", claim.key, node)
        return written

    def _bound(self, pod: Pod, node: str, written: dict[str, int]) -> bool:
        """``checkBindings`` on the watched objects: True when every claim is bound,
        False to wait; raises ``VolumeBindError`` when binding must be retried."""
        if not self.pod_exists(pod.key):
            raise VolumeBindError(f'pod does not exist any more: pod "{pod.name}" not found')
        index = self.state.node_index.get(node)
        if index is None:
            raise VolumeBindError(f'failed to get node "{node}": node "{node}" not found')
        catalog = self.catalog
        done = True
        for key, version in written.items():
            if "/" in key:
                if not self._claim_bound(key, version, node, index):
                    done = False
                continue
            volume = catalog.volumes.get(key)
            if volume is None:
                raise VolumeBindError(f'failed to check binding: persistentvolume "{key}" not found')
            if _version(volume.resource_version) < version:
                return False
            self._check_affinity(volume, node, index)
            if volume.claim_ref is None or not volume.claim_ref.uid:
                raise VolumeBindError(f'ClaimRef got reset for pv "{key}"')
            ref = volume.claim_ref
            claim = catalog.claims.get(f"{ref.namespace}/{ref.name}")
            if claim is None:
                raise VolumeBindError(
                    f'failed to check binding: persistentvolumeclaim "{ref.namespace}/{ref.name}" not found'
                )
            done = done and claim.fully_bound
        return done

    def _claim_bound(self, key: str, version: int, node: str, index: int) -> bool:
        claim: Claim | None = self.catalog.claims.get(key)
        if claim is None:
            raise VolumeBindError(f'failed to check provisioning pvc: persistentvolumeclaim "{key}" missing')
        if _version(claim.resource_version) < version:
            return False
        if claim.selected_node != node:
            raise VolumeBindError(f'provisioning failed for PVC "{claim.name}"')
        if claim.volume_name:
            volume = self.catalog.volumes.get(claim.volume_name)
            if volume is None:
                return False  # not in our watch yet
            self._check_affinity(volume, node, index)
        return claim.fully_bound

    def _check_affinity(self, volume: PersistentVolume, node: str, index: int) -> None:
        if not selector_mask(self.state, volume.node_affinity)[index]:
            raise VolumeBindError(
                f'pv "{volume.name}" node affinity doesn\'t match node "{node}": '
                "no matching NodeSelectorTerms"
            )


def _api_reason(error: ApiException) -> str:
    try:
        message = json.loads(error.body or "{}").get("message")
    except ValueError:
        message = None
    return str(message or error.reason or error.status)
