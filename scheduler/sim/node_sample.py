"""A seeded, stratified sample of a node list: a smaller cluster of the same make-up.
Training episodes (``scheduler.learn.episode``) and the timeline replay
(``scheduler.sim.timeline``) draw their clusters with it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from scheduler.objects.node import Node


def sample_nodes(nodes: Sequence[Node], fraction: float, seed: int) -> list[Node]:
    """About ``fraction`` of each node shape (GPU model, GPUs, CPU, memory), at least
    one of each shape; all nodes for fraction >= 1."""
    if fraction >= 1.0:
        return list(nodes)
    groups: dict[tuple[str, int, tuple[tuple[str, int], ...]], list[Node]] = defaultdict(list)
    for node in nodes:
        key = (node.gpu_model, node.gpu_count, tuple(sorted(node.allocatable.items())))
        groups[key].append(node)
    rng = np.random.default_rng(seed)
    kept: list[Node] = []
    for key in sorted(groups, key=repr):
        members = groups[key]
        exact = fraction * len(members)
        count = int(exact) + int(rng.random() < exact - int(exact))
        count = max(1, count)
        picks = rng.choice(len(members), size=count, replace=False)
        kept.extend(members[i] for i in sorted(picks))
    return kept
