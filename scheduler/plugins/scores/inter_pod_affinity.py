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

Placed pods are read by group (``ClusterState.pod_groups``: same namespace, labels and
terms), each term evaluated once per group and added per node by the group's counts; when
the incoming pod has no preferred terms only the groups with affinity terms of their own
are read. A node scores the sum over the topology keys
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
from scheduler.plugins.filters.inter_pod_affinity import (
    AffinityTerm,
    DomainCounts,
    add_group_to_domains,
    count_at,
    resolved_terms,
)
from scheduler.state.cluster_state import IntArray
from scheduler.state.pod_groups import TermsKey

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
        groups = state.pod_groups
        if not own and not groups.with_terms:
            return np.zeros(nodes.size, np.int64)
        totals: DomainCounts = {}  # signed sums per topology domain
        if own:
            for group in groups.by_labels.values():
                for term, weight in own:
                    if term.matches(group.pod, namespace_labels):
                        add_group_to_domains(totals, state, term.topology_key, group, weight)
        for key, group in groups.with_terms.items():
            for placed_term, resolved, weight in self._terms_of(key, group.pod):
                if resolved.matches(pod, namespace_labels):
                    add_group_to_domains(totals, state, placed_term.topology_key, group, weight)
        if not totals:
            return np.zeros(nodes.size, np.int64)
        sums = np.zeros(nodes.size, np.int64)
        for topology_key in totals:
            sums += count_at(totals, state, topology_key, nodes)
        return normalize_min_max(sums)

    def _terms_of(self, key: TermsKey, other: Pod) -> Iterator[tuple[PodAffinityTerm, AffinityTerm, int]]:
        """A placed pod's terms that count when they match the incoming pod, resolved,
        with their signed weights (``key``: the pod's group)."""
        if self.hard_pod_affinity_weight > 0:
            required = other.pod_affinity.required
            for term, resolved in zip(required, resolved_terms(key, other, "required-affinity"), strict=True):
                yield term, resolved, self.hard_pod_affinity_weight
        for weighted, resolved in zip(
            other.pod_affinity.preferred, resolved_terms(key, other, "affinity"), strict=True
        ):
            yield weighted.term, resolved, weighted.weight
        for weighted, resolved in zip(
            other.pod_anti_affinity.preferred, resolved_terms(key, other, "anti"), strict=True
        ):
            yield weighted.term, resolved, -weighted.weight


def normalize_min_max(sums: IntArray) -> IntArray:
    """``int64(100 * (float64(s - min) / float64(max - min)))``; all 0 when max == min."""
    if sums.size == 0:
        return sums.copy()
    low, high = int(sums.min()), int(sums.max())
    if high == low:
        return np.zeros(sums.size, np.int64)
    scaled: IntArray = (MAX_NODE_SCORE * ((sums - low) / float(high - low))).astype(np.int64)
    return scaled
