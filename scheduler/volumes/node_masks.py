"""Node selectors over all nodes at once: a PersistentVolume's node affinity or a
StorageClass's allowed topologies as one boolean per node, from the state's label
domains (integer ids per label value), so a class with thousands of local volumes is
matched with array operations, not a predicate per node and volume."""

from __future__ import annotations

import numpy as np

from scheduler.objects.selectors import NodeSelector, NodeSelectorTerm, Requirement
from scheduler.state.cluster_state import BoolArray, ClusterState, IntArray


def requirement_mask(state: ClusterState, requirement: Requirement) -> BoolArray:
    """``requirement`` on every node's labels (``Requirement.matches`` semantics)."""
    domains = state.label_domains(requirement.key)
    ids = domains.ids
    op = requirement.operator
    if op == "Exists":
        return ids >= 0
    if op == "DoesNotExist":
        return ids < 0
    if op in ("In", "NotIn"):
        wanted = [domains.index[v] for v in requirement.values if v in domains.index]
        inside = np.isin(ids, np.asarray(wanted, np.int64)) if wanted else np.zeros(ids.size, np.bool_)
        return inside if op == "In" else ~inside
    # Gt, Lt: decided once per label value, then looked up per node.
    per_value = np.zeros(len(domains.index) + 1, np.bool_)  # the last slot: label absent
    for value, i in domains.index.items():
        per_value[i] = requirement.matches({requirement.key: value})
    return per_value[ids]


def term_mask(state: ClusterState, term: NodeSelectorTerm) -> BoolArray:
    """Expressions and ``metadata.name`` fields ANDed; an empty term matches no node."""
    n = len(state)
    if not term.match_expressions and not term.match_fields:
        return np.zeros(n, np.bool_)
    mask = np.ones(n, np.bool_)
    for requirement in term.match_expressions:
        mask &= requirement_mask(state, requirement)
    for requirement in term.match_fields:
        named = np.zeros(n, np.bool_)
        for name in requirement.values:
            index = state.node_index.get(name)
            if index is not None:
                named[index] = True
        mask &= named if requirement.operator == "In" else ~named
    return mask


def selector_mask(state: ClusterState, selector: NodeSelector | None) -> BoolArray:
    """Terms ORed; ``None`` (no affinity, no allowed topologies) matches every node."""
    if selector is None:
        return np.ones(len(state), np.bool_)
    mask = np.zeros(len(state), np.bool_)
    for term in selector.terms:
        mask |= term_mask(state, term)
    return mask


class NodeLookup:
    """The nodes a selector matches, as node indices. Selectors made of ``In``
    expressions (a local volume's ``kubernetes.io/hostname In [node]``) are answered by
    binary search in the nodes sorted by label value, not a pass over every node:
    matching thousands of local volumes stays cheap. Other selectors fall back to
    ``selector_mask``. Build one per decision (it keeps the sorted labels)."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self._sorted: dict[str, tuple[IntArray, IntArray]] = {}

    def _by_value(self, key: str) -> tuple[IntArray, IntArray]:
        """(node indices ordered by the label's value id, those ids in that order)."""
        found = self._sorted.get(key)
        if found is None:
            ids = self.state.label_domains(key).ids
            order = np.argsort(ids, kind="stable")
            found = self._sorted[key] = (order, ids[order])
        return found

    def _with_value(self, requirement: Requirement) -> IntArray:
        domains = self.state.label_domains(requirement.key)
        order, sorted_ids = self._by_value(requirement.key)
        parts = []
        for value in requirement.values:
            value_id = domains.index.get(value)
            if value_id is not None:
                low, high = np.searchsorted(sorted_ids, [value_id, value_id + 1])
                parts.append(order[low:high])
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def matching(self, selector: NodeSelector | None) -> IntArray:
        """Sorted indices of the nodes ``selector`` matches (all for ``None``)."""
        if selector is None:
            return np.arange(len(self.state), dtype=np.int64)
        simple = all(
            term.match_expressions
            and not term.match_fields
            and all(r.operator == "In" for r in term.match_expressions)
            for term in selector.terms
        )
        if not simple:
            return np.flatnonzero(selector_mask(self.state, selector)).astype(np.int64)
        if len(selector.terms) == 1 and len(selector.terms[0].match_expressions) == 1:
            only = selector.terms[0].match_expressions[0]
            hit = self._with_value(only)
            return hit if len(only.values) == 1 else np.unique(hit)
        matched = []
        for term in selector.terms:
            nodes: IntArray | None = None
            for requirement in term.match_expressions:
                hit = self._with_value(requirement)
                nodes = hit if nodes is None else np.intersect1d(nodes, hit)
            if nodes is not None:
                matched.append(nodes)
        return np.unique(np.concatenate(matched)) if matched else np.zeros(0, np.int64)
