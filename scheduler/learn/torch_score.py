"""The learned policy in torch, for the checkpoint kinds the live scheduler does not
serve: the fixed-action seed designs (``flat-mlp``, ``pooled-gnn``), which map the
whole cluster to a fixed list of actions and so have no per-node numpy path.
``rl-scheduler evaluate`` scores them here (``evaluate.learned_profile``), on one
thread; per-node checkpoints it scores in numpy, as the live scheduler does.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch

from scheduler.framework.plugin import CycleContext
from scheduler.framework.profile import Profile
from scheduler.objects.pod import Pod
from scheduler.plugins.profiles import user_preferences
from scheduler.plugins.registry import ProfileContext
from scheduler.policy.checkpoint import load_checkpoint
from scheduler.policy.gpu_choice import fgd_gpus
from scheduler.policy.graph import GraphBuilder
from scheduler.policy.model import NodeScorer, quantize
from scheduler.policy.plugin import model_profile
from scheduler.policy.scoring import integer_scores
from scheduler.state.cluster_state import ClusterState, IntArray
from scheduler.state.fragmentation import TypicalPods

FloatArray = npt.NDArray[np.float32]


class TorchScore:
    """Score plugin and GPU selector running a ``NodeScorer`` of any kind in torch."""

    name = "GnnScore"

    def __init__(self, model: NodeScorer, typical: TypicalPods | None) -> None:
        torch.set_num_threads(1)
        self.model = model.eval()
        self.builder = GraphBuilder(typical)

    def logits(self, state: ClusterState, pod: Pod, nodes: IntArray) -> FloatArray:
        """The scorer's quantised logits for placing ``pod`` on ``nodes``."""
        with torch.inference_mode():
            pair_x, _ = self.builder.pair_features(state, pod, nodes)
            node_x = torch.from_numpy(self.builder.node_features(state))
            edges = torch.from_numpy(self.builder.edge_index)
            pod_x = torch.from_numpy(self.builder.pod_features(pod, state).copy())
            logits = self.model(node_x, edges, torch.from_numpy(nodes), torch.from_numpy(pair_x), pod_x)
            values: FloatArray = quantize(logits, self.model.config.score_step).numpy()
        return values

    def score(self, ctx: CycleContext, nodes: IntArray) -> IntArray:
        return integer_scores(self.logits(ctx.state, ctx.pod, nodes))

    def select_gpus(self, ctx: CycleContext, node: int) -> tuple[int, ...]:
        return fgd_gpus(self.builder.frag, ctx, node)


def torch_profile(ctx: ProfileContext, checkpoint: Path) -> Profile:
    """The ``gnn`` profile of a checkpoint of any kind, scored in torch."""
    loaded = load_checkpoint(checkpoint)
    return model_profile(TorchScore(loaded.model, ctx.typical_pods), user_preferences(ctx))
