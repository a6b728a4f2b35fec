"""Preference scores of kube-scheduler's default profile.

TaintToleration: count the node's ``PreferNoSchedule`` taints the pod does not
tolerate (tolerations with effect PreferNoSchedule or empty); normalise reversed,
``100 - count * 100 // max(count)``, so untainted nodes score 100.

NodeAffinity: sum the weights of the preferred node-affinity terms the node matches;
normalise ``weight * 100 // max(weight)``.
"""

from __future__ import annotations

import numpy as np

from scheduler.framework.plugin import CycleContext, default_normalize
from scheduler.objects.node import Node
from scheduler.objects.selectors import NodeSelectorTerm
from scheduler.objects.taints import untolerated
from scheduler.state.cluster_state import IntArray


class TaintTolerationScore:
    name = "TaintToleration"

    def score(self, ctx: CycleContext, nodes: IntArray) -> IntArray:
        tolerations = tuple(t for t in ctx.pod.tolerations if t.effect in ("", "PreferNoSchedule"))
        state = ctx.state

        def intolerable(i: int) -> int:
            count = 0
            for taint in state.nodes[i].taints:
                if taint.effect == "PreferNoSchedule" and untolerated(
                    (taint,), tolerations, frozenset({"PreferNoSchedule"})
                ):
                    count += 1
            return count

        tainted = state.node_mask("tainted", lambda node: bool(node.taints))[nodes]
        counts = np.zeros(nodes.size, np.int64)
        for position in np.flatnonzero(tainted):
            counts[position] = intolerable(int(nodes[position]))
        return default_normalize(counts, reverse=True)


class NodeAffinityScore:
    name = "NodeAffinity"

    def score(self, ctx: CycleContext, nodes: IntArray) -> IntArray:
        preferred = ctx.pod.preferred_node_affinity
        if not preferred:
            return np.zeros(nodes.size, np.int64)
        total = np.zeros(nodes.size, np.int64)
        for term in preferred:
            if term.weight == 0:
                continue
            preference = term.preference

            def matches_preference(node: Node, preference: NodeSelectorTerm = preference) -> bool:
                return preference.matches(node.name, node.labels)

            matches = ctx.state.node_mask(("preferred", preference), matches_preference)
            total += np.where(matches[nodes], term.weight, 0)
        return default_normalize(total)
