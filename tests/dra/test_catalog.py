"""The live scheduler's DRA catalog (scheduler/dra/catalog.py) fed by listings and watch
events (scheduler/k8s/scheduling/dra_events.py), and a pod's claims by name
(pod_manifest: kube's ``resourceclaim.Name``)."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from scheduler.dra.catalog import CLAIMS, CLASSES, SLICES, ClaimLookupError, DraCatalog
from scheduler.dra.objects import DraObjectError
from scheduler.errors import PodSpecError
from scheduler.k8s.scheduling.dra_events import list_dra
from scheduler.objects.pod_manifest import pod_from_manifest
from tests.builders import pod_manifest
from tests.dra.builders import claim_manifest, class_manifest, device, exactly, slice_manifest


def allocated_claim(name: str, version: str, *devices: str) -> dict[str, Any]:
    results = [
        {"request": "req-0", "driver": "driver-a.example.com", "pool": "pool-1", "device": d} for d in devices
    ]
    manifest = claim_manifest(
        name, exactly("req-0"), status={"allocation": {"devices": {"results": results}}}
    )
    manifest["metadata"]["resourceVersion"] = version
    return manifest


def pending_claim(name: str, version: str) -> dict[str, Any]:
    manifest = claim_manifest(name, exactly("req-0"))
    manifest["metadata"]["resourceVersion"] = version
    return manifest


def test_devices_of_allocated_and_in_flight_claims_are_in_use() -> None:
    catalog = DraCatalog()
    catalog.apply(CLAIMS, "ADDED", allocated_claim("a", "5", "gpu-0"))
    catalog.apply(CLAIMS, "ADDED", pending_claim("b", "6"))
    assert catalog.in_use() == {("driver-a.example.com", "pool-1", "gpu-0")}
    flying = DraCatalog()
    flying.apply(CLAIMS, "ADDED", allocated_claim("b", "7", "gpu-1"))
    catalog.assume(flying.claims["default/b"].claim)
    assert catalog.in_use() == {("driver-a.example.com", "pool-1", d) for d in ("gpu-0", "gpu-1")}
    assert catalog.claim("default/b") is flying.claims["default/b"].claim
    catalog.forget("default/b")
    assert catalog.in_use() == {("driver-a.example.com", "pool-1", "gpu-0")}
    catalog.apply(CLAIMS, "DELETED", allocated_claim("a", "8", "gpu-0"))
    assert catalog.in_use() == set()


# (case, events after a class and a slice were added, what apply answers to the last,
# whether the catalog still holds the first slice object, whether slices_generation moved)
SLICE_S = slice_manifest("s", [device("gpu-0")])
REAPPLY_CASES = [
    ("the slice again, equal", [(SLICES, "MODIFIED", SLICE_S)], False, True, False),
    ("the class again, equal", [(CLASSES, "MODIFIED", class_manifest("gpu"))], False, True, False),
    (
        "the slice with another device",
        [(SLICES, "MODIFIED", slice_manifest("s", [device("gpu-1")]))],
        True,
        False,
        True,
    ),
    ("the slice deleted", [(SLICES, "DELETED", SLICE_S)], True, False, True),
    ("another slice added", [(SLICES, "ADDED", slice_manifest("t", [device("gpu-0")]))], True, True, True),
]


@pytest.mark.parametrize(
    ("events", "changed", "kept", "moved"), [c[1:] for c in REAPPLY_CASES], ids=[c[0] for c in REAPPLY_CASES]
)
def test_a_class_or_slice_applied_again_unchanged_changes_nothing(
    events: list[tuple[str, str, dict[str, Any]]], changed: bool, kept: bool, moved: bool
) -> None:
    catalog = DraCatalog()
    catalog.apply(CLASSES, "ADDED", class_manifest("gpu"))
    catalog.apply(SLICES, "ADDED", SLICE_S)
    first, generation = catalog.slices["s"], catalog.slices_generation
    answers = [catalog.apply(plural, event, manifest) for plural, event, manifest in events]
    assert answers[-1] is changed
    assert (catalog.slices.get("s") is first) is kept
    assert (catalog.slices_generation != generation) is moved


def devices_held(catalog: DraCatalog) -> set[tuple[str, str, str]]:
    """``in_use`` from scratch: every claim's allocation, the in-flight one first."""
    merged = {key: stored.claim for key, stored in catalog.claims.items()} | catalog.in_flight
    return {
        (r.driver, r.pool, r.device)
        for claim in merged.values()
        if claim.allocation is not None
        for r in claim.allocation.results
        if not r.admin_access
    }


@pytest.mark.parametrize("seed", range(40))
def test_devices_in_use_are_kept_as_claims_come_and_go(seed: int) -> None:
    """``in_use`` is kept claim by claim; after every event, assumption, write and
    resync it is what the claims hold, computed from scratch."""
    rng = random.Random(seed)
    catalog = DraCatalog()
    for version in range(1, 61):
        name = f"c{rng.randrange(6)}"
        devices = rng.sample([f"gpu-{i}" for i in range(4)], rng.randint(1, 2))
        step = rng.choice(["add", "add", "pending", "delete", "assume", "forget", "written", "resync"])
        if step == "add":
            catalog.apply(CLAIMS, "MODIFIED", allocated_claim(name, str(version), *devices))
        elif step == "pending":
            catalog.apply(CLAIMS, "MODIFIED", pending_claim(name, str(version)))
        elif step == "delete":
            catalog.apply(CLAIMS, "DELETED", pending_claim(name, str(version)))
        elif step == "assume":
            flying = DraCatalog()
            flying.apply(CLAIMS, "ADDED", allocated_claim(name, str(version), *devices))
            catalog.assume(flying.claims[f"default/{name}"].claim)
        elif step == "forget":
            catalog.forget(f"default/{name}")
        elif step == "written":
            catalog.written(allocated_claim(name, str(version), *devices))
        else:
            catalog.resync(CLAIMS, {f"default/c{i}" for i in range(6) if rng.random() < 0.7})
        assert catalog.in_use() == devices_held(catalog), step


@pytest.mark.parametrize(
    ("event_version", "allocated_after"),
    [
        pytest.param("9", True, id="an older event than the written claim is ignored"),
        pytest.param("10", False, id="an event of the same version replaces it"),
        pytest.param("11", False, id="a newer one replaces it (deallocated)"),
    ],
)
def test_a_written_claim_is_not_undone_by_an_older_event(event_version: str, allocated_after: bool) -> None:
    catalog = DraCatalog()
    catalog.apply(CLAIMS, "ADDED", pending_claim("c", "9"))
    catalog.assume(catalog.claims["default/c"].claim)
    catalog.written(allocated_claim("c", "10", "gpu-0"))
    assert "default/c" not in catalog.in_flight
    catalog.apply(CLAIMS, "MODIFIED", pending_claim("c", event_version))
    claim = catalog.claim("default/c")
    assert claim is not None
    assert (claim.allocation is not None) is allocated_after


def test_an_unreadable_object_drops_its_previous_version_and_raises() -> None:
    catalog = DraCatalog()
    catalog.apply(CLASSES, "ADDED", class_manifest("gpu", 'device.driver == "x"'))
    bad = class_manifest("gpu")
    bad["spec"]["selectors"] = [{"cel": {"expression": ""}}]
    with pytest.raises(DraObjectError):
        catalog.apply(CLASSES, "MODIFIED", bad)
    assert catalog.classes == {}


@pytest.mark.parametrize(
    ("names", "message"),
    [
        pytest.param(["c"], "", id="a known claim"),
        pytest.param(
            [None], 'pod "default/p": ResourceClaim not created yet', id="a template's, not created"
        ),
        pytest.param(["nope"], 'resourceclaim.resource.k8s.io "nope" not found', id="an unknown claim"),
    ],
)
def test_pod_claims_in_kubes_words(names: list[str | None], message: str) -> None:
    catalog = DraCatalog()
    catalog.apply(CLAIMS, "ADDED", pending_claim("c", "1"))
    if not message:
        assert [c.name for c in catalog.pod_claims("default", "p", names)] == ["c"]
        return
    with pytest.raises(ClaimLookupError) as raised:
        catalog.pod_claims("default", "p", names)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("claims", "statuses", "expected"),
    [
        pytest.param([{"name": "gpu", "resourceClaimName": "c"}], None, ("c",), id="by name"),
        pytest.param(
            [{"name": "gpu", "resourceClaimTemplateName": "t"}], None, (None,), id="template, not created"
        ),
        pytest.param(
            [{"name": "gpu", "resourceClaimTemplateName": "t"}],
            [{"name": "gpu", "resourceClaimName": "p-gpu-x1"}],
            ("p-gpu-x1",),
            id="template, created",
        ),
        pytest.param(
            [{"name": "gpu", "resourceClaimTemplateName": "t"}],
            [{"name": "gpu"}],
            (),
            id="template, no claim needed",
        ),
    ],
)
def test_a_pods_claims_by_name(
    claims: list[dict[str, Any]], statuses: list[dict[str, Any]] | None, expected: tuple[str | None, ...]
) -> None:
    manifest = pod_manifest("p")
    manifest["spec"]["resourceClaims"] = claims
    if statuses is not None:
        manifest.setdefault("status", {})["resourceClaimStatuses"] = statuses
    pod = pod_from_manifest(manifest)
    assert pod.resource_claims == expected
    assert pod.unsupported == ()


def test_a_pod_claim_naming_nothing_is_refused_by_its_reader() -> None:
    manifest = pod_manifest("p")
    manifest["spec"]["resourceClaims"] = [{"name": "gpu"}]
    with pytest.raises(PodSpecError, match="none of the supported fields are set"):
        pod_from_manifest(manifest)


def test_a_listing_applies_each_object_on_its_own_and_an_unserved_group_is_empty() -> None:
    bad_slice = slice_manifest("bad", [device("gpu-0")])
    bad_slice["spec"]["pool"]["resourceSliceCount"] = "many"
    listings = {
        "/apis/resource.k8s.io/v1/deviceclasses": [class_manifest("gpu", "true")],
        "/apis/resource.k8s.io/v1/resourceslices": [slice_manifest("s1", [device("gpu-0")]), bad_slice],
    }

    async def list_with_version(path: str) -> tuple[list[dict[str, Any]], str]:
        if path not in listings:
            raise ApiException(status=404, reason="Not Found")
        return listings[path], "42"

    catalog = DraCatalog()
    catalog.apply(CLAIMS, "ADDED", pending_claim("stale", "1"))
    skipped: list[str] = []
    versions = asyncio.run(list_dra(list_with_version, catalog, lambda kind, _m, _e: skipped.append(kind)))
    assert versions == {CLASSES: "42", SLICES: "42", CLAIMS: ""}
    assert (set(catalog.classes), set(catalog.slices), set(catalog.claims)) == ({"gpu"}, {"s1"}, set())
    assert skipped == ["resourceslice"]
