"""NodeAffinity: ``spec.nodeSelector`` (all labels must match) and the required node
affinity (terms ORed, expressions within a term ANDed; ``matchFields`` on
``metadata.name``) must both hold."""

from __future__ import annotations

from scheduler.framework.plugin import CycleContext, Rejection, SkipUnlessBase
from scheduler.framework.status import Code
from scheduler.objects.node import Node
from scheduler.objects.pod import Pod
from scheduler.state.cluster_state import IntArray

REASON = "node(s) didn't match Pod's node affinity/selector"


def required_affinity_matches(pod: Pod, node: Node) -> bool:
    """Kubernetes' ``GetRequiredNodeAffinity(pod).Match(node)``."""
    if any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    affinity = pod.required_node_affinity
    return affinity is None or affinity.matches(node.name, node.labels)


class NodeAffinity(SkipUnlessBase):
    name = "NodeAffinity"

    def applies(self, ctx: CycleContext) -> bool:
        return bool(ctx.pod.node_selector) or ctx.pod.required_node_affinity is not None

    def filter(self, ctx: CycleContext, nodes: IntArray) -> list[Rejection]:
        pod = ctx.pod
        key = (self.name, frozenset(pod.node_selector.items()), pod.required_node_affinity)
        matches = ctx.state.node_mask(key, lambda node: required_affinity_matches(pod, node))
        return [Rejection(REASON, ~matches[nodes], Code.UNSCHEDULABLE_AND_UNRESOLVABLE)]
