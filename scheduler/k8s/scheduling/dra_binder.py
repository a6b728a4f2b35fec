"""DynamicResources' Reserve, PreBind and Unreserve, as kube-scheduler v1.36 does them
(``pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go``):

- **Reserve**: the pod's claims that are not allocated yet are allocated on the chosen
  node (``scheduler.dra.node_filter.filter_node``, the Filter's own search) and the
  allocations assumed in the catalog (kube's ``inFlightAllocations``), so the next pod
  does not take the same devices; a claim that is allocated already is only reserved;
- **PreBind**: a claim this scheduler allocated first gets kube's finalizer
  (``resource.kubernetes.io/delete-protection``); then its ``status`` is written
  (``resourceclaims/status``, a merge patch carrying the claim's ``uid`` and
  ``resourceVersion`` as preconditions): the allocation and the pod in
  ``reservedFor``; a claim allocated already (shared) gains the pod by a strategic
  merge on ``reservedFor``'s merge key (``uid``), which needs no resourceVersion, so
  pods sharing a claim do not conflict with one another; the answer replaces the
  in-flight allocation in the catalog. While a claim's allocation is in flight, other
  pods that use it wait for it (the runtime holds them aside; a cycle that meets one
  anyway fails with kube's PreFilter ``resource claim ns/name is in the process of
  being allocated``);
- **Unreserve**: in-flight allocations are given back; where PreBind wrote already, the
  pod is removed from ``reservedFor`` (a strategic merge patch deleting its entry by
  uid, as kube's); the resourceclaim controller deallocates a claim no pod reserves.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from scheduler.dra.allocator import ClaimAllocation
from scheduler.dra.catalog import ClaimLookupError, DraCatalog
from scheduler.dra.gpu_view import sync_dra_gpus
from scheduler.dra.node_filter import filter_node
from scheduler.dra.objects import Allocation, DraObjectError, ResourceClaim
from scheduler.k8s.client.api import MERGE_PATCH, KubeApi, segment
from scheduler.k8s.scheduling.binding_cycle import BindingCycle, PreBindError
from scheduler.objects.fields import FieldReader
from scheduler.objects.pod import Pod
from scheduler.state.cluster_state import ClusterState

log = logging.getLogger(__name__)
DYNAMIC_RESOURCES = "DynamicResources"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"

# resourceapi.Finalizer: an allocated claim is not deleted while in use.
FINALIZER = "resource.kubernetes.io/delete-protection"

# (namespace, name, patch, content type, subresource "status" or "") -> the claim as the
# API server answered.
PatchClaim = Callable[[str, str, Mapping[str, Any], str, str], Awaitable[Mapping[str, Any]]]


@dataclass
class PodClaims:
    """What Reserve set aside for one pod: its claims (allocated ones as the catalog
    had them, the others with the allocation chosen here) and which were written."""

    claims: list[ResourceClaim]
    allocations: dict[str, ClaimAllocation] = field(default_factory=dict)
    written: list[str] = field(default_factory=list)


def allocation_json(allocation: ClaimAllocation) -> dict[str, Any]:
    """``status.allocation`` as the API takes it."""
    results = []
    for r in allocation.results:
        result: dict[str, Any] = {
            "request": r.request,
            "driver": r.driver,
            "pool": r.pool,
            "device": r.device,
        }
        if r.admin_access:
            result["adminAccess"] = True
        results.append(result)
    devices: dict[str, Any] = {"results": results}
    if allocation.config:
        devices["config"] = list(allocation.config)
    out: dict[str, Any] = {"devices": devices}
    if allocation.node_selector is not None:
        out["nodeSelector"] = allocation.node_selector
    return out


def allocated(claim: ResourceClaim, allocation: ClaimAllocation) -> ResourceClaim:
    """``claim`` with ``allocation`` in its status (the in-flight version)."""
    reader = FieldReader(f"ResourceClaim {claim.key}", DraObjectError)
    selector = reader.node_selector(allocation.node_selector, "status.allocation.nodeSelector")
    return replace(claim, allocation=Allocation(allocation.results, selector))


def _consumer(pod: Pod) -> dict[str, str]:
    return {"resource": "pods", "name": pod.name, "uid": pod.uid}


class DraBinder:
    name = DYNAMIC_RESOURCES

    def __init__(
        self, state: ClusterState, patch_claim: PatchClaim, settled: Callable[[bool], None] | None = None
    ) -> None:
        self.state = state
        self.patch_claim = patch_claim
        # Called once allocations this binder held in flight are written (False) or
        # given back (True: their devices are free again): pods that share a claim being
        # allocated wait for it (kube requeues them when its assume cache takes the
        # written claim), and the claim's watch event may have come and gone while the
        # allocation was still in flight.
        self.settled = settled or (lambda _freed: None)
        self._releases: set[asyncio.Task[None]] = set()

    @property
    def catalog(self) -> DraCatalog:
        return self.state.dra

    def reserve(self, cycle: BindingCycle) -> None:
        names = cycle.pod.resource_claims
        if not names:
            return
        pod = cycle.pod
        try:
            claims = self.catalog.pod_claims(pod.namespace, pod.name, names)
        except ClaimLookupError as error:
            # The Filter passed on these claims a moment ago; PreBind reports it.
            cycle.held[self.name] = error
            return
        held = PodClaims(claims)
        cycle.held[self.name] = held
        pending = [c for c in claims if c.allocation is None]
        if not pending:
            return
        decision = filter_node(
            claims,
            self.catalog.classes,
            self.catalog.slice_index(),
            cycle.node,
            self.state.nodes[cycle.node_index].labels,
            self.catalog.in_use(),
        )
        if not decision.status.ok:
            cycle.held[self.name] = ClaimLookupError(decision.status.message)
            return
        for claim, allocation in zip(pending, decision.allocations, strict=True):
            held.allocations[claim.key] = allocation
            self.catalog.assume(allocated(claim, allocation))
        sync_dra_gpus(self.state)  # the node's DRA GPUs are taken for the next pod's scores

    def unreserve(self, cycle: BindingCycle) -> None:
        held = cycle.held.pop(self.name, None)
        if not isinstance(held, PodClaims):
            return
        self._give_back(held)
        if held.written:
            # Bind failed after PreBind wrote: the pod leaves reservedFor, in the background.
            task = asyncio.get_running_loop().create_task(self.release(cycle, held))
            self._releases.add(task)
            task.add_done_callback(self._releases.discard)

    def _give_back(self, held: PodClaims) -> None:
        """Forget the allocations ``held`` assumed (the pod did not get them), and say
        they settled."""
        for key in held.allocations:
            self.catalog.forget(key)
        sync_dra_gpus(self.state)
        if held.allocations:
            self.settled(True)

    async def release(self, cycle: BindingCycle, held: PodClaims) -> None:
        """Remove the pod from ``reservedFor`` of the claims PreBind wrote (kube's
        Unreserve); failures are logged, as kube logs them."""
        for claim in held.claims:
            if claim.key not in held.written:
                continue
            patch = {
                "metadata": {"uid": claim.uid},
                "status": {"reservedFor": [{"$patch": "delete", "uid": cycle.pod.uid}]},
            }
            try:
                answer = await self.patch_claim(
                    claim.namespace, claim.name, patch, STRATEGIC_MERGE_PATCH, "status"
                )
                self.catalog.written(answer)
                sync_dra_gpus(self.state)
            except Exception as error:  # logged; the claim keeps the pod until the controller cleans up
                log.warning("unreserving claim %s for pod %s: %s", claim.key, cycle.pod.key, error)

    async def pre_bind(self, cycle: BindingCycle) -> None:
        held = cycle.held.get(self.name)
        if isinstance(held, ClaimLookupError):
            cycle.held.pop(self.name, None)
            raise PreBindError(self.name, "dynamic-resources", str(held))
        if not isinstance(held, PodClaims):
            return
        pod = cycle.pod
        for claim in held.claims:
            try:
                answer = await self._write(pod, claim, held.allocations.get(claim.key))
            except Exception as error:
                cycle.held.pop(self.name, None)
                self._give_back(held)
                await self.release(cycle, held)
                raise PreBindError(
                    self.name, "dynamic-resources", f"update claim {claim.key}: {error}"
                ) from None
            if answer is not None:
                held.written.append(claim.key)
                self.catalog.written(answer)
                sync_dra_gpus(self.state)
                log.info("claim %s reserved for pod %s on %s", claim.key, pod.key, cycle.node)
        if held.allocations:
            self.settled(False)

    async def _write(
        self, pod: Pod, claim: ResourceClaim, allocation: ClaimAllocation | None
    ) -> Mapping[str, Any] | None:
        """One claim's status write (None: nothing to write), over the claim as last
        seen: another pod may have joined a shared claim since Reserve."""
        stored = self.catalog.claims.get(claim.key)
        if stored is None:
            raise ClaimLookupError(f'resourceclaim.resource.k8s.io "{claim.name}" not found')
        current = stored.claim
        reserved = [{"resource": c.resource, "name": c.name, "uid": c.uid} for c in current.reserved_for]
        if allocation is None and any(c["uid"] == pod.uid for c in reserved):
            return None
        if allocation is None:
            # Joining a claim allocated already: a strategic merge adds the pod to
            # reservedFor by its uid (the list's merge key) without a resourceVersion, so
            # pods that share the claim and bind at once do not conflict; the API server
            # refuses the entry past 256 consumers, as it refuses kube's update.
            joined = {"metadata": {"uid": current.uid}, "status": {"reservedFor": [_consumer(pod)]}}
            return await self.patch_claim(
                claim.namespace, claim.name, joined, STRATEGIC_MERGE_PATCH, "status"
            )
        # kube's bindClaim adds the finalizer first (a strategic merge adds it to the
        # list), then writes the allocation at the version that answer has: the claim
        # must still be unallocated.
        version = await self._protect(claim, current.uid, stored.resource_version)
        status = {"reservedFor": [*reserved, _consumer(pod)], "allocation": allocation_json(allocation)}
        patch = {"metadata": {"uid": current.uid, "resourceVersion": version}, "status": status}
        return await self.patch_claim(claim.namespace, claim.name, patch, MERGE_PATCH, "status")

    async def _protect(self, claim: ResourceClaim, uid: str, version: str) -> str:
        """kube's finalizer on a claim this scheduler allocates; the resourceVersion to
        write the status at. A claim whose spec a JSON patch cannot keep (see
        ``spec_cannot_be_patched``) is written without it, with a warning."""
        metadata = {"uid": uid, "resourceVersion": version, "finalizers": [FINALIZER]}
        try:
            protected = await self.patch_claim(
                claim.namespace, claim.name, {"metadata": metadata}, STRATEGIC_MERGE_PATCH, ""
            )
        except Exception as error:
            if not spec_cannot_be_patched(error):
                raise
            log.warning(
                "ResourceClaim %s: metadata.finalizers: %s cannot be added (the API server refuses "
                "any JSON patch of this claim: spec: field is immutable; its opaque parameters were "
                "stored as sent, not compact); allocating it without delete protection",
                claim.key,
                FINALIZER,
            )
            return version
        return str((protected.get("metadata") or {}).get("resourceVersion") or "")


def spec_cannot_be_patched(error: BaseException) -> bool:
    """The API server refused a metadata-only patch of a claim because the spec it
    re-encoded differs from the one it stored: it keeps opaque parameters
    (``RawExtension``) byte for byte as a client sent them, re-encodes them compactly
    when it applies a JSON patch, and compares bytes (``spec: Invalid value ... field is
    immutable``, HTTP 422). A claim (or its template) whose parameters arrived as
    non-compact JSON, as Python's json writes them, is refused so. kube-scheduler adds
    the finalizer with a protobuf Update, which keeps the bytes; the status subresource
    is not affected."""
    status = getattr(error, "status", None)
    body = str(getattr(error, "body", "") or "")
    return status == 422 and "spec" in body and "field is immutable" in body


def api_patcher(api: KubeApi) -> PatchClaim:
    """``resourceclaims`` and ``resourceclaims/status`` patches through ``api``
    (rate-limited like every write)."""

    async def patch(
        namespace: str, name: str, body: Mapping[str, Any], content_type: str, subresource: str
    ) -> Mapping[str, Any]:
        path = f"/apis/resource.k8s.io/v1/namespaces/{segment(namespace)}/resourceclaims/{segment(name)}"
        answer: Mapping[str, Any] = await api.request_json(
            "PATCH", f"{path}/status" if subresource == "status" else path, body, content_type=content_type
        )
        return answer

    return patch
