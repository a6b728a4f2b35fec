"""``SliceIndex`` gathers every node's pools as the scan over all slices it replaced:
the same pools, slices, incomplete and invalid ones, on random clusters of slices; and
the allocator, given the index (its per-node views and the selector results it keeps
across nodes and claims), allocates what it allocates from the plain list of slices."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from typing import Any

import pytest

from scheduler.dra.allocator import AllocationError, ClaimAllocation, allocate
from scheduler.dra.manifests import device_class_from_manifest
from scheduler.dra.objects import ResourceSlice
from scheduler.dra.pools import Pool, SliceIndex, _build, _slice_applies, gather_pools
from tests.dra.builders import (
    DRIVER_A,
    DRIVER_B,
    class_manifest,
    device,
    exactly,
    make_claim,
    make_slice,
)

NODES: dict[str, dict[str, str]] = {
    "node-1": {"zone": "a"},
    "node-2": {"zone": "b"},
    "node-3": {"zone": "a"},
    "node-4": {},
}


def reference_gather(
    slices: Iterable[ResourceSlice], node_name: str, labels: Mapping[str, str]
) -> list[Pool]:
    """The scan over every slice that ``SliceIndex`` replaced (commit 64f574a)."""
    every = sorted(slices, key=lambda s: (s.driver, s.pool, s.name))
    by_pool: dict[tuple[str, str], list[ResourceSlice]] = {}
    newest: dict[tuple[str, str], int] = {}
    for s in every:
        key = (s.driver, s.pool)
        newest[key] = max(newest.get(key, s.generation), s.generation)
        if not _slice_applies(node_name, labels, s):
            continue
        have = by_pool.get(key)
        if have is None or s.generation > have[0].generation:
            by_pool[key] = [s]
        elif s.generation == have[0].generation:
            have.append(s)
    pools = []
    for (driver, name), found in sorted(by_pool.items()):
        generation, expected = found[0].generation, found[0].resource_slice_count
        if len(found) != expected:
            if generation < newest[(driver, name)]:
                continue
            everywhere = [
                s for s in every if (s.driver, s.pool) == (driver, name) and s.generation == generation
            ]
            if len(everywhere) != expected:
                pools.append(Pool(driver, name, incomplete=True))
                continue
        pools.append(_build(driver, name, tuple(found)))
    return pools


def random_slice(rng: random.Random, k: int) -> ResourceSlice:
    devices = [
        device(f"gpu-{rng.randrange(4)}", model=rng.choice(["a100", "h100"]))
        for _ in range(rng.randint(1, 3))
    ]
    spec: dict[str, Any] = {}
    node: str | None = None
    where = rng.choice(["node", "node", "all", "selector", "per-device", "none"])
    if where == "node":
        node = rng.choice([*NODES, "node-9"])
    elif where == "all":
        spec["allNodes"] = True
    elif where == "selector":
        zone = rng.choice(["a", "b"])
        spec["nodeSelector"] = {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": [zone]}]}]
        }
    elif where == "per-device":
        spec["perDeviceNodeSelection"] = True
        for d in devices:
            d["nodeName"] = rng.choice(list(NODES))
    else:
        node = None
    return make_slice(
        f"slice-{k:02d}",
        devices,
        node=node,
        driver=rng.choice([DRIVER_A, DRIVER_B]),
        pool=rng.choice(["pool-1", "pool-2", "pool-3"]),
        generation=rng.randint(1, 3),
        count=rng.randint(1, 3),
        **spec,
    )


@pytest.mark.parametrize("seed", range(300))
def test_the_index_gathers_what_the_scan_over_every_slice_gathered(seed: int) -> None:
    rng = random.Random(seed)
    slices = [random_slice(rng, k) for k in range(rng.randint(0, 12))]
    rng.shuffle(slices)
    index = SliceIndex.of(slices)
    for node_name, labels in NODES.items():
        expected = reference_gather(slices, node_name, labels)
        assert index.gather(node_name, labels) == expected
        assert gather_pools(slices, node_name, labels) == expected


def test_the_random_clusters_reach_every_kind_of_pool() -> None:
    """The table above is worth something only if it meets complete, incomplete and
    invalid pools, and nodes that see nothing."""
    kinds: set[str] = set()
    for seed in range(300):
        rng = random.Random(seed)
        slices = [random_slice(rng, k) for k in range(rng.randint(0, 12))]
        for node_name, labels in NODES.items():
            pools = reference_gather(slices, node_name, labels)
            if not pools:
                kinds.add("none")
            for pool in pools:
                kinds.add(
                    "incomplete" if pool.incomplete else "invalid" if pool.invalid_reason else "complete"
                )
    assert kinds == {"none", "complete", "incomplete", "invalid"}


CLASSES = {
    "class-a": device_class_from_manifest(class_manifest("class-a", f'device.driver == "{DRIVER_A}"')),
    "any": device_class_from_manifest(class_manifest("any", "true")),
}
# Device names repeat across slices and pools: a selector's result must follow the
# device object, not its name.
CLAIM_SELECTORS = [
    'device.driver == "driver-b.example.com"',
    "true",
    'device.attributes[device.driver].model == "a100"',
    'device.attributes[device.driver].model == "h100"',
]


def allocated(
    claims: list[Any], slices: Any, node_name: str, labels: Mapping[str, str], in_use: set[Any]
) -> list[ClaimAllocation] | str | None:
    try:
        return allocate(claims, CLASSES, slices, node_name, labels, in_use)
    except AllocationError as error:
        return f"error: {error}"


@pytest.mark.parametrize("seed", range(150))
def test_allocating_through_the_index_allocates_what_the_slices_allocate(seed: int) -> None:
    rng = random.Random(seed)
    slices = [random_slice(rng, k) for k in range(rng.randint(1, 10))]
    index = SliceIndex.of(slices)  # one index for every node and claim below, as the Filter uses it
    for attempt in range(4):
        requests = [
            exactly(f"r{i}", rng.choice(list(CLASSES)), rng.randint(1, 2), *rng.sample(CLAIM_SELECTORS, 1))
            for i in range(rng.randint(1, 2))
        ]
        claims = [make_claim(f"claim-{attempt}", *requests)]
        in_use = {(s.driver, s.pool, d.name) for s in slices for d in s.devices if rng.random() < 0.2}
        for node_name, labels in NODES.items():
            expected = allocated(claims, slices, node_name, labels, in_use)
            assert allocated(claims, index, node_name, labels, in_use) == expected
