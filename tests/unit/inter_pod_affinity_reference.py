"""InterPodAffinity as it was before placed pods were read by group: pod by pod, every
term resolved when read. The equivalence test holds the grouped plugins to it."""

from __future__ import annotations

from typing import Any

import numpy as np

from scheduler.framework.plugin import CycleContext
from scheduler.plugins.filters.inter_pod_affinity import AffinityTerm, DomainCounts, add_to_domain, count_at
from scheduler.plugins.scores.inter_pod_affinity import normalize_min_max
from scheduler.state.cluster_state import IntArray


def reference_counts(ctx: CycleContext) -> dict[str, Any] | None:
    """The filter's PreFilter counts, or None where it skips."""
    pod, state, ns_labels = ctx.pod, ctx.state, ctx.namespace_labels
    affinity = tuple(AffinityTerm.resolve(t, pod) for t in pod.pod_affinity.required)
    anti = tuple(AffinityTerm.resolve(t, pod) for t in pod.pod_anti_affinity.required)
    existing: DomainCounts = {}
    for key in state.anti_affinity_pod_keys:
        placement = state.placements[key]
        node = state.node_index[placement.node]
        for term in placement.pod.pod_anti_affinity.required:
            if AffinityTerm.resolve(term, placement.pod).matches(pod, ns_labels):
                add_to_domain(existing, state, term.topology_key, node)
    if not affinity and not anti and not existing:
        return None
    affinity_counts: DomainCounts = {}
    anti_counts: DomainCounts = {}
    for node, pods in enumerate(state.pods_on_node):
        for other in pods.values():
            if affinity and all(t.matches(other, ns_labels) for t in affinity):
                for t in affinity:
                    add_to_domain(affinity_counts, state, t.topology_key, node)
            for t in anti:
                if t.matches(other, ns_labels):
                    add_to_domain(anti_counts, state, t.topology_key, node)
    return {"affinity": affinity_counts, "anti": anti_counts, "existing": existing}


def reference_score(ctx: CycleContext, nodes: IntArray, hard_weight: int = 1) -> IntArray:
    pod, state, ns_labels = ctx.pod, ctx.state, ctx.namespace_labels
    own = [(AffinityTerm.resolve(t.term, pod), t.weight) for t in pod.pod_affinity.preferred]
    own += [(AffinityTerm.resolve(t.term, pod), -t.weight) for t in pod.pod_anti_affinity.preferred]
    totals: DomainCounts = {}
    for node, pods in enumerate(state.pods_on_node):
        for other in pods.values():
            for term, weight in own:
                if term.matches(other, ns_labels):
                    add_to_domain(totals, state, term.topology_key, node, weight)
            placed = [(t, hard_weight) for t in other.pod_affinity.required] if hard_weight > 0 else []
            placed += [(w.term, w.weight) for w in other.pod_affinity.preferred]
            placed += [(w.term, -w.weight) for w in other.pod_anti_affinity.preferred]
            for placed_term, weight in placed:
                if AffinityTerm.resolve(placed_term, other).matches(pod, ns_labels):
                    add_to_domain(totals, state, placed_term.topology_key, node, weight)
    sums = np.zeros(nodes.size, np.int64)
    for key in totals:
        sums += count_at(totals, state, key, nodes)
    return normalize_min_max(sums)
