"""Every reader of what the API server returns (pods, nodes, volumes, PodGroups,
PodDisruptionBudgets, policy versions and channels), fuzzed: a manifest with fields
omitted or replaced by any value of their JSON type (quantities, dates, labels and
annotations of any length and exponent among them) is read or refused with our input
error, never another exception, and within a time and memory bound. The cluster tier checks the same
readers on what the API server itself accepts and stores
(``tests/e2e/test_fuzz_api_server.py``)."""

from __future__ import annotations

import base64
import hashlib
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.errors import SchedulerInputError
from scheduler.k8s.client.node_protobuf import MAGIC, ProtobufError, decode_node_list
from scheduler.k8s.scheduling.budgets import budget_from_manifest
from scheduler.k8s.scheduling.cache import hami_usage
from scheduler.objects.node_manifest import node_from_manifest
from scheduler.objects.pod_group import pod_group_from_manifest
from scheduler.objects.pod_manifest import pod_from_manifest
from scheduler.objects.volume_manifest import (
    claim_from_manifest,
    csi_node_from_manifest,
    storage_class_from_manifest,
    volume_from_manifest,
)
from scheduler.online.store_crd import decode_version, pointed_version
from scheduler.resources.hami import (
    DEVICES_ALLOCATED,
    VGPU_NODE,
    ProtocolError,
    decode_pod_devices,
    parse_lock,
    parse_register,
)
from tests.builders import node_manifest, pod_manifest
from tests.k8s.test_node_protobuf import field, listing, node
from tests.volume_builders import claim_manifest, csi_node_manifest, storage_class_manifest, volume_manifest

# What reading one object may cost at most, whatever it holds.
MAX_SECONDS = 1.0
MAX_BYTES = 64 * 2**20

# Quantities, dates and numbers of the shapes the API server stores, extremes included.
NUMBERISH = st.one_of(
    st.from_regex(
        r"[+-]?[0-9]{0,60}(\.[0-9]{0,40})?([eE][+-]?[0-9]{1,8}|Ki|Mi|Gi|Ei|m|k|M|G|E|n|u)?", fullmatch=True
    ),
    st.sampled_from(["1" * 5000, "100e1048575", "1e-1048577", "0x10", "NaN", "Infinity", "1e400"]),
    st.from_regex(
        r"[0-9]{1,6}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,12})?(Z|[+-][0-9]{2}:[0-9]{2})",
        fullmatch=True,
    ),
)
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
TEXT = st.one_of(st.text(max_size=40), NUMBERISH)


def same_type(value: Any) -> st.SearchStrategy[Any]:
    """What the API server could store where ``value`` is: its schema fixes the JSON
    type of each field (a string stays a string, of any content), and an empty or
    unset field is omitted."""
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return INT64
    if isinstance(value, float):
        return st.floats(allow_nan=False, allow_infinity=False)
    if isinstance(value, str):
        return TEXT
    if isinstance(value, dict):  # a map gains entries of its values' type (labels, requests)
        sample = next(iter(value.values()), "")
        entries = st.dictionaries(
            TEXT, same_type(sample) if isinstance(sample, str | int) else TEXT, max_size=3
        )
        return entries.map(lambda extra: {**value, **extra})
    return st.lists(st.sampled_from(value), max_size=4) if value else st.just(value)


OMIT = object()  # drop the field


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a manifest a value can be replaced (dict keys, list indices)."""
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, child in value.items():
            found += paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += paths(child, (*prefix, index))
    return found


def at(manifest: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        manifest = manifest[step]
    return manifest


def replaced(manifest: Any, path: tuple[Any, ...], value: Any) -> Any:
    """A copy of ``manifest`` with ``value`` at ``path`` (``OMIT``: without it)."""
    head, rest = path[0], path[1:]
    copy: Any = dict(manifest) if isinstance(manifest, dict) else list(manifest)
    if rest:
        copy[head] = replaced(copy[head], rest, value)
    elif value is OMIT:
        del copy[head]
    else:
        copy[head] = value
    return copy


def within_bounds(read: Callable[[], object], allowed: tuple[type[Exception], ...]) -> None:
    tracemalloc.start()
    started = time.process_time()
    try:
        read()
    except allowed:
        pass
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert time.process_time() - started < MAX_SECONDS
    assert peak < MAX_BYTES


def rich_pod() -> dict[str, Any]:
    manifest = pod_manifest(
        "fuzzed",
        cpu="500m",
        memory="1Gi",
        gpus=1,
        gpu_cores=50,
        gpu_memory=1024,
        node_selector={"zone": "a"},
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]}
                    ]
                }
            },
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 10,
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": {"a": "b"}},
                            "topologyKey": "zone",
                        },
                    }
                ]
            },
        },
        tolerations=[
            {"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule", "tolerationSeconds": 5}
        ],
        host_ports=[8080],
        topology_spread=[
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {}}
        ],
        priority=10,
        start_time="2024-01-01T00:00:00Z",
        deletion_timestamp="2024-01-02T00:00:00Z",
    )
    manifest["spec"]["initContainers"] = [
        {"name": "init", "image": "x", "resources": {"limits": {"ephemeral-storage": "1Gi"}}}
    ]
    manifest["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}]
    return manifest


def policy_version() -> dict[str, Any]:
    """A PolicyVersion of one file, its digest right (``scheduler.online.store_crd``)."""
    manifest = b'{"stage": "es"}'
    return {
        "metadata": {"namespace": "rl", "name": "rl-scheduler-v000001"},
        "spec": {
            "version": "v000001",
            "files": [
                {
                    "path": "manifest.json",
                    "sha256": hashlib.sha256(manifest).hexdigest(),
                    "data": base64.b64encode(manifest).decode(),
                }
            ],
        },
    }


def in_tree_volume() -> Any:
    """A PV of an in-tree source NodeVolumeLimits counts as its CSI driver's (csi_migration)."""
    manifest = volume_manifest("v", zones=["a"], labels={"topology.kubernetes.io/zone": "a"})
    del manifest["spec"]["hostPath"]
    manifest["spec"]["gcePersistentDisk"] = {"pdName": "disk-1", "fsType": "ext4"}
    return manifest


READERS: list[tuple[str, Callable[[Any], object], Callable[[], Any]]] = [
    ("pod", pod_from_manifest, rich_pod),
    (
        "node",
        node_from_manifest,
        lambda: node_manifest(
            "n", gpus=2, model="T4", labels={"a": "b"}, taints=[{"key": "k", "effect": "NoSchedule"}]
        ),
    ),
    (
        "claim",
        claim_from_manifest,
        lambda: claim_manifest("c", storage_class="fast", selector={"a": "b"}, bound=True, volume="v"),
    ),
    (
        "volume",
        volume_from_manifest,
        lambda: volume_manifest("v", nodes=["n"], claim=("default", "c"), csi=("d", "h")),
    ),
    ("in-tree volume", volume_from_manifest, in_tree_volume),
    ("storage class", storage_class_from_manifest, lambda: storage_class_manifest("s", zones=["a"])),
    ("CSI node", csi_node_from_manifest, lambda: csi_node_manifest("n", {"d": 3})),
    (
        "podgroup",
        pod_group_from_manifest,
        lambda: {
            "metadata": {"namespace": "t", "name": "g"},
            "spec": {"minMember": 3, "minResources": {"cpu": "2"}, "scheduleTimeoutSeconds": 60},
        },
    ),
    (
        "poddisruptionbudget",
        budget_from_manifest,
        lambda: {
            "metadata": {"namespace": "t", "name": "b"},
            "spec": {"selector": {"matchLabels": {"app": "a"}}},
            "status": {"disruptionsAllowed": 1, "disruptedPods": {"p": "2024-01-01T00:00:00Z"}},
        },
    ),
    ("policyversion", decode_version, policy_version),
    (
        "policychannel",
        pointed_version,
        lambda: {
            "metadata": {"namespace": "rl", "name": "rl-scheduler"},
            "spec": {"currentVersion": "v000001"},
        },
    ),
]


@pytest.mark.parametrize(("kind", "read", "base"), READERS, ids=[kind for kind, _, _ in READERS])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_field_of_any_value_is_read_or_refused_with_our_error(
    kind: str, read: Callable[[Any], object], base: Callable[[], Any], data: st.DataObject
) -> None:
    manifest = base()
    for _ in range(data.draw(st.integers(1, 3), label="changes")):
        if not paths(manifest):
            break
        where = data.draw(st.sampled_from(paths(manifest)), label="path")
        value = data.draw(st.just(OMIT) | same_type(at(manifest, where)), label="value")
        manifest = replaced(manifest, where, value)
    within_bounds(lambda: read(manifest), (SchedulerInputError,))


@settings(max_examples=300, deadline=None)
@given(
    text=st.one_of(
        st.text(max_size=300), st.from_regex(r"([A-Za-z0-9-]{0,12},){0,6}[0-9,:;.-]{0,60}", fullmatch=True)
    )
)
def test_hami_annotations_are_read_or_refused_with_the_protocol_error(text: str) -> None:
    for read in (parse_register, decode_pod_devices, parse_lock):
        within_bounds(lambda read=read: read(text), (ProtocolError,))
    pod = pod_manifest("p", node_name="n1", annotations={DEVICES_ALLOCATED: text, VGPU_NODE: "n1"})
    within_bounds(lambda: hami_usage(pod, "n1"), ())


NODE_LISTING = listing(
    node(
        "n1",
        labels={"kubernetes.io/hostname": "n1"},
        annotations={"hami.io/node-nvidia-register": "GPU-1,10,16384,100,NVIDIA-T4,0,true:"},
        allocatable={"cpu": "4", "nvidia.com/gpu": "1"},
        taints=[{"key": "k", "effect": "NoExecute", "seconds": 1767225600}],
        unschedulable=True,
    )
)


@settings(max_examples=300, deadline=None)
@given(
    body=st.binary(max_size=400),
    at=st.integers(0, len(NODE_LISTING) - 1),
    replacement=st.binary(max_size=4),
    cut=st.integers(0, len(NODE_LISTING)),
)
def test_protobuf_node_listings_are_read_or_refused_with_the_protobuf_error(
    body: bytes, at: int, replacement: bytes, cut: int
) -> None:
    """Any bytes; any bytes as the listing's NodeList; a real listing with bytes replaced
    at one place, and cut short."""
    in_unknown = MAGIC + field(1, field(1, "v1") + field(2, "NodeList")) + field(2, body)
    mutated = (NODE_LISTING[:at] + replacement + NODE_LISTING[at + len(replacement) :])[:cut]
    for candidate in (body, MAGIC + body, in_unknown, mutated):
        within_bounds(lambda candidate=candidate: decode_node_list(candidate), (ProtobufError,))
