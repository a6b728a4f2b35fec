"""One object that cannot be read costs that object: listings apply the rest, and the
cache hands what it cannot account for to its ``Skipped`` handler."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from scheduler.errors import QuantityError
from scheduler.k8s.client.unreadable import object_name, skipping
from scheduler.k8s.scheduling import gangs, volume_events
from scheduler.k8s.scheduling.cache import PodChange, SchedulerCache
from scheduler.k8s.scheduling.gangs import GangIndex, list_pod_groups
from scheduler.k8s.scheduling.volume_events import VOLUME_KINDS, VolumeEvents, list_volumes
from scheduler.volumes.catalog import VolumeCatalog
from tests.builders import node_manifest, pod_manifest
from tests.volume_builders import claim_manifest

HUGE = "1e1048577"


class Skips:
    """A ``Skipped`` handler that remembers what it was handed."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, type[Exception]]] = []

    def __call__(self, kind: str, manifest: Any, error: Exception) -> None:
        self.seen.append((kind, object_name(manifest), type(error)))


@pytest.mark.parametrize(
    ("manifest", "name"),
    [
        ({"metadata": {"name": "n1"}}, "n1"),
        ({"metadata": {"name": "p", "namespace": "team"}}, "team/p"),
        ({"metadata": None}, "(no metadata)"),
        ({}, "(no metadata)"),
        ("not an object", "(no metadata)"),
        (None, "(no metadata)"),
    ],
)
def test_object_name_never_raises(manifest: Any, name: str) -> None:
    assert object_name(manifest) == name


def test_skipping_hands_any_failure_to_the_handler_and_nothing_else() -> None:
    skips = Skips()
    with skipping("pod", {"metadata": {"name": "a", "namespace": "t"}}, skips):
        raise RecursionError("deep")
    with skipping("pod", {"metadata": {"name": "b", "namespace": "t"}}, skips):
        pass
    assert skips.seen == [("pod", "t/a", RecursionError)]


def listing(items_by_path: dict[str, list[dict[str, Any]]]) -> Any:
    async def list_with_version(path: str) -> tuple[list[dict[str, Any]], str]:
        return items_by_path.get(path, []), "7"

    return list_with_version


def test_a_volume_listing_applies_every_object_but_the_one_that_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    read = volume_events.claim_from_manifest

    def claim_from_manifest(manifest: Any) -> Any:
        if manifest["metadata"]["name"] == "bad":
            raise TypeError("a bug of ours")  # not an input error: it used to end the listing
        return read(manifest)

    monkeypatch.setattr(volume_events, "claim_from_manifest", claim_from_manifest)
    claims = VOLUME_KINDS[0]
    assert claims.plural == "persistentvolumeclaims"
    items = [claim_manifest("a"), claim_manifest("bad"), claim_manifest("c")]
    events, skips = VolumeEvents(VolumeCatalog()), Skips()
    versions = asyncio.run(list_volumes(listing({claims.path: items}), events, skips))
    assert versions[claims.plural] == "7"
    assert set(events.catalog.claims) == {"default/a", "default/c"}
    assert skips.seen == [(claims.kind, "default/bad", TypeError)]


def test_a_pod_group_listing_applies_every_group_but_the_one_that_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    read = gangs.pod_group_from_manifest

    def pod_group_from_manifest(manifest: Any) -> Any:
        if manifest["metadata"]["name"] == "bad":
            raise KeyError("minMember")
        return read(manifest)

    monkeypatch.setitem(gangs.READERS, gangs.GROUP, pod_group_from_manifest)
    items = [
        {"metadata": {"namespace": "team", "name": name}, "spec": {"minMember": 2}}
        for name in ("a", "bad", "c")
    ]
    index, skips = GangIndex(), Skips()
    asyncio.run(list_pod_groups(listing({gangs.paths.POD_GROUPS: items}), index, skips))
    assert set(index.groups) == {"team/a", "team/c"}
    assert skips.seen == [("podgroup", "team/bad", KeyError)]


def test_the_cache_hands_nodes_and_bound_pods_it_cannot_account_for_to_its_handler() -> None:
    skips = Skips()
    cache = SchedulerCache("rl-scheduler", unreadable=skips)
    added = cache.on_node("ADDED", node_manifest("good"))
    assert added is not None
    assert added.before is None
    assert cache.on_node("ADDED", node_manifest("bad", cpu=HUGE)) is None
    assert list(cache.state.node_index) == ["good"]
    bound = pod_manifest("bound", cpu="1")
    bound["spec"].update(nodeName="good", schedulerName="default-scheduler")
    bound["spec"]["containers"][0]["resources"]["requests"]["memory"] = HUGE
    assert cache.on_pod("ADDED", bound).change is PodChange.BOUND
    assert not cache.state.placements
    assert skips.seen == [("node", "bad", QuantityError), ("pod", "default/bound", QuantityError)]
