"""GnnScore: the learned policy as a score plugin, and the ``gnn`` profile.

The plugin builds the policy's features from the ``ClusterState`` and the ``Pod``
(``GraphBuilder``), runs the checkpoint's scorer over the feasible nodes and returns
integer scores that keep its choice: the node with the best (quantised) logit scores
100, ties included, the others 0..99 in proportion, so the profile's first-node tie
break picks exactly the scorer's argmax. GPU shares go to the GPU with the smallest
fragmentation change (``FragDelta``); whole GPUs to the lowest-index free ones.

Speed: the per-node scorers (``gnn``, ``mlp``) run in numpy with node encodings,
embeddings and per-request logits cached by node version (``inference.CachedScorer``):
after a placement only the changed node and its graph neighbours are computed again.
Nothing here imports torch: the checkpoint is read with ``safetensors.numpy``
(``weights.load_weights``). The fixed-action seed kinds run in torch and are refused
here; training evaluates them with ``scheduler.learn.torch_score``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from scheduler.dra.gpu_view import scoring_pod
from scheduler.framework.plugin import CycleContext, GpuSelector, ScorePlugin
from scheduler.framework.profile import Profile, WeightedScore
from scheduler.objects.pod import Pod
from scheduler.plugins.args import PluginArgs
from scheduler.plugins.profiles import UNREQUESTED_SCORES, build, default_filters, preset
from scheduler.plugins.registry import ProfileContext
from scheduler.policy.gpu_choice import fgd_gpus
from scheduler.policy.graph import GraphBuilder
from scheduler.policy.inference import CachedScorer, NumpyScorer
from scheduler.policy.scoring import integer_scores, round_to_step
from scheduler.policy.weights import load_weights
from scheduler.state.cluster_state import ClusterState, IntArray
from scheduler.state.fragmentation import TypicalPods

FloatArray = npt.NDArray[np.float32]


class GnnScore:
    """Score plugin and GPU selector backed by a per-node scorer in numpy."""

    name = "GnnScore"

    def __init__(self, scorer: NumpyScorer, typical: TypicalPods | None) -> None:
        self.config = scorer.config
        self.builder = GraphBuilder(typical)
        self.cached = CachedScorer(scorer, self.builder)

    def logits(self, state: ClusterState, pod: Pod, nodes: IntArray) -> FloatArray:
        """The scorer's quantised logits for placing ``pod`` on ``nodes``."""
        pod = scoring_pod(state, pod)  # a DRA GPU pod as the GPUs it claims
        return round_to_step(self.cached.logits(state, pod, nodes), self.config.score_step)

    def score(self, ctx: CycleContext, nodes: IntArray) -> IntArray:
        return integer_scores(self.logits(ctx.state, ctx.pod, nodes))

    def select_gpus(self, ctx: CycleContext, node: int) -> tuple[int, ...]:
        return fgd_gpus(self.builder.frag, ctx, node)


def gnn_score(_args: PluginArgs, ctx: ProfileContext) -> GnnScore:
    """The ``GnnScore`` plugin of ``ctx.checkpoint`` (the shipped one if None). Raises
    ``CheckpointError`` for a missing or bad checkpoint, or one of a kind that runs in
    torch only."""
    loaded = load_weights(ctx.checkpoint)
    return GnnScore(NumpyScorer(loaded.config, loaded.arrays), ctx.typical_pods)


def gnn_profile(ctx: ProfileContext, checkpoint: Path | None = None) -> Profile:
    """The ``gnn`` preset (the default filters, the pod's preferences, then GnnScore
    among the nodes the pod prefers most, ties to the first node) with ``checkpoint``
    (``ctx.checkpoint`` when None)."""
    if checkpoint is not None:
        ctx = ProfileContext(ctx.rng, ctx.typical_pods, checkpoint)
    return build(preset("gnn"), ctx)


class LearnedScore(ScorePlugin, GpuSelector, Protocol):
    """A learned scorer: scores the feasible nodes and picks the GPUs on the chosen one."""


def model_profile(plugin: LearnedScore, preferences: Sequence[WeightedScore] = ()) -> Profile:
    """A learned scorer as a profile; training leaves out ``preferences`` (trace pods ask
    for none), the live profile has the user's. A pod that asks for nothing is placed as
    every policy profile places it (``UNREQUESTED_SCORES``; no trace pod does)."""
    return Profile(
        "gnn",
        default_filters(),
        [WeightedScore(plugin, 1)],
        plugin,
        "first",
        preferences,
        unrequested=UNREQUESTED_SCORES,
    )
