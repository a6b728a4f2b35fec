"""Per-node values of one pod shape, kept until a node changes.

FGD's score (``fgd.FgdScore``) and the learned policy's fragmentation change
(``scheduler.policy.frag_delta.FragDelta``) compute, per pod shape, one value per node;
between two pods of the same shape only the nodes whose ``ClusterState.node_version``
moved need computing again. ``ShapeCache`` keeps those entries, and forgets them all
when it is handed another ``ClusterState`` (its ``serial`` differs).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, Protocol, TypeVar

import numpy as np

from scheduler.state.cluster_state import ClusterState, IntArray


class Versioned(Protocol):
    version: IntArray  # per node, the node version its values were computed at (-1: never)


E = TypeVar("E", bound=Versioned)


class ShapeCache(Generic[E]):
    """Entries by key (a pod shape and what else decides its values), each made by
    ``make(node_count)``; ``on_new_state`` runs when another state is seen."""

    def __init__(self, make: Callable[[int], E], on_new_state: Callable[[], None]) -> None:
        self._make = make
        self._on_new_state = on_new_state
        self._entries: dict[Hashable, E] = {}
        self._serial = 0

    def sync(self, state: ClusterState) -> None:
        """Forget every entry if ``state`` is not the state they were computed on."""
        if state.serial != self._serial:
            self._entries.clear()
            self._on_new_state()
            self._serial = state.serial

    def entry(self, state: ClusterState, key: Hashable) -> E:
        self.sync(state)
        n = len(state)
        entry = self._entries.get(key)
        if entry is None or entry.version.size != n:
            entry = self._make(n)
            self._entries[key] = entry
        return entry

    @staticmethod
    def stale(entry: E, state: ClusterState, nodes: IntArray) -> IntArray:
        """The ``nodes`` whose values in ``entry`` are older than the node."""
        stale: IntArray = nodes[entry.version[nodes] != state.node_version[nodes]]
        return stale

    @staticmethod
    def mark_fresh(entry: E, state: ClusterState, nodes: IntArray) -> None:
        entry.version[nodes] = state.node_version[nodes]


def unset_versions(n: int) -> IntArray:
    """A version array for ``n`` nodes, none computed yet."""
    return np.full(n, -1, np.int64)
