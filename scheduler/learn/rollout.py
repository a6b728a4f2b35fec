"""Rollout improvement: the network learns the placements that one step of lookahead
over ``fgd-reserve`` finds better than ``fgd-reserve``'s own.

Read top to bottom. This is approximate policy iteration with the teacher as the base
policy (Bertsekas' rollout). The teacher plays a training episode once. At sampled
decisions in the busy part of the episode (``low``-``high`` % of the capacity arrived),
the pod is put, in turn, on each of the teacher's ``branches`` best nodes, and the
teacher plays the rest of the episode from there; each branch's outcome is the
episode's fitness (mean GPU allocated with 95-130% of the capacity arrived, what ES
maximises). The arrivals are the trace's, so a branch's outcome is exact, not a
sample: the best branch is at least as good as the teacher's own choice (branch 0),
which reproduces the teacher's episode.

The scorer, started from a checkpoint, is then fitted to pick the best branch
(cross-entropy over the branched candidates, the best ones sharing the target) while
its scores of the other candidates stay where they were (squared difference to the
starting checkpoint's logits on random feasible nodes), so it changes the teacher's
ranking only where the rollouts told it to. A decision whose branches all end the
same carries no lesson and is dropped.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from scheduler.framework.plugin import CycleContext
from scheduler.framework.profile import Profile, WeightedScore, schedule_pod
from scheduler.learn.episode import Episode, EpisodeSpec, make_episode, saturation_allocation
from scheduler.learn.imitation import Sample, collate
from scheduler.learn.options import RolloutArgs
from scheduler.learn.seeding import finish_training, start_training
from scheduler.parallel import Report, Workers, task_pool
from scheduler.plugins.profiles import default_filters
from scheduler.plugins.scores.fgd_reserve import ReserveScore
from scheduler.policy.checkpoint import load_checkpoint
from scheduler.policy.model import NodeScorer
from scheduler.sim.cli import _advance
from scheduler.state.cluster_state import ClusterState, IntArray

FloatArray = npt.NDArray[np.float64]
FORCED_SCORE = 100


# ---- playing an episode with the teacher ---------------------------------------------


@dataclass(frozen=True)
class Placement:
    node: str
    gpu_indices: tuple[int, ...]


@dataclass
class Played:
    """The teacher's episode: where each arrival went (None: it failed) and the GPU
    allocated after each arrival (milli-GPU)."""

    placements: list[Placement | None]
    allocated: npt.NDArray[np.int64]
    feasible: list[IntArray]


class Forced:
    """A score plugin that puts the pod on one node, its GPUs chosen as the teacher does."""

    name = "Forced"

    def __init__(self, teacher: ReserveScore, node: int) -> None:
        self.teacher = teacher
        self.node = node

    def score(self, ctx: CycleContext, nodes: IntArray) -> IntArray:  # noqa: ARG002 - the plugin protocol
        return np.where(nodes == self.node, FORCED_SCORE, 0).astype(np.int64)

    def select_gpus(self, ctx: CycleContext, node: int) -> tuple[int, ...]:
        return self.teacher.select_gpus(ctx, node)


def _profile(plugin: Any) -> Profile:
    return Profile("rollout", default_filters(), [WeightedScore(plugin, 1)], plugin, "first")


def play(
    episode: Episode,
    state: ClusterState,
    start: int,
    allocated_before: int,
    first_plugin: Any | None = None,
) -> Played:
    """The teacher schedules arrivals ``start``.. on ``state`` (which it changes);
    ``first_plugin``, if given, decides arrival ``start`` instead."""
    teacher = ReserveScore(episode.typical)
    profile = _profile(teacher)
    rng = np.random.default_rng(0)
    count = len(episode.arrivals) - start
    placements: list[Placement | None] = []
    feasible: list[IntArray] = []
    allocated = np.zeros(count, np.int64)
    total = allocated_before
    for i, pod in enumerate(episode.arrivals[start:]):
        chooser = profile if i or first_plugin is None else _profile(first_plugin)
        decision = schedule_pod(state, pod, chooser, rng)
        feasible.append(decision.feasible)
        if decision.scheduled:
            state.place(pod, decision.node, decision.gpu_indices)
            total += pod.gpu.total_milli if decision.gpu_indices else 0
            placements.append(Placement(decision.node, decision.gpu_indices))
        else:
            placements.append(None)
        allocated[i] = total
    return Played(placements, allocated, feasible)


def state_before(episode: Episode, played: Played, index: int) -> ClusterState:
    """The cluster as the teacher left it just before arrival ``index``."""
    state = episode.fresh_state()
    for pod, placement in zip(episode.arrivals[:index], played.placements[:index], strict=True):
        if placement is not None:
            state.place(pod, placement.node, placement.gpu_indices)
    return state


def fitness(episode: Episode, allocated: npt.NDArray[np.int64]) -> float:
    """The episode's fitness (``saturation_allocation``) with ``allocated`` after each arrival."""
    return saturation_allocation(episode.arrived_milli, allocated, episode.capacity_milli)


# ---- one decision, branched --------------------------------------------------------


@dataclass(frozen=True)
class BranchTask:
    spec: EpisodeSpec
    index: int  # the arrival whose placement is branched
    branches: int
    anchors: int
    seed: int


@dataclass
class Branched:
    sample: Sample  # target: each candidate's outcome, NaN for the anchors
    teacher_outcome: float
    best_outcome: float


_EPISODES: dict[EpisodeSpec, tuple[Episode, Played]] = {}


def teacher_episode(spec: EpisodeSpec) -> tuple[Episode, Played]:
    """The episode and the teacher's play of it (kept per process)."""
    if spec not in _EPISODES:
        episode = make_episode(spec)
        _EPISODES[spec] = (episode, play(episode, episode.fresh_state(), 0, 0))
    return _EPISODES[spec]


def branch(task: BranchTask) -> Branched:
    episode, played = teacher_episode(task.spec)
    index = task.index
    pod = episode.arrivals[index]
    state = state_before(episode, played, index)
    teacher = ReserveScore(episode.typical)
    nodes = played.feasible[index]
    values = teacher.values(state, pod, nodes)
    order = np.argsort(-values, kind="stable")  # ties: first in node order, as the teacher
    branched = nodes[order[: task.branches]]
    rest = nodes[order[task.branches :]]
    rng = np.random.default_rng(task.seed)
    anchors = rng.choice(rest, size=min(rest.size, task.anchors), replace=False)
    before = int(played.allocated[index - 1]) if index else 0
    outcomes = []
    for node in branched:
        fork = state_before(episode, played, index)
        tail = play(episode, fork, index, before, Forced(ReserveScore(episode.typical), int(node)))
        allocated = np.concatenate([played.allocated[:index], tail.allocated])
        outcomes.append(fitness(episode, allocated))
    chosen = np.sort(np.concatenate([branched, anchors]).astype(np.int64))
    target = np.full(chosen.size, np.nan, np.float32)
    for node, outcome in zip(branched, outcomes, strict=True):
        target[np.searchsorted(chosen, node)] = outcome
    policy_input = teacher.builder.build(state, pod, chosen)
    sample = Sample.of(policy_input, target)
    return Branched(sample, outcomes[0], max(outcomes))


def branch_reporting(task: BranchTask, report: Report) -> Branched:
    """``branch``, counting the decision once it is played out."""
    result = branch(task)
    report(1)
    return result


def branch_tasks(args: RolloutArgs, rng: np.random.Generator) -> list[BranchTask]:
    """``decisions_per_episode`` scheduled arrivals per episode in the busy window."""
    tasks: list[BranchTask] = []
    for trace in args.traces:
        for i in range(args.episodes_per_trace):
            spec = EpisodeSpec(trace, args.seed * 1000 + i, args.node_fraction)
            episode, played = teacher_episode(spec)
            arrived = 100.0 * episode.arrived_milli / episode.capacity_milli
            eligible = [
                j
                for j, placement in enumerate(played.placements)
                if placement is not None
                and args.low <= arrived[j] <= args.high
                and played.feasible[j].size > 1
            ]
            picks = rng.choice(
                len(eligible), size=min(len(eligible), args.decisions_per_episode), replace=False
            )
            tasks.extend(
                BranchTask(spec, eligible[k], args.branches, args.anchors, int(rng.integers(1 << 31)))
                for k in sorted(picks)
            )
    return tasks


# ---- fitting ----------------------------------------------------------------------


def best_branch_target(outcomes: torch.Tensor) -> torch.Tensor:
    """The target distribution over branched candidates: the best ones share it."""
    best = (outcomes >= outcomes.max() - 1e-9).to(torch.float32)
    return best / best.sum()


def rollout_loss(
    logits: torch.Tensor,
    old_logits: torch.Tensor,
    target: torch.Tensor,
    sizes: list[int],
    temperature: float,
    anchor_weight: float,
) -> torch.Tensor:
    """Cross-entropy to the best branches, plus staying near the old logits elsewhere."""
    losses = []
    offset = 0
    for size in sizes:
        part = slice(offset, offset + size)
        offset += size
        branched = ~torch.isnan(target[part])
        scores = logits[part][branched] / temperature
        wanted = best_branch_target(target[part][branched])
        losses.append(-(wanted * torch.log_softmax(scores, dim=0)).sum())
    cross_entropy = torch.stack(losses).mean()
    anchored = torch.isnan(target)
    anchor = torch.nn.functional.mse_loss(logits[anchored], old_logits[anchored]) if anchored.any() else 0.0
    return cross_entropy + anchor_weight * anchor


def fit(
    model: NodeScorer,
    samples: list[Sample],
    args: RolloutArgs,
    rng: np.random.Generator,
    writer: SummaryWriter,
    bar: tqdm[Any],
) -> float:
    start = copy.deepcopy(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate)
    loss_value = float("nan")
    step = 0
    for epoch in range(args.epochs):
        order = rng.permutation(len(samples))
        losses = []
        for first in range(0, len(order), args.batch_size):
            batch = [samples[i] for i in order[first : first + args.batch_size]]
            node_x, edges, candidates, pair_x, pod_x, target = collate(batch)
            logits = model.head_logits(model.embed(node_x, edges)[candidates], pair_x, pod_x)
            with torch.no_grad():
                old = start.head_logits(start.embed(node_x, edges)[candidates], pair_x, pod_x)
            sizes = [s.candidates.size for s in batch]
            loss = rollout_loss(logits, old, target, sizes, args.temperature, args.anchor_weight)
            optimizer.zero_grad()
            loss.backward()  # type: ignore[no-untyped-call]
            optimizer.step()
            losses.append(loss.item())
            writer.add_scalar("losses/rollout", loss.item(), step)
            step += 1
        loss_value = float(np.mean(losses))
        writer.add_scalar("losses/rollout_epoch", loss_value, epoch)
        bar.set_postfix(loss=f"{loss_value:.4f}")
        bar.update(1)
    return loss_value


def has_lesson(sample: Sample) -> bool:
    outcomes = sample.target[~np.isnan(sample.target)]
    return bool(outcomes.size > 1 and outcomes.max() - outcomes.min() > 1e-9)


def main(args: RolloutArgs) -> Path:
    """Branch, fit, save; returns the checkpoint folder."""
    started = time.time()
    rng, writer = start_training(args.seed, args.out)
    tasks = branch_tasks(args, rng)
    with (
        tqdm(total=len(tasks), desc="branched decisions", disable=args.quiet) as bar,
        task_pool(Workers(args.workers, args.ray_address)) as pool,
    ):
        results = pool.map_reporting(branch_reporting, tasks, _advance(bar))
    samples = [r.sample for r in results if has_lesson(r.sample)]
    gains = [r.best_outcome - r.teacher_outcome for r in results]
    writer.add_scalar("charts/decisions_with_a_lesson", len(samples), 0)
    checkpoint = load_checkpoint(args.init)
    model = checkpoint.model
    model.train()
    with tqdm(total=args.epochs, desc="rollout epochs", disable=args.quiet) as bar:
        final_loss = fit(model, samples, args, rng, writer, bar) if samples else float("nan")
    model.eval()
    seconds = time.time() - started
    return finish_training(
        writer,
        model,
        args.out,
        {
            "stage": "rollout",
            "base_policy": "fgd-reserve",
            "init": dict(checkpoint.manifest.get("training") or {}),
            "traces": list(args.traces),
            "episode_seeds": [args.seed * 1000 + i for i in range(args.episodes_per_trace)],
            "node_fraction": args.node_fraction,
            "decisions_branched": len(results),
            "decisions_with_a_lesson": len(samples),
            "branches": args.branches,
            "mean_best_branch_gain_points": float(np.mean(gains)) if gains else 0.0,
            "epochs": args.epochs,
            "final_loss": None if np.isnan(final_loss) else final_loss,
            "seconds": round(seconds, 1),
        },
    )
