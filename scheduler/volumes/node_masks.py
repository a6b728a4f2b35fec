"""Node selectors over all nodes at once: a PersistentVolume's node affinity or a
StorageClass's allowed topologies as one boolean per node, from the state's label
domains (integer ids per label value), so a class with thousands of local volumes is
matched with array operations, not a predicate per node and volume."""

from __future__ import annotations

import numpy as np

from scheduler.objects.selectors import NodeSelector, NodeSelectorTerm, Requirement
from scheduler.state.cluster_state import BoolArray, ClusterState


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
