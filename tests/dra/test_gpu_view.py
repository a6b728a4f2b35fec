"""GPUs from ResourceSlices as the GPU scores see them (scheduler/dra/gpu_view.py): a
node's devices of the GPU classes become its GPU rows, free as the catalog says; a DRA
pod's claims become a whole-GPU request for FGD, fgd-reserve and the policy only."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scheduler.dra.catalog import CLAIMS, CLASSES, SLICES
from scheduler.dra.gpu_view import dra_gpu_count, scoring_pod, sync_dra_gpus
from scheduler.dra.manifests import resource_claim_from_manifest
from scheduler.framework.profile import schedule_pod
from scheduler.k8s.scheduling.binding_cycle import BindingCycle
from scheduler.k8s.scheduling.cache import SchedulerCache
from scheduler.k8s.scheduling.dra_binder import DraBinder
from scheduler.objects.pod import Pod
from scheduler.objects.pod_manifest import pod_from_manifest
from scheduler.plugins.profiles import build_profile
from scheduler.plugins.registry import ProfileContext
from scheduler.plugins.scores.fgd import FgdScore
from scheduler.state.cluster_state import ClusterState
from scheduler.state.fragmentation import PodShape, typical_pods
from tests.builders import all_nodes, context, make_node, make_pod, make_state, node_manifest, pod_manifest
from tests.dra.builders import (
    claim_manifest,
    class_manifest,
    device,
    exactly,
    first_available,
    slice_manifest,
)

DRIVER = "gpu.nvidia.com"
GPU_CLASS = "gpu.nvidia.com"
OTHER_CLASS = "nic.example.com"
MODEL = "A100"


def gpu_slice(node: str, count: int, model: str = MODEL) -> dict[str, Any]:
    devices = [device(f"gpu-{i}", productName=model) for i in range(count)]
    return slice_manifest(f"{node}-gpus", devices, node=node, pool=node, driver=DRIVER)


def allocated_claim(name: str, node: str, *devices: int) -> dict[str, Any]:
    results = [{"request": "gpus", "driver": DRIVER, "pool": node, "device": f"gpu-{d}"} for d in devices]
    manifest = claim_manifest(
        name,
        exactly("gpus", GPU_CLASS, len(devices)),
        status={"allocation": {"devices": {"results": results}}},
    )
    manifest["metadata"]["resourceVersion"] = "1"
    return manifest


def dra_state(
    slices: dict[str, int], classes: frozenset[str] = frozenset({GPU_CLASS}), **nodes: Any
) -> ClusterState:
    """Nodes (``nodes``: ``make_node``'s keywords) with ``slices[node]`` GPUs in a ResourceSlice."""
    state = ClusterState([make_node(n, cpu="32", memory="64Gi", **nodes) for n in slices])
    state.dra_gpu_classes = classes
    state.dra.apply(CLASSES, "ADDED", class_manifest(GPU_CLASS, f'device.driver == "{DRIVER}"'))
    state.dra.apply(CLASSES, "ADDED", class_manifest(OTHER_CLASS, 'device.driver == "nic.example.com"'))
    for node, count in slices.items():
        state.dra.apply(SLICES, "ADDED", gpu_slice(node, count))
    sync_dra_gpus(state)
    return state


def gpu_rows(state: ClusterState, node: str) -> tuple[int, list[int], str]:
    i = state.node_index[node]
    count = int(state.gpu_count[i])
    model = state.gpu_models[state.gpu_model_id[i]] if state.gpu_model_id[i] >= 0 else ""
    return count, [int(m) for m in state.gpu_free_milli[i, :count]], model


NONE: tuple[int, list[int], str] = (0, [], "")
NODE_2: tuple[int, list[int], str] = (1, [1000], MODEL)


def relisted(state: ClusterState, node_1_gpus: int = 2) -> None:
    """Every slice again, as a relist gives them: node-1's with ``node_1_gpus``."""
    state.dra.apply(SLICES, "MODIFIED", gpu_slice("node-1", node_1_gpus))
    state.dra.apply(SLICES, "MODIFIED", gpu_slice("node-2", 1))


# (case, state change after the slices, expected (count, free milli per GPU, model) of
# node-1 and of node-2)
NODE_CASES = [
    ("two free GPUs from the slice", lambda _: None, (2, [1000, 1000], MODEL), NODE_2),
    (
        "an allocated claim takes gpu-0",
        lambda s: s.dra.apply(CLAIMS, "ADDED", allocated_claim("c", "node-1", 0)),
        (2, [0, 1000], MODEL),
        NODE_2,
    ),
    (
        "an in-flight allocation (Reserve) takes gpu-1",
        lambda s: s.dra.assume(resource_claim_from_manifest(allocated_claim("c", "node-1", 1))),
        (2, [1000, 0], MODEL),
        NODE_2,
    ),
    (
        "node-1's slice deleted: it has no GPUs",
        lambda s: s.dra.apply(SLICES, "DELETED", gpu_slice("node-1", 2)),
        NONE,
        NODE_2,
    ),
    ("the slices relisted as they were", relisted, (2, [1000, 1000], MODEL), NODE_2),
    (
        "the slices relisted with a third GPU on node-1",
        lambda s: relisted(s, 3),
        (3, [1000, 1000, 1000], MODEL),
        NODE_2,
    ),
    (
        "the slices relisted as they were, then node-1's slice with one GPU",
        lambda s: (relisted(s), sync_dra_gpus(s), relisted(s, 1)),
        (1, [1000], MODEL),
        NODE_2,
    ),
    (
        "the GPU class deleted: no node has GPUs",
        lambda s: s.dra.apply(CLASSES, "DELETED", class_manifest(GPU_CLASS)),
        NONE,
        NONE,
    ),
]


@pytest.mark.parametrize(
    ("change", "node_1", "node_2"), [c[1:] for c in NODE_CASES], ids=[c[0] for c in NODE_CASES]
)
def test_node_gpu_rows(
    change: Any, node_1: tuple[int, list[int], str], node_2: tuple[int, list[int], str]
) -> None:
    state = dra_state({"node-1": 2, "node-2": 1})
    before = int(state.node_version[state.node_index["node-1"]])
    change(state)
    changed = sync_dra_gpus(state)
    assert gpu_rows(state, "node-1") == node_1
    assert gpu_rows(state, "node-2") == node_2
    moved = int(state.node_version[state.node_index["node-1"]]) != before
    assert moved == (node_1 != (2, [1000, 1000], MODEL)) == ("node-1" in changed)


def test_forget_frees_the_gpu_again() -> None:
    state = dra_state({"node-1": 2})
    claim = resource_claim_from_manifest(allocated_claim("c", "node-1", 0))
    state.dra.assume(claim)
    sync_dra_gpus(state)
    assert gpu_rows(state, "node-1")[1] == [0, 1000]
    state.dra.forget(claim.key)
    sync_dra_gpus(state)
    assert gpu_rows(state, "node-1")[1] == [1000, 1000]


# (case, GPU classes, node keywords, expected rows of node-1)
KEPT_CASES = [
    ("no GPU classes: DRA devices are no GPUs", frozenset(), {}, (0, [], "")),
    ("another class only", frozenset({OTHER_CLASS}), {}, (0, [], "")),
    (
        "device-plugin GPUs come first",
        frozenset({GPU_CLASS}),
        {"gpus": 4, "hami": False},
        (4, [1000] * 4, ""),
    ),
]


@pytest.mark.parametrize(
    ("classes", "node", "expected"), [c[1:] for c in KEPT_CASES], ids=[c[0] for c in KEPT_CASES]
)
def test_nodes_without_dra_gpus_keep_their_rows(
    classes: frozenset[str], node: dict[str, Any], expected: tuple[int, list[int], str]
) -> None:
    state = dra_state({"node-1": 2}, classes, **node)
    assert gpu_rows(state, "node-1") == expected
    assert state.dra_gpus == {}


def test_node_update_and_removal_keep_the_view() -> None:
    state = dra_state({"node-1": 2, "node-2": 2})
    state.update_node(make_node("node-1", cpu="16", memory="64Gi", labels={"zone": "a"}))
    sync_dra_gpus(state, ("node-1",))
    assert gpu_rows(state, "node-1") == (2, [1000, 1000], MODEL)
    state.remove_node("node-1")
    sync_dra_gpus(state, ("node-1",))
    assert "node-1" not in state.dra_gpus
    assert gpu_rows(state, "node-2") == (2, [1000, 1000], MODEL)


def dra_pod(name: str, *claims: str, gpus: int = 0) -> Pod:
    manifest = pod_manifest(name, cpu="4", gpus=gpus)
    manifest["metadata"]["uid"] = f"uid-{name}"
    manifest["spec"]["resourceClaims"] = [
        {"name": f"c{i}", "resourceClaimName": c} for i, c in enumerate(claims)
    ]
    return pod_from_manifest(manifest)


# (case, claim manifests, pod's own nvidia.com/gpu, whole GPUs the scores see)
POD_CASES: list[tuple[str, list[dict[str, Any]], int, int]] = [
    ("ExactCount 2 of the GPU class", [claim_manifest("a", exactly("gpus", GPU_CLASS, 2))], 0, 2),
    (
        "two claims add up",
        [claim_manifest("a", exactly("g", GPU_CLASS, 1)), claim_manifest("b", exactly("g", GPU_CLASS, 3))],
        0,
        4,
    ),
    (
        "firstAvailable: its first alternative",
        [
            claim_manifest(
                "a", first_available("g", exactly("two", GPU_CLASS, 2), exactly("one", GPU_CLASS, 1))
            )
        ],
        0,
        2,
    ),
    ("another class: none", [claim_manifest("a", exactly("nic", OTHER_CLASS, 1))], 0, 0),
    ("All: not counted", [claim_manifest("a", exactly("g", GPU_CLASS, None, mode="All"))], 0, 0),
    ("adminAccess: not counted", [claim_manifest("a", exactly("g", GPU_CLASS, 1, admin=True))], 0, 0),
    ("an allocated claim adds nothing", [allocated_claim("a", "node-1", 0)], 0, 0),
    (
        "a pod asking nvidia.com/gpu keeps its own request",
        [claim_manifest("a", exactly("g", GPU_CLASS, 2))],
        1,
        1,
    ),
]


@pytest.mark.parametrize(
    ("claims", "own", "expected"), [c[1:] for c in POD_CASES], ids=[c[0] for c in POD_CASES]
)
def test_scoring_pod(claims: list[dict[str, Any]], own: int, expected: int) -> None:
    state = dra_state({"node-1": 4})
    for manifest in claims:
        state.dra.apply(CLAIMS, "ADDED", manifest)
    pod = dra_pod("p", *(m["metadata"]["name"] for m in claims), gpus=own)
    seen = scoring_pod(state, pod)
    assert seen.gpu.count == expected
    assert seen.gpu.milli_per_gpu == (1000 if expected else 0)
    assert (seen is pod) == (own > 0 or dra_gpu_count(state, pod) == 0)


def test_a_pod_whose_claim_is_unknown_scores_as_written() -> None:
    state = dra_state({"node-1": 4})
    pod = dra_pod("p", "missing")
    assert scoring_pod(state, pod) is pod


TYPICAL = typical_pods(
    [PodShape(4000, 1000, 1)] * 5 + [PodShape(8000, 1000, 2)] * 3 + [PodShape(2000, 500, 1)] * 2
)
# GPUs already taken per node (the same on both sides), and the nodes' GPU counts.
TAKEN = {"node-1": 3, "node-2": 1, "node-3": 0, "node-4": 6}
SIZES = {"node-1": 4, "node-2": 2, "node-3": 8, "node-4": 8}


def plugin_state() -> ClusterState:
    """Device-plugin nodes (``nvidia.com/gpu``) with whole-GPU pods on them."""
    nodes = [make_node(n, cpu="32", memory="64Gi", gpus=SIZES[n], hami=False, model=MODEL) for n in SIZES]
    placed = [(make_pod(f"old-{n}", cpu="4", gpus=TAKEN[n]), n) for n in SIZES if TAKEN[n]]
    return make_state(nodes, placed)


def equivalent_dra_state() -> ClusterState:
    """The same nodes with their GPUs in ResourceSlices, taken by allocated claims
    (held by CPU-only pods of the same CPU)."""
    state = dra_state(SIZES)
    for n, taken in TAKEN.items():
        if taken:
            state.dra.apply(CLAIMS, "ADDED", allocated_claim(f"old-{n}", n, *range(taken)))
            state.place(make_pod(f"old-{n}", cpu="4"), n)
    sync_dra_gpus(state)
    return state


@pytest.mark.parametrize("gpus", [1, 2, 4])
def test_fgd_ranks_a_dra_pod_as_the_same_pod_asking_nvidia_gpu(gpus: int) -> None:
    plain, dra = plugin_state(), equivalent_dra_state()
    dra.dra.apply(CLAIMS, "ADDED", claim_manifest("new", exactly("gpus", GPU_CLASS, gpus)))
    expected = FgdScore(TYPICAL).score(context(plain, make_pod("new", cpu="4", gpus=gpus)), all_nodes(plain))
    got = FgdScore(TYPICAL).score(context(dra, dra_pod("new", "new")), all_nodes(dra))
    assert got.tolist() == expected.tolist()
    assert len(set(got.tolist())) > 1  # the nodes are told apart


@pytest.mark.parametrize("profile", ["fgd", "fgd-reserve"])
def test_profiles_place_a_dra_pod_where_fgd_places_the_plain_one(profile: str) -> None:
    plain, dra = plugin_state(), equivalent_dra_state()
    dra.dra.apply(CLAIMS, "ADDED", claim_manifest("new", exactly("gpus", GPU_CLASS, 1)))
    ctx = ProfileContext(typical_pods=TYPICAL)
    want = schedule_pod(
        plain, make_pod("new", cpu="4", gpus=1), build_profile(profile, ctx), np.random.default_rng(0)
    )
    got = schedule_pod(dra, dra_pod("new", "new"), build_profile(profile, ctx), np.random.default_rng(0))
    assert (got.node, got.message) == (want.node, "")
    # The pod's GPUs are the claim's: placement takes no GPU rows.
    assert got.gpu_indices == ()
    dra.place(dra_pod("new", "new"), got.node, got.gpu_indices)
    assert gpu_rows(dra, got.node)[1] == gpu_rows(equivalent_dra_state(), got.node)[1]


def test_the_live_cache_keeps_the_rows_up_to_date() -> None:
    """Events in any order: the slice before its node, a claim allocated by another
    scheduler, the node deleted."""
    cache = SchedulerCache("rl-scheduler")
    cache.state.dra_gpu_classes = frozenset({GPU_CLASS})
    cache.on_dra(CLASSES, "ADDED", class_manifest(GPU_CLASS, f'device.driver == "{DRIVER}"'))
    cache.on_dra(SLICES, "ADDED", gpu_slice("node-1", 2))
    assert cache.state.dra_gpus == {}
    cache.on_node("ADDED", node_manifest("node-1", cpu="32"))
    assert gpu_rows(cache.state, "node-1") == (2, [1000, 1000], MODEL)
    cache.on_dra(CLAIMS, "ADDED", allocated_claim("c", "node-1", 1))
    assert gpu_rows(cache.state, "node-1") == (2, [1000, 0], MODEL)
    cache.on_node("DELETED", node_manifest("node-1"))
    assert cache.state.dra_gpus == {}


async def no_writes(*_: Any) -> dict[str, Any]:
    raise AssertionError("Reserve and Unreserve (before PreBind) write nothing")


def test_reserve_and_unreserve_take_and_give_back_the_gpus() -> None:
    state = dra_state({"node-1": 2})
    state.dra.apply(CLAIMS, "ADDED", claim_manifest("new", exactly("gpus", GPU_CLASS, 1)))
    binder = DraBinder(state, no_writes)
    pod = dra_pod("new", "new")
    cycle = BindingCycle(pod, "node-1", state.node_index["node-1"])
    binder.reserve(cycle)
    assert gpu_rows(state, "node-1")[1] == [0, 1000]
    binder.unreserve(cycle)
    assert gpu_rows(state, "node-1")[1] == [1000, 1000]
