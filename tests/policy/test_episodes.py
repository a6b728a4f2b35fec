"""``ppo.Episodes``: PPO's and DQN's episodes, one after another, each seeded, summed
and logged when it ends (a scripted environment and writer: pure bookkeeping)."""

from __future__ import annotations

from typing import Any, cast

from torch.utils.tensorboard import SummaryWriter

from scheduler.learn.env import SchedulingEnv
from scheduler.learn.ppo import Episodes


class TwoStepEnv:
    """Every episode is two decisions, rewarded 1.0 then 2.0."""

    def __init__(self) -> None:
        self.seeds: list[int] = []
        self.steps = 0

    def reset(self, seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
        self.seeds.append(seed)
        self.steps = 0
        return {"episode": seed, "step": 0}, {}

    def step(self, node: int) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        self.steps += 1
        ended = self.steps == 2
        observation = {"episode": self.seeds[-1], "step": self.steps, "node": node}
        return observation, float(self.steps), ended, False, {"allocated_percent": 50.0 + node}


class Scalars:
    def __init__(self) -> None:
        self.logged: list[tuple[str, float, int]] = []

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        self.logged.append((tag, value, step))


def test_episodes_are_seeded_in_turn_summed_and_logged_at_their_end() -> None:
    env, writer = TwoStepEnv(), Scalars()
    episodes = Episodes(cast(SchedulingEnv, env), cast(SummaryWriter, writer), seed=7000)
    assert episodes.first() == ({"episode": 7000, "step": 0}, {})
    seen = [episodes.step(node, global_step) for global_step, node in enumerate([3, 4, 5, 6, 7], start=1)]
    # Each end comes back done, with the next episode's first observation.
    assert [(obs, reward, done) for obs, reward, done, _ in seen] == [
        ({"episode": 7000, "step": 1, "node": 3}, 1.0, False),
        ({"episode": 7001, "step": 0}, 2.0, True),
        ({"episode": 7001, "step": 1, "node": 5}, 1.0, False),
        ({"episode": 7002, "step": 0}, 2.0, True),
        ({"episode": 7002, "step": 1, "node": 7}, 1.0, False),
    ]
    assert env.seeds == [7000, 7001, 7002]
    assert (episodes.finished, episodes.episode_return) == (2, 1.0)
    assert writer.logged == [
        ("charts/episodic_return", 3.0, 2),
        ("charts/allocated_percent", 54.0, 2),
        ("charts/episodic_return", 3.0, 4),
        ("charts/allocated_percent", 56.0, 4),
    ]
