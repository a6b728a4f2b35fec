"""DynamicResources in the live scheduler: the Filter in every profile over the state's
DRA catalog (scheduler/plugins/filters/dynamic_resources.py), and Reserve, PreBind and
Unreserve (scheduler/k8s/scheduling/dra_binder.py) against a recorded API."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from kubernetes.client.exceptions import ApiException

from scheduler.dra.catalog import CLAIMS, CLASSES, SLICES
from scheduler.framework.profile import schedule_pod
from scheduler.k8s.scheduling.binding_cycle import BindingCycle, PreBindError
from scheduler.k8s.scheduling.dra_binder import FINALIZER, MERGE_PATCH, STRATEGIC_MERGE_PATCH, DraBinder
from scheduler.objects.pod import Pod
from scheduler.objects.pod_manifest import pod_from_manifest
from scheduler.plugins.profiles import build_profile
from scheduler.state.cluster_state import ClusterState
from tests.builders import make_node, pod_manifest
from tests.dra.builders import DRIVER_A, claim_manifest, class_manifest, device, exactly, slice_manifest

PROFILE = build_profile("default")
NODES = ("node-1", "node-2")


def state_with(claims: list[dict[str, Any]]) -> ClusterState:
    """Two nodes with two GPUs each (gpu-0 "a100" on node-1; the rest "t4")."""
    state = ClusterState([make_node(n) for n in NODES])
    state.dra.apply(CLASSES, "ADDED", class_manifest("gpu", f'device.driver == "{DRIVER_A}"'))
    for node in NODES:
        models = ("a100", "t4") if node == "node-1" else ("t4", "t4")
        devices = [device(f"gpu-{i}", model=m) for i, m in enumerate(models)]
        state.dra.apply(SLICES, "ADDED", slice_manifest(f"{node}-gpus", devices, node=node, pool=node))
    for i, manifest in enumerate(claims):
        manifest["metadata"]["resourceVersion"] = str(10 + i)
        state.dra.apply(CLAIMS, "ADDED", manifest)
    return state


def claim(name: str, count: int = 1, *selectors: str) -> dict[str, Any]:
    return claim_manifest(name, exactly("gpu", "gpu", count, *selectors))


def pod(name: str, *claims: str) -> Pod:
    manifest = pod_manifest(name)
    manifest["metadata"]["uid"] = f"uid-{name}"
    manifest["spec"]["resourceClaims"] = [
        {"name": f"c{i}", "resourceClaimName": c} for i, c in enumerate(claims)
    ]
    return pod_from_manifest(manifest)


def decide(state: ClusterState, p: Pod) -> tuple[str, str]:
    decision = schedule_pod(state, p, PROFILE, np.random.default_rng(0))
    return decision.node, decision.message


@pytest.mark.parametrize(
    ("claims", "pod_claims", "node", "message"),
    [
        pytest.param(
            [claim("c", 1, f'device.attributes["{DRIVER_A}"].model == "a100"')],
            ["c"],
            "node-1",
            "",
            id="a selector",
        ),
        pytest.param([claim("c", 2)], ["c"], "", "", id="two of two GPUs: either node"),
        pytest.param(
            [claim("c", 3)],
            ["c"],
            "",
            "0/2 nodes are available: 2 cannot allocate all claims.",
            id="three GPUs: nowhere",
        ),
        pytest.param(
            [],
            ["missing"],
            "",
            '0/2 nodes are available: resourceclaim.resource.k8s.io "missing" not found.',
            id="an unknown claim",
        ),
    ],
)
def test_the_filter_in_the_default_profile(
    claims: list[dict[str, Any]], pod_claims: list[str], node: str, message: str
) -> None:
    chosen, said = decide(state_with(claims), pod("p", *pod_claims))
    assert said == message
    if node:
        assert chosen == node
    if not message:
        assert chosen in NODES


def test_a_pod_without_claims_does_not_run_the_filter() -> None:
    state = state_with([])
    plain = pod_from_manifest(pod_manifest("plain"))
    assert plain.resource_claims == ()
    assert decide(state, plain)[1] == ""


class RecordedApi:
    """``resourceclaims/status`` as the API server answers a patch: the merged claim with
    a new resourceVersion; ``conflict`` fails the next write."""

    def __init__(self, claims: Mapping[str, dict[str, Any]]) -> None:
        self.claims = {k: copy.deepcopy(v) for k, v in claims.items()}
        self.calls: list[tuple[str, dict[str, Any], str]] = []
        self.conflict = False
        self.version = 100

    async def patch(
        self, _namespace: str, name: str, body: Mapping[str, Any], content_type: str, subresource: str
    ) -> dict[str, Any]:
        self.calls.append(
            (f"{name}/{subresource}" if subresource else name, copy.deepcopy(dict(body)), content_type)
        )
        if self.conflict:
            raise RuntimeError("Operation cannot be fulfilled: the object has been modified")
        current = self.claims[name]
        if current["metadata"].get("resourceVersion") != body["metadata"].get(
            "resourceVersion", current["metadata"].get("resourceVersion")
        ):
            raise RuntimeError("Operation cannot be fulfilled: stale resourceVersion")
        status = current.setdefault("status", {})
        if not subresource:
            current["metadata"]["finalizers"] = body["metadata"]["finalizers"]
        elif content_type == MERGE_PATCH:
            status.update(body["status"])
        else:  # a strategic merge on reservedFor, merged by uid
            entries = body["status"]["reservedFor"]
            gone = {e["uid"] for e in entries if e.get("$patch") == "delete"}
            kept = [c for c in status.get("reservedFor", []) if c["uid"] not in gone]
            known = {c["uid"] for c in kept}
            added = [e for e in entries if "$patch" not in e and e["uid"] not in known]
            status["reservedFor"] = kept + added
        self.version += 1
        current["metadata"]["resourceVersion"] = str(self.version)
        return copy.deepcopy(current)


def binder_for(claims: list[dict[str, Any]]) -> tuple[ClusterState, DraBinder, RecordedApi]:
    state = state_with(claims)
    api = RecordedApi({c["metadata"]["name"]: c for c in claims})
    return state, DraBinder(state, api.patch), api


def cycle(state: ClusterState, p: Pod, node: str) -> BindingCycle:
    return BindingCycle(p, node, state.node_index[node])


def test_reserve_assumes_so_the_next_pod_gets_other_devices_and_prebind_writes() -> None:
    state, binder, api = binder_for([claim("c1", 2), claim("c2", 2)])
    first = cycle(state, pod("p1", "c1"), "node-1")
    binder.reserve(first)
    # node-1's two GPUs are in flight: the next pod's claim fits node-2 only.
    assert decide(state, pod("p2", "c2"))[0] == "node-2"
    asyncio.run(binder.pre_bind(first))
    (finalizer, (name, body, content_type)) = api.calls
    assert finalizer == (
        "c1",
        {"metadata": {"uid": "uid-c1", "resourceVersion": "10", "finalizers": [FINALIZER]}},
        STRATEGIC_MERGE_PATCH,
    )
    assert (name, content_type) == ("c1/status", MERGE_PATCH)
    assert body["metadata"] == {"uid": "uid-c1", "resourceVersion": "101"}
    assert body["status"]["reservedFor"] == [{"resource": "pods", "name": "p1", "uid": "uid-p1"}]
    results = body["status"]["allocation"]["devices"]["results"]
    assert [(r["pool"], r["device"]) for r in results] == [("node-1", "gpu-0"), ("node-1", "gpu-1")]
    assert body["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0][
        "values"
    ] == ["node-1"]
    # The written claim replaced the in-flight one: still in use.
    assert state.dra.in_flight == {}
    assert decide(state, pod("p2", "c2"))[0] == "node-2"


def test_a_shared_claim_only_gains_the_second_pod() -> None:
    state, binder, api = binder_for([claim("shared", 1)])
    first = cycle(state, pod("p1", "shared"), "node-1")
    binder.reserve(first)
    asyncio.run(binder.pre_bind(first))
    node, message = decide(state, pod("p2", "shared"))
    assert (node, message) == ("node-1", "")
    second = cycle(state, pod("p2", "shared"), node)
    binder.reserve(second)
    asyncio.run(binder.pre_bind(second))
    name, body, content_type = api.calls[-1]
    assert (name, content_type) == ("shared/status", STRATEGIC_MERGE_PATCH)
    # The pod alone, merged by uid, and no resourceVersion: pods joining at once do
    # not conflict.
    assert body == {
        "metadata": {"uid": "uid-shared"},
        "status": {"reservedFor": [{"resource": "pods", "name": "p2", "uid": "uid-p2"}]},
    }
    assert [name for name, _, _ in api.calls] == ["shared", "shared/status", "shared/status"]
    reserved = api.claims["shared"]["status"]["reservedFor"]
    assert [c["name"] for c in reserved] == ["p1", "p2"]


def test_a_claim_being_allocated_keeps_the_pods_that_share_it_waiting() -> None:
    """kube's PreFilter: while one pod's allocation of a claim is in flight, another
    pod that uses the claim waits, and is decided once the claim is written."""
    state, binder, _ = binder_for([claim("shared", 1)])
    first = cycle(state, pod("p1", "shared"), "node-1")
    binder.reserve(first)
    assert decide(state, pod("p2", "shared")) == (
        "",
        "0/2 nodes are available: resource claim default/shared is in the process of being allocated.",
    )
    asyncio.run(binder.pre_bind(first))
    assert decide(state, pod("p2", "shared")) == ("node-1", "")


def test_a_failed_write_gives_the_devices_back() -> None:
    state, binder, api = binder_for([claim("c1", 2)])
    first = cycle(state, pod("p1", "c1"), "node-1")
    binder.reserve(first)
    assert state.dra.in_use()
    api.conflict = True
    with pytest.raises(PreBindError, match="update claim default/c1: Operation cannot be fulfilled"):
        asyncio.run(binder.pre_bind(first))
    assert state.dra.in_use() == set()
    binder.unreserve(first)  # after a failed PreBind: nothing left to give back
    assert len(api.calls) == 1


def refusal(status: int, body: str) -> ApiException:
    """What the official client raises for an answer that is not 2xx."""
    error = ApiException(status=status, reason="refused")
    error.body = body
    return error


IMMUTABLE = (
    '{"kind":"Status","status":"Failure","message":"ResourceClaim.resource.k8s.io \\"c1\\" is invalid: '
    'spec: Invalid value: ...: field is immutable","reason":"Invalid","code":422}'
)


# (the finalizer patch's refusal, whether the status is still written)
FINALIZER_REFUSALS = [
    ("spec re-encoded: immutable", refusal(422, IMMUTABLE), True),
    ("another 422", refusal(422, '{"message":"metadata.finalizers: Invalid value"}'), False),
    ("a conflict", refusal(409, '{"message":"field is immutable"}'), False),
]


@pytest.mark.parametrize(
    ("refused", "written"),
    [row[1:] for row in FINALIZER_REFUSALS],
    ids=[row[0] for row in FINALIZER_REFUSALS],
)
def test_a_claim_that_cannot_be_patched_is_allocated_without_the_finalizer(
    refused: ApiException, written: bool
) -> None:
    state, binder, api = binder_for([claim("c1", 1)])
    recorded = api.patch

    async def patch(
        namespace: str, name: str, body: Mapping[str, Any], content_type: str, subresource: str
    ) -> dict[str, Any]:
        if not subresource:
            raise refused
        return await recorded(namespace, name, body, content_type, subresource)

    binder.patch_claim = patch
    first = cycle(state, pod("p1", "c1"), "node-1")
    binder.reserve(first)
    if written:
        asyncio.run(binder.pre_bind(first))
        ((name, body, _),) = api.calls
        assert name == "c1/status"
        assert body["metadata"]["resourceVersion"] == "10"  # the version Reserve saw
        assert body["status"]["reservedFor"] == [{"resource": "pods", "name": "p1", "uid": "uid-p1"}]
    else:
        with pytest.raises(PreBindError, match="update claim default/c1"):
            asyncio.run(binder.pre_bind(first))
        assert api.calls == []
        assert state.dra.in_use() == set()


def test_unreserve_after_a_write_takes_the_pod_out_of_reserved_for() -> None:
    state, binder, api = binder_for([claim("c1", 1)])
    first = cycle(state, pod("p1", "c1"), "node-1")

    async def bind_fails() -> None:
        binder.reserve(first)
        await binder.pre_bind(first)
        binder.unreserve(first)  # Bind failed
        await asyncio.gather(*binder._releases)

    asyncio.run(bind_fails())
    name, body, content_type = api.calls[-1]
    assert (name, content_type) == ("c1/status", STRATEGIC_MERGE_PATCH)
    assert body["status"]["reservedFor"] == [{"$patch": "delete", "uid": "uid-p1"}]
    stored = state.dra.claim("default/c1")
    assert stored is not None
    assert stored.reserved_for == ()


@pytest.mark.parametrize(
    ("case", "settled"),
    [
        ("written", [False]),  # the allocation written: pods sharing the claim are tried again
        ("write refused", [True]),  # given back: its devices are free again
        ("joining an allocated claim", []),  # nothing was in flight
    ],
)
def test_allocations_settled_requeue_the_pods_waiting_on_them(case: str, settled: list[bool]) -> None:
    """kube requeues the pods that wait on a claim being allocated when its assume cache
    takes the written claim; the claim's own watch event may come before the answer,
    while the allocation is still in flight, and move them too early."""
    state, binder, api = binder_for([claim("shared", 1)])
    calls: list[bool] = []
    if case == "joining an allocated claim":
        first = cycle(state, pod("p1", "shared"), "node-1")
        binder.reserve(first)
        asyncio.run(binder.pre_bind(first))
    binder.settled = calls.append
    p = pod("p2", "shared")
    current = cycle(state, p, "node-1")
    binder.reserve(current)
    api.conflict = case == "write refused"
    if case == "write refused":
        with pytest.raises(PreBindError):
            asyncio.run(binder.pre_bind(current))
    else:
        asyncio.run(binder.pre_bind(current))
    assert calls == settled
    assert state.dra.in_flight == {}
