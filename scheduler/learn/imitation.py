"""Imitation warm start: the scorer learns the teacher's correction to FGD.

Read top to bottom. The teacher (``fgd-reserve``) schedules training episodes;
at every ``sample_every``-th decision we record the policy's input (all nodes'
features, the graph, and up to ``max_candidates`` feasible nodes: the teacher's top
choices plus random others) and the teacher's residual over FGD for those
candidates. The scorer's head is fitted to the residual (mean squared error, in FGD
points) with the GNN trained end to end. Its prior is FGD's score, so a perfect fit
reproduces the teacher's ranking.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from tqdm import tqdm

from scheduler.framework.plugin import CycleContext
from scheduler.framework.profile import Profile, WeightedScore
from scheduler.learn.episode import EpisodeSpec, make_episode, run_episode
from scheduler.learn.options import ImitationArgs
from scheduler.learn.seeding import finish_training, start_training
from scheduler.plugins.profiles import default_filters, register_profile
from scheduler.plugins.registry import ProfileContext
from scheduler.plugins.scores.fgd_reserve import ReserveScore
from scheduler.policy.config import PRIOR_POINTS, ScorerConfig
from scheduler.policy.features import FGD_SCORE
from scheduler.policy.graph import GraphBuilder, PolicyInput
from scheduler.policy.model import NodeScorer
from scheduler.sim.synthetic import SyntheticSpec, run_synthetic
from scheduler.state.cluster_state import IntArray

FloatArray = npt.NDArray[np.float32]
_RECORDING_PROFILE = "imitation-recorder"


@dataclass
class Sample:
    node_x: FloatArray
    edge_index: IntArray
    candidates: IntArray
    pair_x: FloatArray
    pod_x: FloatArray
    target: FloatArray  # the teacher's residual (FGD points) for the candidates

    @classmethod
    def of(cls, policy_input: PolicyInput, target: FloatArray) -> Sample:
        """A decision's inputs (its node rows copied: the builder reuses its array) and
        the target for its candidates."""
        return cls(
            policy_input.node_x.copy(),
            policy_input.edge_index,
            policy_input.candidates,
            policy_input.pair_x,
            policy_input.pod_x,
            target,
        )


@dataclass
class Recorder:
    """A score plugin that scores like the teacher and records every n-th decision."""

    teacher: ReserveScore
    every: int
    max_candidates: int
    rng: np.random.Generator
    samples: list[Sample] = field(default_factory=list)
    name: str = "Recorder"
    _calls: int = 0

    def score(self, ctx: CycleContext, nodes: IntArray) -> IntArray:
        scores = self.teacher.score(ctx, nodes)
        self._calls += 1
        if self._calls % self.every == 0:
            self._record(ctx, nodes)
        return scores

    def _record(self, ctx: CycleContext, nodes: IntArray) -> None:
        values = self.teacher.values(ctx.state, ctx.pod, nodes)
        order = np.argsort(-values, kind="stable")
        best = order[: self.max_candidates // 4]
        rest = order[self.max_candidates // 4 :]
        others = self.rng.choice(rest, size=min(rest.size, self.max_candidates - best.size), replace=False)
        chosen = np.sort(nodes[np.concatenate([best, others]).astype(np.int64)])
        builder: GraphBuilder = self.teacher.builder
        policy_input = builder.build(ctx.state, ctx.pod, chosen)
        target = self.teacher.residual(ctx.state, ctx.pod, chosen).astype(np.float32)
        self.samples.append(Sample.of(policy_input, target))

    def select_gpus(self, ctx: CycleContext, node: int) -> tuple[int, ...]:
        return self.teacher.select_gpus(ctx, node)


def collate(batch: list[Sample]) -> tuple[torch.Tensor, ...]:
    """Disjoint union of the decisions' graphs (node and edge indices offset)."""
    offset = 0
    node_x, edges, candidates, pair_x, pod_x, target = [], [], [], [], [], []
    for sample in batch:
        node_x.append(sample.node_x)
        edges.append(sample.edge_index + offset)
        candidates.append(sample.candidates + offset)
        pair_x.append(sample.pair_x)
        pod_x.append(np.broadcast_to(sample.pod_x, (sample.candidates.size, sample.pod_x.size)))
        target.append(sample.target)
        offset += sample.node_x.shape[0]
    return (
        torch.from_numpy(np.concatenate(node_x)),
        torch.from_numpy(np.concatenate(edges, axis=1)),
        torch.from_numpy(np.concatenate(candidates)),
        torch.from_numpy(np.concatenate(pair_x)),
        torch.from_numpy(np.concatenate(pod_x)),
        torch.from_numpy(np.concatenate(target)),
    )


def collect(args: ImitationArgs, rng: np.random.Generator, bar: tqdm[Any]) -> list[Sample]:
    samples: list[Sample] = []
    for trace in args.traces:
        for i in range(args.episodes_per_trace):
            episode = make_episode(EpisodeSpec(trace, args.seed * 1000 + i, args.node_fraction))
            recorder = Recorder(ReserveScore(episode.typical), args.sample_every, args.max_candidates, rng)
            profile = Profile("teacher", default_filters(), [WeightedScore(recorder, 1)], recorder, "first")
            run_episode(episode, profile)
            samples.extend(recorder.samples)
            bar.update(1)
    for i in range(args.synthetic_episodes):
        recorder = Recorder(ReserveScore(None), args.sample_every, args.max_candidates, rng)
        profile = Profile("teacher", default_filters(), [WeightedScore(recorder, 1)], recorder, "first")

        def recording(_ctx: ProfileContext, profile: Profile = profile) -> Profile:
            return profile

        register_profile(_RECORDING_PROFILE, recording)  # the synthetic run builds its profile by name
        run_synthetic(SyntheticSpec(_RECORDING_PROFILE, args.seed * 1000 + i))
        samples.extend(recorder.samples)
        bar.update(1)
    return samples


def main(args: ImitationArgs) -> Path:
    """Collect, fit, save; returns the checkpoint folder."""
    started = time.time()
    rng, writer = start_training(args.seed, args.out)

    episodes = len(args.traces) * args.episodes_per_trace + args.synthetic_episodes
    with tqdm(total=episodes, desc="teacher episodes", disable=args.quiet) as bar:
        samples = collect(args, rng, bar)
    writer.add_scalar("charts/decisions_recorded", len(samples), 0)

    config = ScorerConfig(hidden=args.hidden, head_hidden=args.head_hidden, score_step=args.score_step)
    model = NodeScorer(config)
    # Phase 1 fits the reserve term alone (a handful of parameters, a larger step);
    # phase 2 fits the whole scorer, the head learning what the reserve term misses.
    phases: list[tuple[str, list[torch.nn.Parameter], float, int]] = []
    if model.reserve is not None:
        phases.append(("reserve", list(model.reserve.parameters()), args.reserve_learning_rate, args.epochs))
    phases.append(("scorer", list(model.parameters()), args.learning_rate, args.epochs))
    step = 0
    losses: list[float] = []
    with tqdm(total=sum(p[3] for p in phases), desc="imitation epochs", disable=args.quiet) as bar:
        for phase, parameters, learning_rate, epochs in phases:
            optimizer = torch.optim.Adam(parameters, lr=learning_rate)
            for epoch in range(epochs):
                order = rng.permutation(len(samples))
                losses = []
                for start in range(0, len(order), args.batch_size):
                    batch = [samples[i] for i in order[start : start + args.batch_size]]
                    node_x, edges, candidates, pair_x, pod_x, target = collate(batch)
                    embedding = model.embed(node_x, edges)[candidates]
                    logits = model.head_logits(embedding, pair_x, pod_x)
                    residual = logits - pair_x[:, FGD_SCORE] * PRIOR_POINTS * config.prior_weight
                    loss = torch.nn.functional.mse_loss(residual, target)
                    optimizer.zero_grad()
                    loss.backward()  # type: ignore[no-untyped-call]
                    optimizer.step()
                    losses.append(loss.item())
                    writer.add_scalar(f"losses/{phase}_mse", loss.item(), step)
                    step += 1
                writer.add_scalar(f"losses/{phase}_epoch_mse", float(np.mean(losses)), epoch)
                bar.set_postfix(phase=phase, mse=f"{np.mean(losses):.4f}")
                bar.update(1)
    seconds = time.time() - started
    writer.add_scalar("charts/seconds", seconds, 0)
    return finish_training(
        writer,
        model,
        args.out,
        {
            "stage": "imitation",
            "teacher": "fgd-reserve",
            "traces": list(args.traces),
            "episode_seeds": [args.seed * 1000 + i for i in range(args.episodes_per_trace)],
            "node_fraction": args.node_fraction,
            "synthetic_episodes": args.synthetic_episodes,
            "decisions": len(samples),
            "epochs": args.epochs,
            "final_mse": float(np.mean(losses)) if samples else None,
            "seconds": round(seconds, 1),
        },
    )
