"""PodTopologySpread (score): the pod's soft constraints (``whenUnsatisfiable:
ScheduleAnyway``), as kube-scheduler's ``podtopologyspread/scoring.go`` scores them.

Scored nodes lacking the topology key of any soft constraint are ignored (they score 0).
For each constraint a node gets

    count * log(size + 2) + (maxSkew - 1)

- ``count``: matching pods (the pod's namespace, the constraint's selector with
  ``matchLabelKeys`` merged in, as the filter builds it) in the node's domain, over the
  nodes that have every soft constraint's key and pass the constraint's inclusion policies
  (``nodeAffinityPolicy``, ``nodeTaintsPolicy``); for ``kubernetes.io/hostname``, the
  matching pods on the node itself;
- ``size``: the number of domains among the scored nodes that are not ignored (for
  hostname, the number of such nodes).

The sum is rounded (half away from zero) and normalised so that fewer matching pods score
higher: ``100 * (max + min - s) // max`` over the nodes not ignored, 100 for all when
``max`` is 0.

Pods without constraints of their own get none here: kube's system defaults (hostname and
zone, selected by the Services, ReplicaSets and StatefulSets that own the pod) need those
objects, which the scheduler does not watch.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from scheduler.framework.plugin import MAX_NODE_SCORE, CycleContext
from scheduler.plugins.filters.pod_topology_spread import (
    inclusion_mask,
    matching_pods_per_node,
    spread_selector,
)
from scheduler.state.cluster_state import IntArray

HOSTNAME = "kubernetes.io/hostname"


class PodTopologySpreadScore:
    name = "PodTopologySpread"

    def score(self, ctx: CycleContext, nodes: IntArray) -> IntArray:
        pod, state = ctx.pod, ctx.state
        constraints = [c for c in pod.topology_spread if c.when_unsatisfiable == "ScheduleAnyway"]
        if not constraints or nodes.size == 0:
            return np.zeros(nodes.size, np.int64)
        has_all_keys = np.ones(len(state), np.bool_)
        for c in constraints:
            has_all_keys &= state.label_domains(c.topology_key).ids >= 0
        considered = has_all_keys[nodes]
        raw = np.zeros(nodes.size, np.float64)
        for c in constraints:
            selector = spread_selector(c, pod)
            domains = state.label_domains(c.topology_key)
            ids = domains.ids
            if c.topology_key == HOSTNAME:
                here = np.zeros(len(state), np.bool_)
                here[nodes] = True
                count = matching_pods_per_node(state, pod.namespace, selector, here)[nodes]
                size = int(np.count_nonzero(considered))
            else:
                counted = has_all_keys & inclusion_mask(state, pod, c)
                per_node = matching_pods_per_node(state, pod.namespace, selector, counted)
                per_domain = np.bincount(ids[counted], weights=per_node[counted], minlength=domains.count)
                count = per_domain[np.maximum(ids[nodes], 0)]
                size = np.unique(ids[nodes][considered]).size
            raw += count * np.log(size + 2) + (c.max_skew - 1)
        return _normalize(np.floor(raw + 0.5).astype(np.int64), considered)


def _normalize(sums: IntArray, considered: npt.NDArray[np.bool_]) -> IntArray:
    """Fewer is better: ``100 * (max + min - s) // max`` over the considered nodes
    (max starts at 0, as kube's does), 0 for the others."""
    scores = np.zeros(sums.size, np.int64)
    if not considered.any():
        return scores
    kept = sums[considered]
    low, high = int(kept.min()), max(int(kept.max()), 0)
    if high == 0:
        scores[considered] = MAX_NODE_SCORE
    else:
        scores[considered] = MAX_NODE_SCORE * (high + low - kept) // high
    return scores
