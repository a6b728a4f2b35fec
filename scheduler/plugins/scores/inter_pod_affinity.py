"""InterPodAffinity (score): preferred pod affinity and anti-affinity, as kube-scheduler's
``interpodaffinity/scoring.go`` scores them.

Every placed pod adds to the topology domains of its node (one per topology key; a node
without the key adds nowhere):

- ``+weight`` / ``-weight`` for each preferred affinity / anti-affinity term of the
  incoming pod that the placed pod matches;
- ``+1`` (kube's ``hardPodAffinityWeight``) for each required affinity term of the placed
  pod that the incoming pod matches;
- ``+weight`` / ``-weight`` for each preferred affinity / anti-affinity term of the placed
  pod that the incoming pod matches.

When the incoming pod has no preferred terms only placed pods with affinity terms of their
own can add anything, and only they are read. A node scores the sum over the topology keys
of its domains' totals, normalised over the scored nodes to
``int(100 * ((s - min) / (max - min)))``, all 0 when every node has the same sum. Terms
match pods as in the InterPodAffinity filter (``AffinityTerm``).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from scheduler.framework.plugin import MAX_NODE_SCORE, CycleContext
from scheduler.objects.pod import Pod
from scheduler.objects.selectors import PodAffinityTerm
from scheduler.plugins.filters.inter_pod_affinity import AffinityTerm, DomainCounts, add_to_domain, count_at
from scheduler.state.cluster_state import ClusterState, IntArray

# kube-scheduler's InterPodAffinityArgs.hardPodAffinityWeight default.
HARD_POD_AFFINITY_WEIGHT = 1


class InterPodAffinityScore:
    name = "InterPodAffinity"

    def __init__(self, hard_pod_affinity_weight: int = HARD_POD_AFFINITY_WEIGHT) -> None:
        self.hard_pod_affinity_weight = hard_pod_affinity_weight

    def score(self, ctx: CycleContext, nodes: IntArray) -> IntArray:
        pod, state, namespace_labels = ctx.pod, ctx.state, ctx.namespace_labels
        own = [(AffinityTerm.resolve(t.term, pod), t.weight) for t in pod.pod_affinity.preferred]
        own += [(AffinityTerm.resolve(t.term, pod), -t.weight) for t in pod.pod_anti_affinity.preferred]
        if not own and not state.affinity_pod_keys:
            return np.zeros(nodes.size, np.int64)
        totals: DomainCounts = {}  # signed sums per topology domain
        for other, node in _placed_pods(state, everyone=bool(own)):
            for term, weight in own:
                if term.matches(other, namespace_labels):
                    add_to_domain(totals, state, term.topology_key, node, weight)
            for placed_term, weight in self._terms_of(other):
                if AffinityTerm.resolve(placed_term, other).matches(pod, namespace_labels):
                    add_to_domain(totals, state, placed_term.topology_key, node, weight)
        if not totals:
            return np.zeros(nodes.size, np.int64)
        sums = np.zeros(nodes.size, np.int64)
        for key in totals:
            sums += count_at(totals, state, key, nodes)
        return normalize_min_max(sums)

    def _terms_of(self, other: Pod) -> Iterator[tuple[PodAffinityTerm, int]]:
        """A placed pod's terms that count when they match the incoming pod, with their
        signed weights."""
        if self.hard_pod_affinity_weight > 0:
            for required in other.pod_affinity.required:
                yield required, self.hard_pod_affinity_weight
        for weighted in other.pod_affinity.preferred:
            yield weighted.term, weighted.weight
        for weighted in other.pod_anti_affinity.preferred:
            yield weighted.term, -weighted.weight


def normalize_min_max(sums: IntArray) -> IntArray:
    """``int64(100 * (float64(s - min) / float64(max - min)))``; all 0 when max == min."""
    if sums.size == 0:
        return sums.copy()
    low, high = int(sums.min()), int(sums.max())
    if high == low:
        return np.zeros(sums.size, np.int64)
    scaled: IntArray = (MAX_NODE_SCORE * ((sums - low) / float(high - low))).astype(np.int64)
    return scaled


def _placed_pods(state: ClusterState, *, everyone: bool) -> Iterator[tuple[Pod, int]]:
    """Placed pods with their node's row: all of them, or those with affinity terms."""
    if everyone:
        for node, pods in enumerate(state.pods_on_node):
            for other in pods.values():
                yield other, node
        return
    for key in state.affinity_pod_keys:
        placement = state.placements[key]
        yield placement.pod, state.node_index[placement.node]
