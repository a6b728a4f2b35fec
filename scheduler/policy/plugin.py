"""GnnScore: the learned policy as a score plugin, and the ``gnn`` profile.

The plugin builds the policy's features from the ``ClusterState`` and the ``Pod``
(``GraphBuilder``), runs the checkpoint's scorer over the feasible nodes and returns
integer scores that keep its choice: the node with the best (quantised) logit scores
100, ties included, the others 0..99 in proportion, so the profile's first-node tie
break picks exactly the scorer's argmax. GPU shares go to the GPU with the smallest
fragmentation change (``FragDelta``); whole GPUs to the lowest-index free ones.

Speed: per-node scorers run in numpy with node encodings, embeddings and per-request
logits cached by node version (``inference.CachedScorer``): after a placement only
the changed node and its graph neighbours are computed again. The fixed-action seed
designs run in torch, on one thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch

from scheduler.framework.plugin import CycleContext
from scheduler.framework.profile import Profile, WeightedScore
from scheduler.objects.pod import Pod
from scheduler.plugins.registry import ProfileContext, default_filters, user_preferences
from scheduler.policy.checkpoint import load_checkpoint
from scheduler.policy.graph import GraphBuilder
from scheduler.policy.inference import CachedScorer, NumpyScorer
from scheduler.policy.model import NodeScorer, quantize
from scheduler.policy.scoring import integer_scores, round_to_step
from scheduler.state.cluster_state import ClusterState, IntArray
from scheduler.state.fragmentation import TypicalPods

FloatArray = npt.NDArray[np.float32]


class GnnScore:
    """Score plugin and GPU selector backed by a checkpoint."""

    name = "GnnScore"

    def __init__(
        self, model: NodeScorer, typical: TypicalPods | None, scorer: NumpyScorer | None = None
    ) -> None:
        torch.set_num_threads(1)
        self.model = model.eval()
        self.builder = GraphBuilder(typical)
        self.cached: CachedScorer | None = None
        if self.model.config.kind in ("gnn", "mlp"):
            self.cached = CachedScorer(scorer or NumpyScorer(self.model), self.builder)

    def logits(self, state: ClusterState, pod: Pod, nodes: IntArray) -> FloatArray:
        """The scorer's quantised logits for placing ``pod`` on ``nodes``."""
        step = self.model.config.score_step
        if self.cached is not None:
            return round_to_step(self.cached.logits(state, pod, nodes), step)
        with torch.inference_mode():
            pair_x, _ = self.builder.pair_features(state, pod, nodes)
            node_x = torch.from_numpy(self.builder.node_features(state))
            edges = torch.from_numpy(self.builder.edge_index)
            pod_x = torch.from_numpy(self.builder.pod_features(pod, state))
            logits = self.model(node_x, edges, torch.from_numpy(nodes), torch.from_numpy(pair_x), pod_x)
            values: FloatArray = quantize(logits, step).numpy()
        return values

    def score(self, ctx: CycleContext, nodes: IntArray) -> IntArray:
        return integer_scores(self.logits(ctx.state, ctx.pod, nodes))

    def select_gpus(self, ctx: CycleContext, node: int) -> tuple[int, ...]:
        return self.builder.fgd_gpus(ctx, node)


def gnn_profile(ctx: ProfileContext, checkpoint: Path | None = None) -> Profile:
    """The ``gnn`` profile: the default filters, the pod's preferences, then GnnScore
    among the nodes the pod prefers most, ties to the first node. Raises
    ``CheckpointError`` for a missing or bad checkpoint."""
    loaded = load_checkpoint(checkpoint if checkpoint is not None else ctx.checkpoint)
    return model_profile(GnnScore(loaded.model, ctx.typical_pods), user_preferences(ctx))


def model_profile(plugin: GnnScore, preferences: Sequence[WeightedScore] = ()) -> Profile:
    """A learned scorer as a profile; training leaves out ``preferences`` (trace pods ask
    for none), the live profile has the user's."""
    return Profile("gnn", default_filters(), [WeightedScore(plugin, 1)], plugin, "first", preferences)
