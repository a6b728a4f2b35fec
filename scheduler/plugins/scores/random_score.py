"""Random (FGD paper baseline): one feasible node, drawn uniformly, scores 100 and the
others 0, so the pod lands on a random feasible node. GPUs: a random fitting GPU."""

from __future__ import annotations

import numpy as np

from scheduler.framework.plugin import MAX_NODE_SCORE, CycleContext
from scheduler.plugins.scores.gpu_choice import RandomGpus
from scheduler.state.cluster_state import IntArray


class RandomScore:
    name = "Random"

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.gpus = RandomGpus(rng)

    def score(self, ctx: CycleContext, nodes: IntArray) -> IntArray:  # noqa: ARG002
        out = np.zeros(nodes.size, np.int64)
        out[self.rng.integers(nodes.size)] = MAX_NODE_SCORE
        return out

    def select_gpus(self, ctx: CycleContext, node: int) -> tuple[int, ...]:
        """A random fitting GPU, from the same generator as the node."""
        return self.gpus.select_gpus(ctx, node)
