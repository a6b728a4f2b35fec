"""Fake KWOK nodes: what they look like, where their sizes come from, creating them.

Sizes come from the openb node list (CPU milli, memory MiB, GPU count and model, so
GPU clusters are realistic) or from a mix of named node types. GPU nodes carry them as
HAMi's device plugin would (``devcluster.hami``): the register annotation, and
``nvidia.com/gpu`` as GPUs x split count. Every node gets a
unique hostname label, a zone and a rack (round-robin, so topology spreading has
something to spread over) and KWOK's annotation so the kwok controller marks it
Ready and runs its pods.
"""

from __future__ import annotations

import csv
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from devcluster import hami, names
from devcluster.binaries import open_csv
from devcluster.errors import (
    BadNodeCountError,
    BadNodeListError,
    ClusterNotRunningError,
    InvalidArgumentError,
    NodeListNotFoundError,
)
from devcluster.kube import body
from scheduler.resources.gpu import GPU_PRODUCT_LABEL

MAX_NODES = 10_000
DEFAULT_PODS_PER_NODE = 110
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    @classmethod
    def parse(cls, text: str) -> Taint:
        """kubectl's syntax: key[=value]:Effect."""
        spec, sep, effect = text.rpartition(":")
        key, _, value = spec.partition("=")
        if not sep or not key or effect not in _TAINT_EFFECTS:
            raise InvalidArgumentError(
                f"taint {text!r}: write key[=value]:Effect with Effect one of {_TAINT_EFFECTS}"
            )
        return cls(key, value, effect)


KWOK_TAINT = Taint(names.KWOK_TAINT_KEY, names.KWOK_NODE_VALUE, "NoSchedule")


@dataclass(frozen=True)
class NodeType:
    """The size of a node; gpu_model is None for a CPU-only node."""

    cpu_milli: int
    memory_mib: int
    gpu_count: int = 0
    gpu_model: str | None = None


# Named types for --mix: sizes seen in the openb node list.
NODE_TYPES: dict[str, NodeType] = {
    "cpu-small": NodeType(32_000, 131_072),
    "cpu-large": NodeType(96_000, 786_432),
    "gpu-t4": NodeType(96_000, 393_216, 4, "T4"),
    "gpu-v100": NodeType(96_000, 786_432, 8, "V100M32"),
    "gpu-g2": NodeType(96_000, 786_432, 8, "G2"),
}


@dataclass(frozen=True)
class NodeSpec:
    name: str
    size: NodeType
    zone: str
    rack: str
    taints: tuple[Taint, ...] = ()
    pods: int = DEFAULT_PODS_PER_NODE
    extra_labels: dict[str, str] = field(default_factory=dict)
    # GPUs registered as HAMi's device plugin registers them (shareable), or, False, as
    # NVIDIA's plain device plugin advertises them: whole GPUs, typed by GPU feature
    # discovery's product label.
    hami: bool = True


@dataclass(frozen=True)
class Topology:
    """How nodes are spread: node i goes to zone i % zones, then racks in turn."""

    zones: int = 3
    racks_per_zone: int = 4

    def __post_init__(self) -> None:
        if self.zones < 1 or self.racks_per_zone < 1:
            raise InvalidArgumentError(
                f"zones={self.zones}, racks_per_zone={self.racks_per_zone}: both must be >= 1"
            )

    def place(self, index: int) -> tuple[str, str]:
        z = index % self.zones
        zone = f"zone-{chr(ord('a') + z)}" if self.zones <= 26 else f"zone-{z}"
        rack = f"{zone}-rack-{(index // self.zones) % self.racks_per_zone}"
        return zone, rack


def check_count(count: int, available: int | None = None, source: str = "") -> None:
    if count < 1:
        raise BadNodeCountError(f"node count {count}: must be at least 1")
    if count > MAX_NODES:
        raise BadNodeCountError(f"node count {count}: at most {MAX_NODES} fake nodes are supported")
    if available is not None and count > available:
        raise BadNodeCountError(f"node count {count}: {source} lists only {available} nodes")


def read_openb_node_list(path: Path) -> list[tuple[str, NodeType]]:
    """Rows of an openb node list CSV (sn, cpu_milli, memory_mib, gpu, model)."""
    if not path.is_file():
        raise NodeListNotFoundError(f"node list {path} does not exist (expected an openb *_node.csv)")
    rows: list[tuple[str, NodeType]] = []
    with open_csv(path) as handle:
        reader = csv.DictReader(handle)
        missing = {"sn", "cpu_milli", "memory_mib", "gpu", "model"} - set(reader.fieldnames or ())
        if missing:
            raise BadNodeListError(f"node list {path}: missing columns {sorted(missing)}")
        for line, row in enumerate(reader, start=2):
            try:
                gpus = int(row["gpu"])
                size = NodeType(int(row["cpu_milli"]), int(row["memory_mib"]), gpus,
                                (row["model"] or None) if gpus else None)  # fmt: skip
            except ValueError as err:
                raise BadNodeListError(f"node list {path}, line {line}: {err}") from err
            if size.cpu_milli <= 0 or size.memory_mib <= 0 or gpus < 0:
                raise BadNodeListError(f"node list {path}, line {line}: sizes must be positive")
            rows.append((row["sn"], size))
    return rows


def openb_node_specs(
    path: Path,
    count: int,
    topology: Topology = Topology(),
    taints: Sequence[Taint] = (),
) -> list[NodeSpec]:
    """count nodes from an openb node list, evenly spaced through the file.

    Even spacing keeps the file's mix of GPU models and sizes (the file is sorted by
    type, so its first rows would all be alike) and is deterministic.
    """
    check_count(count)
    rows = read_openb_node_list(path)
    check_count(count, len(rows), str(path))
    picked = [rows[i * len(rows) // count] for i in range(count)]
    return [
        NodeSpec(name, size, *topology.place(i), taints=tuple(taints))
        for i, (name, size) in enumerate(picked)
    ]


def parse_mix(text: str) -> dict[str, int]:
    """'cpu-small=3,gpu-t4=1' -> weights by node type."""
    weights: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        type_name, _, weight = part.partition("=")
        if type_name not in NODE_TYPES:
            raise InvalidArgumentError(f"node type {type_name!r}: choose from {sorted(NODE_TYPES)}")
        try:
            weights[type_name] = int(weight or "1")
        except ValueError as err:
            raise InvalidArgumentError(f"mix {text!r}: weight {weight!r} is not an integer") from err
        if weights[type_name] < 0:
            raise InvalidArgumentError(f"mix {text!r}: weight of {type_name} is negative")
    if sum(weights.values()) == 0:
        raise InvalidArgumentError(f"mix {text!r}: give at least one type a positive weight")
    return weights


def mix_node_specs(
    count: int,
    mix: dict[str, int],
    topology: Topology = Topology(),
    taints: Sequence[Taint] = (),
    prefix: str = "kwok-node",
) -> list[NodeSpec]:
    """count nodes whose types follow the weights of mix, interleaved.

    Node i gets the type whose share so far lags its weight most, so any prefix of
    the list has the requested proportions (3:1 gives c c g c c c g c ...).
    """
    check_count(count)
    total = sum(mix.values())
    made = dict.fromkeys(mix, 0)
    specs = []
    for i in range(count):
        type_name = max(mix, key=lambda t: mix[t] * (i + 1) / total - made[t])
        made[type_name] += 1
        zone, rack = topology.place(i)
        specs.append(NodeSpec(f"{prefix}-{i:04d}", NODE_TYPES[type_name], zone, rack, tuple(taints)))
    return specs


def node_manifest(spec: NodeSpec) -> dict[str, Any]:
    """The Node object, with status: KWOK keeps the allocatable we declare."""
    size = spec.size
    resources = {
        "cpu": f"{size.cpu_milli}m",
        "memory": f"{size.memory_mib}Mi",
        "pods": str(spec.pods),
        "ephemeral-storage": "1Ti",
    }
    labels = {
        names.HOSTNAME_LABEL: spec.name,
        names.ZONE_LABEL: spec.zone,
        names.RACK_LABEL: spec.rack,
        names.KWOK_TYPE_LABEL: names.KWOK_TYPE_VALUE,
        names.GENERATED_BY_LABEL: names.GENERATED_BY_VALUE,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        **spec.extra_labels,
    }
    annotations = {
        names.KWOK_NODE_ANNOTATION: names.KWOK_NODE_VALUE,
        # Nodes have no TTL-based object caching to manage: none has a kubelet.
        "node.alpha.kubernetes.io/ttl": "0",
    }
    if size.gpu_count and not spec.hami:
        resources[names.GPU_RESOURCE] = str(size.gpu_count)
        if size.gpu_model:
            labels[GPU_PRODUCT_LABEL] = size.gpu_model
    elif size.gpu_count:
        # As HAMi's device plugin registers GPUs: nvidia.com/gpu counts vGPUs.
        resources[names.GPU_RESOURCE] = str(size.gpu_count * hami.SPLIT_COUNT)
        annotations[names.REGISTER_ANNOTATION] = hami.register_annotation(
            spec.name, size.gpu_count, size.gpu_model
        )
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": spec.name, "labels": labels, "annotations": annotations},
        "spec": {"taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in spec.taints]},
        "status": {"allocatable": resources, "capacity": dict(resources), "phase": "Running"},
    }


@dataclass(frozen=True)
class CreateResult:
    created: list[str]
    existing: list[str]


def create_nodes(api: client.CoreV1Api, specs: Iterable[NodeSpec], workers: int = 8) -> CreateResult:
    """Create the nodes in parallel; nodes that already exist are left as they are."""

    def create(spec: NodeSpec) -> tuple[str, bool]:
        try:
            api.create_node(body(node_manifest(spec)))
            return spec.name, True
        except ApiException as err:
            if err.status == 409:
                return spec.name, False
            raise

    created: list[str] = []
    existing: list[str] = []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for name, was_created in pool.map(create, specs):
            (created if was_created else existing).append(name)
    return CreateResult(created, existing)


def delete_generated_nodes(api: client.CoreV1Api) -> int:
    """Delete the nodes these tools made (by label); returns how many."""
    nodes: list[Any] = api.list_node(label_selector=names.GENERATED_SELECTOR).items
    for node in nodes:
        try:
            api.delete_node(node.metadata.name)
        except ApiException as err:
            if err.status != 404:
                raise
    return len(nodes)


def is_ready(node: Any) -> bool:
    """The node (a V1Node) has condition Ready=True."""
    conditions = node.status.conditions if node.status else None
    return any(c.type == "Ready" and c.status == "True" for c in conditions or [])


def wait_ready(api: client.CoreV1Api, node_names: Sequence[str], timeout_s: float = 60) -> None:
    """Wait until every named node reports Ready=True (the kwok controller sets it)."""
    deadline = time.monotonic() + timeout_s
    waiting = set(node_names)
    while waiting:
        listed: list[Any] = api.list_node(label_selector=names.GENERATED_SELECTOR).items
        waiting -= {node.metadata.name for node in listed if is_ready(node)}
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise ClusterNotRunningError(
                f"{len(waiting)} nodes not Ready after {timeout_s:.0f} s "
                f"(e.g. {sorted(waiting)[:3]}); is the kwok controller running?"
            )
        time.sleep(0.5)
