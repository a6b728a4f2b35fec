"""Rollout improvement: branches are exact, the loss wants the best branch, and the
stage writes a checkpoint that schedules."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from scheduler.learn import rollout
from scheduler.learn.episode import EpisodeSpec, make_episode, run_episode
from scheduler.learn.options import RolloutArgs
from scheduler.learn.torch_score import torch_profile
from scheduler.parallel import Workers, task_pool
from scheduler.plugins.registry import ProfileContext
from scheduler.policy.checkpoint import load_checkpoint
from tests.policy.test_plugin import write_trace

NAN = math.nan


def tiny_args(pods: Path, out: Path) -> RolloutArgs:
    return RolloutArgs(
        traces=(str(pods),),
        episodes_per_trace=1,
        node_fraction=0.02,
        decisions_per_episode=4,
        low=0.0,
        high=200.0,
        branches=3,
        anchors=2,
        epochs=2,
        batch_size=2,
        workers=1,
        out=out,
        quiet=True,
    )


def test_the_first_branch_replays_the_teacher_and_none_is_worse_than_the_best(tmp_path: Path) -> None:
    pods, _ = write_trace(tmp_path)
    args = tiny_args(pods, tmp_path / "rollout")
    tasks = rollout.branch_tasks(args, np.random.default_rng(0))
    assert tasks
    episode, played = rollout.teacher_episode(tasks[0].spec)
    teacher = rollout.fitness(episode, played.allocated)
    for task in tasks:
        result = rollout.branch(task)
        outcomes = result.sample.target[~np.isnan(result.sample.target)]
        assert result.teacher_outcome == pytest.approx(teacher)
        assert outcomes.size == min(args.branches, played.feasible[task.index].size)
        assert result.best_outcome == pytest.approx(float(outcomes.max()))
        assert result.best_outcome >= result.teacher_outcome


def test_a_branch_decides_only_its_own_arrival(tmp_path: Path) -> None:
    """Forcing the teacher's own node reproduces the teacher's play exactly."""
    pods, _ = write_trace(tmp_path)
    episode = make_episode(EpisodeSpec(str(pods), 3, 0.02))
    played = rollout.teacher_episode(episode.spec)[1]
    index = next(i for i, p in enumerate(played.placements) if p is not None and i > 5)
    state = rollout.state_before(episode, played, index)
    placement = played.placements[index]
    assert placement is not None
    node = state.node_names.index(placement.node)
    before = int(played.allocated[index - 1])
    teacher = rollout.ReserveScore(episode.typical)
    tail = rollout.play(episode, state, index, before, rollout.Forced(teacher, node))
    assert tail.placements == played.placements[index:]
    assert np.array_equal(tail.allocated, played.allocated[index:])


@pytest.mark.parametrize(
    ("outcomes", "wanted"),
    [
        ([95.0, 96.0, 95.5], [0.0, 1.0, 0.0]),
        ([96.0, 96.0, 95.0], [0.5, 0.5, 0.0]),
        ([90.0, 90.0, 90.0, 90.0], [0.25, 0.25, 0.25, 0.25]),
    ],
)
def test_the_best_branches_share_the_target(outcomes: list[float], wanted: list[float]) -> None:
    target = rollout.best_branch_target(torch.tensor(outcomes, dtype=torch.float64))
    assert target.tolist() == pytest.approx(wanted)


@pytest.mark.parametrize(
    ("logits", "lower_than"),
    [
        # The same anchors, the best branch (index 1) scored higher: less loss.
        ([0.0, 5.0, 0.0, 3.0], [5.0, 0.0, 0.0, 3.0]),
        # The same branches, an anchor moved from its old score (3): more loss.
        ([5.0, 0.0, 0.0, 3.0], [5.0, 0.0, 0.0, 9.0]),
    ],
)
def test_the_loss_prefers_the_best_branch_and_still_anchors(
    logits: list[float], lower_than: list[float]
) -> None:
    target = torch.tensor([95.0, 96.0, 95.5, NAN])  # the last candidate is an anchor
    old = torch.tensor([5.0, 0.0, 0.0, 3.0])

    def loss(values: list[float]) -> float:
        return float(rollout.rollout_loss(torch.tensor(values), old, target, [4], 1.0, 1.0))

    assert loss(logits) < loss(lower_than)


def test_rollout_writes_a_checkpoint_that_schedules(tmp_path: Path) -> None:
    pods, _ = write_trace(tmp_path)
    trained = rollout.main(tiny_args(pods, tmp_path / "rollout"))
    loaded = load_checkpoint(trained)
    training = loaded.manifest["training"]
    assert (training["stage"], training["decisions_branched"]) == ("rollout", 4)
    assert 0 <= training["decisions_with_a_lesson"] <= 4
    assert training["mean_best_branch_gain_points"] >= 0
    episode = make_episode(EpisodeSpec(str(pods), seed=7, node_fraction=0.02))
    profile = torch_profile(ProfileContext(typical_pods=episode.typical), trained)
    assert run_episode(episode, profile).saturation_allocation() > 0


def test_local_processes_branch_the_same_decisions_to_the_same_outcomes(tmp_path: Path) -> None:
    pods, _ = write_trace(tmp_path)
    tasks = rollout.branch_tasks(tiny_args(pods, tmp_path / "rollout"), np.random.default_rng(0))
    here = [rollout.branch(task) for task in tasks]
    with task_pool(Workers(processes=2)) as pool:
        spawned = pool.map(rollout.branch, tasks)
    for mine, theirs in zip(here, spawned, strict=True):
        assert np.array_equal(mine.sample.candidates, theirs.sample.candidates)
        assert np.array_equal(mine.sample.target, theirs.sample.target, equal_nan=True)
        assert np.array_equal(mine.sample.node_x, theirs.sample.node_x)
