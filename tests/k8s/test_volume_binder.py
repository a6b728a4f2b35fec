"""VolumeBinding's Reserve and the checks PreBind waits on (kube-scheduler's
checkBindings), on the catalog the watches keep; and the catalog's assumptions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from scheduler.k8s.scheduling.volume_binder import VolumeBinder, VolumeBindError
from scheduler.k8s.scheduling.volume_events import VOLUME_KINDS, VolumeEvents
from scheduler.objects.volume_manifest import claim_from_manifest, volume_from_manifest
from scheduler.objects.volumes import ClaimRef
from scheduler.state.cluster_state import ClusterState
from tests.builders import make_node
from tests.volume_builders import (
    claim_manifest,
    claim_pod,
    storage_class_manifest,
    volume_manifest,
    volume_state,
)

LOCAL = storage_class_manifest("local", provisioner="kubernetes.io/no-provisioner")
FAST = storage_class_manifest("fast", provisioner="example.com/fast")
NODES = [make_node("n1"), make_node("n2")]


def binder(state: ClusterState, pod_exists: bool = True) -> VolumeBinder:
    return VolumeBinder(api=None, state=state, pod_exists=lambda _: pod_exists)  # type: ignore[arg-type]


def local_state() -> ClusterState:
    return volume_state(
        NODES,
        claims=[claim_manifest("data", storage_class="local"), claim_manifest("cache", storage_class="fast")],
        volumes=[volume_manifest("pv-1", storage_class="local", nodes=["n1"])],
        classes=[LOCAL, FAST],
    )


def test_reserve_assumes_the_volume_and_the_selected_node() -> None:
    state = local_state()
    reserved = binder(state).reserve(claim_pod("db", ["data", "cache"]), state.node_index["n1"])
    assert [(c.name, v.name, v.claim_ref) for c, v in reserved.static] == [
        ("data", "pv-1", ClaimRef("default", "data", "uid-data"))
    ]
    assert [c.selected_node for c in reserved.provisions] == ["n1"]
    # The next decision sees them: pv-1 is taken, the claim waits for n1.
    assert state.volumes.volume("pv-1").claim_ref is not None  # type: ignore[union-attr]
    assert state.volumes.claim("default", "cache").selected_node == "n1"  # type: ignore[union-attr]
    binder(state).unreserve(reserved)
    assert state.volumes.volume("pv-1").claim_ref is None  # type: ignore[union-attr]
    assert state.volumes.claim("default", "cache").selected_node is None  # type: ignore[union-attr]


def test_a_newer_version_from_the_api_replaces_an_assumption() -> None:
    state = local_state()
    binder(state).reserve(claim_pod("db", ["data"]), 0)
    newer = volume_manifest("pv-1", storage_class="local", nodes=["n1"])
    newer["metadata"]["resourceVersion"] = "7"
    state.volumes.put_volume(volume_from_manifest(newer))
    assert state.volumes.volume("pv-1").claim_ref is None  # type: ignore[union-attr]


def test_events_apply_and_a_listing_drops_what_is_gone() -> None:
    state = ClusterState()
    clock = iter(range(100))
    events = VolumeEvents(state.volumes, clock=lambda: float(next(clock)))
    claims = VOLUME_KINDS[0]
    events.apply(claims, "ADDED", claim_manifest("a"))
    events.apply(claims, "ADDED", claim_manifest("b"))
    events.apply(
        claims, "ADDED", {"metadata": {"name": "bad", "namespace": "default"}, "spec": {"accessModes": 3}}
    )
    assert sorted(state.volumes.claims) == ["default/a", "default/b"]
    events.resync(claims, {"default/a"}, listed_at=10.0)
    assert sorted(state.volumes.claims) == ["default/a"]
    events.apply(claims, "DELETED", claim_manifest("a"))
    assert not state.volumes.claims


def _bound_claim(name: str, volume: str, version: str = "5") -> dict[str, Any]:
    manifest = claim_manifest(name, storage_class="local", volume=volume, bound=True)
    manifest["metadata"]["resourceVersion"] = version
    return manifest


def _claimed_volume(
    name: str, claim: str, *, uid: str = "uid-data", version: str = "5", node: str = "n1"
) -> Any:
    manifest = volume_manifest(
        name, storage_class="local", nodes=[node], claim=("default", claim), phase="Bound"
    )
    manifest["spec"]["claimRef"]["uid"] = uid
    manifest["metadata"]["resourceVersion"] = version
    return volume_from_manifest(manifest)


def _provisioning(selected: str | None, version: str = "5", volume: str | None = None) -> Any:
    manifest = claim_manifest(
        "cache", storage_class="fast", selected_node=selected, volume=volume, bound=bool(volume)
    )
    manifest["metadata"]["resourceVersion"] = version
    return claim_from_manifest(manifest)


Setup = Callable[[ClusterState], None]
UNBOUND = claim_from_manifest(claim_manifest("data", storage_class="local"))


def _put_volume(volume: Any) -> Setup:
    return lambda state: state.volumes.put_volume(volume)


def _put_claim(claim: Any) -> Setup:
    return lambda state: state.volumes.put_claim(claim)


CHECKS = [
    pytest.param(
        {"pv-1": 5},
        [
            _put_volume(_claimed_volume("pv-1", "data")),
            _put_claim(claim_from_manifest(_bound_claim("data", "pv-1"))),
        ],
        True,
        id="static: the PV controller bound the claim",
    ),
    pytest.param(
        {"pv-1": 5},
        [_put_volume(_claimed_volume("pv-1", "data")), _put_claim(UNBOUND)],
        False,
        id="static: claimRef written, the claim not bound yet",
    ),
    pytest.param(
        {"pv-1": 9},
        [_put_volume(_claimed_volume("pv-1", "data"))],
        False,
        id="static: our write not in the watch yet (version 5 < 9)",
    ),
    pytest.param(
        {"pv-1": 5},
        [_put_volume(_claimed_volume("pv-1", "data", uid=""))],
        'ClaimRef got reset for pv "pv-1"',
        id="static: the claimRef was dropped",
    ),
    pytest.param(
        {"pv-1": 5},
        [_put_volume(_claimed_volume("pv-1", "data", node="n2"))],
        'pv "pv-1" node affinity doesn\'t match node "n1": no matching NodeSelectorTerms',
        id="static: the volume's node affinity no longer matches",
    ),
    pytest.param(
        {"default/cache": 5},
        [_put_claim(_provisioning("n1"))],
        False,
        id="provision: the provisioner has not made the volume yet",
    ),
    pytest.param(
        {"default/cache": 5},
        [_put_claim(_provisioning(None))],
        'provisioning failed for PVC "cache"',
        id="provision: the provisioner took the selected node back",
    ),
    pytest.param(
        {"default/cache": 5},
        [
            _put_claim(_provisioning("n1", volume="pv-9")),
            _put_volume(_claimed_volume("pv-9", "cache", node="n1")),
        ],
        True,
        id="provision: provisioned on the node and bound",
    ),
]


@pytest.mark.parametrize(("written", "setup", "expected"), CHECKS)
def test_prebind_checks(written: dict[str, int], setup: list[Setup], expected: bool | str) -> None:
    state = volume_state(NODES, classes=[LOCAL, FAST])
    for step in setup:
        step(state)
    check = binder(state)
    pod = claim_pod("db", ["data"])
    if isinstance(expected, bool):
        assert check._bound(pod, "n1", written) is expected
    else:
        with pytest.raises(VolumeBindError, match=expected.replace("(", r"\(").replace(")", r"\)")):
            check._bound(pod, "n1", written)


def test_prebind_stops_when_the_pod_is_gone() -> None:
    state = volume_state(NODES, classes=[LOCAL])
    with pytest.raises(VolumeBindError, match="pod does not exist any more"):
        binder(state, pod_exists=False)._bound(claim_pod("db", ["data"]), "n1", {})
