"""The graph's edges: which nodes a node's embedding mixes with.

Each node is linked to ``degree`` neighbours among the nodes of the same shape (GPU
model, GPU count, CPU and memory), and among the nodes of the same zone or rack when
nodes carry ``topology.kubernetes.io/zone`` / ``topology.rl-scheduler.io/rack`` labels
(``scheduler.objects.topology``); links run both ways, in node order, so the graph is
deterministic. ``node_signature`` is what the edges (and the GPU model statistics) are
made of, so a cache rebuilds them only when a signature changes.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from scheduler.objects.topology import RACK_LABEL, ZONE_LABEL
from scheduler.state.cluster_state import CPU_COLUMN, MEMORY_COLUMN, ClusterState, IntArray

TOPOLOGY_LABELS = (ZONE_LABEL, RACK_LABEL)
NodeSignature = tuple[object, ...]


def _ring_keys(members: list[int], half: int, n: int) -> list[IntArray]:
    """Links from each member to the next ``half`` members around the group's ring,
    both ways, as ``target * n + source`` (``structure_edges`` sorts and dedups them)."""
    ring = np.asarray(members, np.int64)
    keys = []
    for step in range(1, min(half, ring.size - 1) + 1):
        other = np.roll(ring, -step)
        keys += [other * n + ring, ring * n + other]
    return keys


def _shape_columns(state: ClusterState) -> tuple[list[int], list[int]]:
    """Every node's allocatable CPU and memory, as Python ints."""
    cpu: list[int] = state.allocatable[:, CPU_COLUMN].tolist()
    memory: list[int] = state.allocatable[:, MEMORY_COLUMN].tolist()
    return cpu, memory


def node_shape(state: ClusterState, i: int) -> tuple[object, ...]:
    """Node ``i``'s shape, which ``structure_edges`` links: GPU model and count, CPU
    and memory."""
    node = state.nodes[i]
    return (
        node.gpu_model,
        node.gpu_count,
        int(state.allocatable[i, CPU_COLUMN]),
        int(state.allocatable[i, MEMORY_COLUMN]),
    )


def structure_edges(state: ClusterState, degree: int) -> IntArray:
    """``[2, E]`` links between nodes of the same shape and of the same zone/rack, each
    once, ordered by target then source."""
    n = len(state)
    cpu, memory = _shape_columns(state)
    groups: dict[tuple[object, ...], list[int]] = defaultdict(list)
    for i, node in enumerate(state.nodes):
        groups[("shape", node.gpu_model, node.gpu_count, cpu[i], memory[i])].append(i)
        for label in TOPOLOGY_LABELS:
            if label in node.labels:
                groups[(label, node.labels[label])].append(i)
    half = max(1, degree // 2)
    keys = [key for members in groups.values() for key in _ring_keys(members, half, n)]
    if not keys:
        return np.zeros((2, 0), np.int64)
    unique = np.unique(np.concatenate(keys))  # sorted: by target, then source
    return np.stack([unique % n, unique // n])


def node_signature(state: ClusterState, i: int) -> NodeSignature:
    """What ``structure_edges`` and the model statistics read of node ``i``."""
    node = state.nodes[i]
    return (node.name, *node_shape(state, i), *(node.labels.get(label) for label in TOPOLOGY_LABELS))


def node_signatures(state: ClusterState) -> list[NodeSignature]:
    """``node_signature`` of every node, at once."""
    cpu, memory = _shape_columns(state)
    zone, rack = TOPOLOGY_LABELS
    return [
        (
            node.name,
            node.gpu_model,
            node.gpu_count,
            cpu[i],
            memory[i],
            node.labels.get(zone),
            node.labels.get(rack),
        )
        for i, node in enumerate(state.nodes)
    ]


class SignatureWatch:
    """Tells whether any node's ``node_signature`` changed since the last look; only
    the nodes touched since then (``node_version``) are read. (Any label or taint used
    to rebuild the edges, and a node's new allocatable did not; a cluster adding a
    label to each of its 5,000 nodes, one at a time, rebuilt them once per node.)"""

    def __init__(self) -> None:
        self._signatures: list[NodeSignature] = []
        self._version = np.zeros(0, np.int64)
        self._clock = -1  # ``ClusterState.clock`` at the last look

    def forget(self) -> None:
        """Start over (a new state: its node versions and clock are another count)."""
        self._signatures = []
        self._clock = -1

    def changed(self, state: ClusterState) -> bool:
        n = len(state)
        if len(self._signatures) != n:
            self._signatures = node_signatures(state)
            self._version = state.node_version.copy()
            self._clock = state.clock
            return True
        if state.clock == self._clock:
            return False
        self._clock = state.clock
        touched = np.flatnonzero(self._version != state.node_version)
        changed = False
        for i in touched.tolist():
            signature = node_signature(state, i)
            if signature != self._signatures[i]:
                self._signatures[i] = signature
                changed = True
        self._version[touched] = state.node_version[touched]
        return changed
