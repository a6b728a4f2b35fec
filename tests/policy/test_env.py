"""The Gymnasium environment: seeded episodes repeat exactly; the mask is the filters'."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scheduler.learn.env import SchedulingEnv
from tests.policy.test_plugin import write_trace


def play(env: SchedulingEnv, seed: int, steps: int) -> tuple[list[int], list[float], list[bytes]]:
    observation, info = env.reset(seed=seed)
    actions, rewards, seen = [], [], [observation["nodes"].tobytes()]
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        action = int(rng.choice(info["candidates"]))
        observation, reward, terminated, truncated, info = env.step(action)
        actions.append(action)
        rewards.append(reward)
        seen.append(observation["nodes"].tobytes() + observation["pairs"].tobytes())
        if terminated or truncated:
            break
    return actions, rewards, seen


def test_the_same_seed_gives_the_same_episode(tmp_path: Path) -> None:
    pods, _ = write_trace(tmp_path)
    env = SchedulingEnv([str(pods)], node_fraction=0.02)
    first = play(env, 7, 30)
    again = play(SchedulingEnv([str(pods)], node_fraction=0.02), 7, 30)
    assert first == again
    other = play(env, 8, 30)
    assert other != first


def test_the_mask_marks_exactly_the_feasible_nodes_and_others_are_refused(tmp_path: Path) -> None:
    pods, _ = write_trace(tmp_path)
    env = SchedulingEnv([str(pods)], node_fraction=0.02)
    observation, info = env.reset(seed=3)
    mask = info["action_mask"]
    assert mask.dtype == np.bool_
    assert mask.shape == (observation["nodes"].shape[0],)
    assert np.flatnonzero(mask).tolist() == info["candidates"].tolist()
    assert not observation["pairs"][~mask].any()  # infeasible nodes carry no pair features
    if (~mask).any():
        with pytest.raises(ValueError, match="not feasible"):
            env.step(int(np.flatnonzero(~mask)[0]))


def test_rewards_sum_to_minus_the_failed_gpus(tmp_path: Path) -> None:
    pods, _ = write_trace(tmp_path)
    env = SchedulingEnv([str(pods)], node_fraction=0.02)
    _, info = env.reset(seed=5)
    failed = info["failed_gpus"]
    total, done = 0.0, False
    while not done:
        _, reward, terminated, truncated, info = env.step(int(info["candidates"][0]))
        total += reward
        done = terminated or truncated
    arrived, allocated = info["arrived_percent"], info["allocated_percent"]
    capacity = env.episode.capacity_milli / 1000  # type: ignore[union-attr]
    assert total - failed == pytest.approx((allocated - arrived) / 100 * capacity, abs=1e-6)
