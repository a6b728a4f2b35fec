"""The allocator's kept verdicts (``scheduler.dra.verdicts``) decide what the allocator
decides each time: on random walks over a catalog (claims allocated, written, given
back and deleted; node labels, slices and classes changed), every node's Filter
decision with the catalog's verdicts equals the one without them, step by step."""

from __future__ import annotations

import random
from typing import Any

import pytest

from scheduler.dra.catalog import CLAIMS, CLASSES, SLICES, DraCatalog
from scheduler.dra.node_filter import NodeDecision, filter_node
from scheduler.dra.objects import ResourceClaim
from scheduler.k8s.scheduling.dra_binder import allocated, allocation_json
from tests.dra.builders import (
    DRIVER_A,
    DRIVER_B,
    claim_manifest,
    class_manifest,
    device,
    exactly,
    first_available,
)

NODES = ("node-1", "node-2", "node-3")
SPECS: tuple[tuple[dict[str, Any], ...], ...] = (
    (exactly("one", "gpu"),),
    (exactly("two", "gpu", 2),),
    (exactly("big", "gpu", 1, 'device.attributes["driver-a.example.com"].model == "a100"'),),
    (first_available("pick", exactly("two", "gpu", 2), exactly("one", "gpu", 1)),),
    (exactly("all", "any", mode="All"),),
    (exactly("one", "gpu"), exactly("nic", "nics")),
    (exactly("nics", "nics", 2),),
    (exactly("one", "missing-class"),),
)


def node_slices(node: str, generation: int, extra: int) -> dict[str, Any]:
    models = ("a100", "t4", "t4", "a100")[: 2 + extra]
    devices = [device(f"gpu-{i}", model=m) for i, m in enumerate(models)]
    return {
        "metadata": {"name": f"{node}-gpus"},
        "spec": {
            "driver": DRIVER_A,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
            "nodeName": node,
            "devices": devices,
        },
    }


def nic_slice(zone: str) -> dict[str, Any]:
    """A pool of NICs for the nodes of a zone (a node selector): two in zone a, one in b."""
    selector = {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": [zone]}]}]
    }
    return {
        "metadata": {"name": f"nics-{zone}"},
        "spec": {
            "driver": DRIVER_B,
            "pool": {"name": f"nics-{zone}", "generation": 1, "resourceSliceCount": 1},
            "nodeSelector": selector,
            "devices": [device(f"nic-{i}") for i in range(2 if zone == "a" else 1)],
        },
    }


class Walk:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.catalog = DraCatalog()
        self.labels = {node: {"zone": self.rng.choice("ab")} for node in NODES}
        self.generations = dict.fromkeys(NODES, 1)
        self.catalog.apply(CLASSES, "ADDED", class_manifest("gpu", f'device.driver == "{DRIVER_A}"'))
        self.catalog.apply(CLASSES, "ADDED", class_manifest("any"))
        self.catalog.apply(CLASSES, "ADDED", class_manifest("nics", f'device.driver == "{DRIVER_B}"'))
        for node in NODES:
            self.catalog.apply(SLICES, "ADDED", node_slices(node, 1, 0))
        for zone in "ab":
            self.catalog.apply(SLICES, "ADDED", nic_slice(zone))
        self.count = 0
        self.taken: list[str] = []  # claims holding devices (in flight or written)

    def decide(self, claims: list[ResourceClaim]) -> dict[str, NodeDecision]:
        catalog = self.catalog
        pending = [c for c in claims if c.allocation is None]
        verdicts = catalog.verdicts().for_claims(pending)
        out = {}
        for node in NODES:
            args = (claims, catalog.classes, catalog.slice_index(), node, self.labels[node], catalog.in_use())
            fresh = filter_node(*args)
            kept = filter_node(*args, verdicts=verdicts)
            assert kept == fresh, (node, claims)
            out[node] = fresh
        return out

    def step(self) -> None:
        move = self.rng.random()
        if move < 0.5:
            self.new_claim()
        elif move < 0.7 and self.taken:
            self.give_back(self.taken.pop(self.rng.randrange(len(self.taken))))
        elif move < 0.8:
            node = self.rng.choice(NODES)
            self.labels[node] = {"zone": self.rng.choice("ab")}
        elif move < 0.9:
            node = self.rng.choice(NODES)
            self.generations[node] += 1
            manifest = node_slices(node, self.generations[node], self.rng.randrange(3))
            self.catalog.apply(SLICES, "MODIFIED", manifest)
        else:
            model = self.rng.choice(("a100", "t4"))
            selector = f'device.driver == "{DRIVER_A}" && device.attributes["{DRIVER_A}"].model != "{model}"'
            self.catalog.apply(CLASSES, "MODIFIED", class_manifest("gpu", selector))

    def new_claim(self) -> None:
        self.count += 1
        name = f"claim-{self.count}"
        spec = self.rng.choice(SPECS)
        self.catalog.apply(CLAIMS, "ADDED", claim_manifest(name, *spec))
        claim = self.catalog.claim(f"default/{name}")
        assert claim is not None
        decisions = self.decide([claim])
        feasible = [node for node, d in decisions.items() if d.status.ok]
        if not feasible:
            return
        allocation = decisions[self.rng.choice(feasible)].allocations[0]
        self.catalog.assume(allocated(claim, allocation))
        self.decide([claim])  # a claim allocated already only checks its node selector
        if self.rng.random() < 0.5:  # written: the stored claim holds it
            manifest = claim_manifest(name, *spec, status={"allocation": allocation_json(allocation)})
            manifest["metadata"]["resourceVersion"] = str(self.count)
            self.catalog.apply(CLAIMS, "MODIFIED", manifest)
            self.catalog.forget(claim.key)
        self.taken.append(claim.key)

    def give_back(self, key: str) -> None:
        if key in self.catalog.in_flight:
            self.catalog.forget(key)
        self.catalog.apply(
            CLAIMS, "DELETED", {"metadata": {"name": key.split("/")[1], "namespace": "default"}}
        )


@pytest.mark.parametrize("seed", range(30))
def test_kept_verdicts_decide_what_the_allocator_decides(seed: int) -> None:
    walk = Walk(seed)
    for _ in range(80):
        walk.step()
    assert walk.count > 10


def test_a_verdict_is_kept_until_the_nodes_devices_change() -> None:
    """The allocator runs once per node while nothing changes, and again on the node
    whose pool lost a device."""
    walk = Walk(0)
    claim = ResourceClaim("default", "x")
    searches: list[str] = []
    verdicts = walk.catalog.verdicts()

    def ask(node: str) -> None:
        def search() -> None:
            searches.append(node)

        shape = verdicts.for_claims([claim])
        assert shape is not None
        view = walk.catalog.slice_index().node_view(node, walk.labels[node])
        shape.allocate(node, view, search)

    for node in NODES * 2:
        ask(node)
    assert searches == list(NODES)
    walk.catalog.apply(CLAIMS, "ADDED", claim_manifest("held", exactly("one", "gpu")))
    held = walk.catalog.claim("default/held")
    assert held is not None
    decision = walk.decide([held])["node-2"]
    walk.catalog.assume(allocated(held, decision.allocations[0]))
    for node in NODES:
        ask(node)
    assert searches == [*NODES, "node-2"]
    assert walk.catalog.verdicts() is verdicts
    walk.catalog.apply(CLASSES, "MODIFIED", class_manifest("gpu", "false"))
    assert walk.catalog.verdicts() is not verdicts


@pytest.mark.parametrize(("before", "after"), [("a", "b"), ("b", "a")])
def test_a_node_whose_labels_change_is_decided_over_the_pools_it_sees_now(before: str, after: str) -> None:
    """Two NICs in zone a, one in zone b: a claim for two fits only in zone a, and the
    verdict kept for the node's old zone is not used in its new one."""
    walk = Walk(0)
    walk.catalog.apply(CLAIMS, "ADDED", claim_manifest("pair", exactly("nics", "nics", 2)))
    pair = walk.catalog.claim("default/pair")
    assert pair is not None
    walk.labels["node-1"] = {"zone": before}
    assert walk.decide([pair])["node-1"].status.ok is (before == "a")
    walk.labels["node-1"] = {"zone": after}
    assert walk.decide([pair])["node-1"].status.ok is (after == "a")


def test_claims_whose_specs_cannot_be_kept_are_decided_each_time() -> None:
    """A claim with opaque configuration (a mapping: its spec does not hash) gets no
    kept verdicts, and the Filter decides it as the allocator does."""
    walk = Walk(0)
    manifest = claim_manifest("configured", exactly("one", "gpu"))
    opaque = {"driver": DRIVER_A, "parameters": {"sharing": {"strategy": "TimeSlicing"}}}
    manifest["spec"]["devices"]["config"] = [{"opaque": opaque}]
    walk.catalog.apply(CLAIMS, "ADDED", manifest)
    configured = walk.catalog.claim("default/configured")
    assert configured is not None
    assert walk.catalog.verdicts().for_claims([configured]) is None
    decisions = walk.decide([configured])
    assert all(d.status.ok for d in decisions.values())
    assert decisions["node-1"].allocations[0].config[0]["opaque"] == opaque
