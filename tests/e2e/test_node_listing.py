"""The nodes listing as protobuf, against the real API server: every node reads as its
JSON does, in the fields the scheduler uses (and the same ``Node`` comes of it), and
the cache sees no change when the same node then arrives as JSON from a watch, so
that a listed node's heartbeats are skipped as before. The listing (the early one and
the runtime's, one client) asks for protobuf, and gets it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from scheduler.k8s.client import paths, reads
from scheduler.k8s.client.blocking import BlockingClient
from scheduler.k8s.client.credentials import load_client_config
from scheduler.k8s.client.node_protobuf import CONTENT_TYPE
from scheduler.k8s.process.settings import ClientSettings
from scheduler.k8s.scheduling.cache import SchedulerCache
from scheduler.objects.node_manifest import node_from_manifest

pytestmark = pytest.mark.cluster
REGISTER = "hami.io/node-nvidia-register"
NODES = {
    "listing-plain": ({"team": "a"}, {}, [], False, {"cpu": "8", "memory": "32Gi", "pods": "110"}),
    "listing-tainted": (
        {"team": "b", "long": "x" * 63},
        {REGISTER: "GPU-0,10,16384,100,NVIDIA-T4,0,true:", "note": "y" * 300},
        [
            {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
            {"key": "maintenance", "effect": "NoExecute", "timeAdded": "2026-01-01T00:00:00Z"},
        ],
        True,
        {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "10", "pods": "110"},
    ),
}


@pytest.fixture(scope="module")
def core(dev_cluster: Any) -> Iterator[client.CoreV1Api]:
    api: client.CoreV1Api = dev_cluster.core_v1()
    for name, (labels, notes, taints, unschedulable, allocatable) in NODES.items():
        api.create_node(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": labels, "annotations": notes},
                "spec": {"taints": taints, "unschedulable": unschedulable},
            }
        )
        api.patch_node_status(name, {"status": {"allocatable": allocatable, "capacity": allocatable}})
    yield api
    for name in NODES:
        api.delete_node(name)


def scheduler_view(manifest: dict[str, Any]) -> dict[str, Any]:
    """What ``scheduler.k8s.client.node_protobuf`` reads of a node, out of its JSON."""
    metadata, spec, status = manifest["metadata"], manifest.get("spec") or {}, manifest.get("status") or {}
    keys = ("name", "uid", "resourceVersion", "labels", "annotations")
    return {
        "metadata": {k: metadata[k] for k in keys if k in metadata},
        "spec": {k: spec[k] for k in ("unschedulable", "taints") if k in spec},
        "status": {k: status[k] for k in ("allocatable",) if k in status},
    }


def test_protobuf_nodes_read_as_their_json(dev_cluster: Any, core: client.CoreV1Api) -> None:
    settings = ClientSettings(kubeconfig=dev_cluster.kubeconfig)
    api_client = BlockingClient(load_client_config(settings))

    def early() -> reads.Listing:
        answer = api_client.request("GET", paths.NODES, accept=reads.listing_accept(paths.NODES))
        content_type = answer.headers["content-type"]
        assert content_type.startswith(CONTENT_TYPE)
        return reads.decode_listing(content_type, answer.body)

    def version(item: dict[str, Any]) -> tuple[str, str]:
        return item["metadata"]["name"], item["metadata"]["resourceVersion"]

    # The node lifecycle controller taints our bare nodes meanwhile, and KWOK's nodes
    # beat: list until our nodes are of one version in all three listings.
    for _attempt in range(20):
        official, early_listing = reads.get_listing(api_client, paths.NODES, (5, 30)), early()
        as_json = reads.get_json(api_client, paths.NODES, (5, 30))["items"]
        seen = [
            {version(item) for item in items if item["metadata"]["name"] in NODES}
            for items in (official[0], early_listing[0], as_json)
        ]
        if seen[0] == seen[1] == seen[2] and len(seen[0]) == len(NODES):
            break
        time.sleep(0.5)
    else:
        raise AssertionError("the nodes kept changing")

    for items, _version in (official, early_listing):
        by_version = {version(item): item for item in items}
        compared = 0
        for manifest in as_json:
            listed = by_version.get(version(manifest))
            if listed is not None:  # KWOK's nodes change between the listings: those that did not
                assert listed == scheduler_view(manifest), version(manifest)
                assert node_from_manifest(listed) == node_from_manifest(manifest), version(manifest)
                compared += 1
        assert compared >= len(NODES)

    # The cache takes a listed node, and then the same version of it as JSON (as a watch
    # would bring it) as no change. The node lifecycle controller taints our bare nodes
    # meanwhile: read until the two are of one version.
    for name in NODES:
        for _attempt in range(20):
            listed = {
                item["metadata"]["name"]: item
                for item in reads.get_listing(api_client, paths.NODES, (5, 30))[0]
            }
            watched = reads.get_json(api_client, f"{paths.NODES}/{name}", (5, 30))
            if watched["metadata"]["resourceVersion"] == listed[name]["metadata"]["resourceVersion"]:
                break
            time.sleep(0.5)
        else:
            raise AssertionError(f"{name} kept changing")
        cache = SchedulerCache({"rl-scheduler"})
        assert cache.on_node("ADDED", listed[name]) is not None
        assert cache.on_node("MODIFIED", watched) is None, name
