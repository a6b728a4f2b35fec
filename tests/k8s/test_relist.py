"""A relist beside the watches (``SchedulerRuntime.list_and_apply``): an item of the
listing is applied only when no watch event about that pod or node came after the
listing was asked for. The watches keep running while a resync lists the cluster, so
the listing's items can be older than what they showed: applied over them, a pod bound
meanwhile was queued and decided again ("pod ... is already placed", seen with 5,000
DRA pods at 1,000 nodes), and a pod or node deleted meanwhile came back."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from scheduler.k8s.client import paths
from scheduler.k8s.scheduling.runtime import SchedulerRuntime
from tests.builders import node_manifest, pod_manifest
from tests.k8s.test_runtime import RecordingApi, run, runtime_with


def bound(name: str, node: str) -> dict[str, Any]:
    manifest = pod_manifest(name, cpu="1")
    manifest["spec"]["nodeName"] = node
    return manifest


@dataclass
class ListingApi(RecordingApi):
    """Answers listings with ``listed`` (empty for any other path), and runs
    ``meanwhile`` (watch events) while the pods' listing is in flight."""

    listed: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    meanwhile: Callable[[], None] = lambda: None

    async def list_with_version(self, path: str) -> tuple[list[dict[str, Any]], str]:
        if path == paths.PODS:
            self.meanwhile()
        await asyncio.sleep(0)
        return self.listed.get(path, []), "7"


def watch_events(runtime: SchedulerRuntime, *events: tuple[str, str, dict[str, Any]]) -> Callable[[], None]:
    def apply() -> None:
        for kind, event_type, manifest in events:
            handler = runtime.on_pod_event if kind == "pod" else runtime.on_node_event
            handler(event_type, manifest)

    return apply


N1, N2 = node_manifest("n1", cpu="4"), node_manifest("n2", cpu="4")
PENDING, BOUND = pod_manifest("p", cpu="1"), bound("p", "n1")

# (case, listed nodes, listed pods, watch events while listing, expected: p queued,
# where p is placed, the nodes after)
CASES = [
    ("pending, nothing since: queued", [N1, N2], [PENDING], [], True, None, ["n1", "n2"]),
    (
        "bound since: placed, not queued",
        [N1, N2],
        [PENDING],
        [("pod", "MODIFIED", BOUND)],
        False,
        "n1",
        ["n1", "n2"],
    ),
    ("deleted since: gone", [N1, N2], [PENDING], [("pod", "DELETED", PENDING)], False, None, ["n1", "n2"]),
    (
        "bound, deleted since: its room free",
        [N1, N2],
        [BOUND],
        [("pod", "DELETED", BOUND)],
        False,
        None,
        ["n1", "n2"],
    ),
    ("bound, no event since: placed", [N1, N2], [BOUND], [], False, "n1", ["n1", "n2"]),
    ("a node deleted since: gone", [N1, N2], [], [("node", "DELETED", N2)], False, None, ["n1"]),
]


@pytest.mark.parametrize(
    ("nodes", "pods", "events", "queued", "placed_on", "nodes_after"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_a_relist_does_not_undo_what_the_watch_showed_since(
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    events: list[tuple[str, str, dict[str, Any]]],
    queued: bool,
    placed_on: str | None,
    nodes_after: list[str],
) -> None:
    async def body() -> None:
        api = ListingApi(listed={paths.NODES: nodes, paths.PODS: pods})
        runtime = runtime_with(api, N1, N2)  # n1 and n2 from the first listing
        if any(p is PENDING for p in pods):
            runtime.on_pod_event("ADDED", PENDING)  # pending before the relist
        api.meanwhile = watch_events(runtime, *events)
        await runtime.list_and_apply()
        assert ("default/p" in runtime.queue) is queued
        placement = runtime.cache.state.placements.get("default/p")
        assert (placement.node if placement else None) == placed_on
        assert runtime.cache.state.node_names == nodes_after

    run(body)


def test_a_deletion_seen_before_a_listing_does_not_hide_the_object_from_later_ones() -> None:
    async def body() -> None:
        api = ListingApi(listed={paths.NODES: [N1, N2], paths.PODS: [PENDING]})
        runtime = runtime_with(api, N1, N2)
        runtime.on_pod_event("DELETED", PENDING)  # then created again, under the same name
        await runtime.list_and_apply()
        assert "default/p" in runtime.queue

    run(body)


def test_a_deletion_is_kept_for_a_listing_asked_for_before_it_while_another_ends() -> None:
    async def body() -> None:
        api = ListingApi(listed={paths.NODES: [N1, N2], paths.PODS: [PENDING]})
        runtime = runtime_with(api, N1, N2)
        runtime.on_pod_event("ADDED", PENDING)
        slow_listing_asked = asyncio.Event()
        release_slow_listing = asyncio.Event()

        async def slow(path: str) -> tuple[list[dict[str, Any]], str]:
            items = list(api.listed.get(path, []))  # the listing as it was asked for
            if path == paths.PODS:
                slow_listing_asked.set()
                await release_slow_listing.wait()
            return items, "7"

        answer_at_once = api.list_with_version
        api.list_with_version = slow  # type: ignore[method-assign]
        first = asyncio.ensure_future(runtime.list_and_apply())  # a resync, its pods' listing held
        await slow_listing_asked.wait()
        runtime.on_pod_event("DELETED", PENDING)  # deleted while the first listing is in flight
        api.list_with_version = answer_at_once  # type: ignore[method-assign]
        api.listed[paths.PODS] = []
        await runtime.list_and_apply()  # a second listing, asked for and ended meanwhile
        release_slow_listing.set()
        await first  # its item of p is older than the deletion
        assert "default/p" not in runtime.queue
        assert "default/p" not in runtime.cache.seen_pods

    run(body)
