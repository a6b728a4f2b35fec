"""DQN with action masking over the scheduling environment (CleanRL's dqn.py shape).

Read top to bottom: arguments, seeding, the Q-network (a fresh ``NodeScorer`` of any
kind whose logits are Q-values: no FGD prior, no reserve term, no rounding), the
replay buffer, epsilon-greedy exploration decaying linearly over
``exploration_fraction`` of the steps, the TD update against a target network
(Huber loss; the next decision's best feasible Q, zero at the end of an episode),
the target network's soft or hard update, TensorBoard logging under ``charts/`` and
``losses/``, the checkpoint. The reward is the environment's (``env.py``): minus the
GPUs of the pods that fail before the next decision.

This is a baseline from the seed projects' algorithm family; the shipped profile's
training is described in docs/training.md.
"""

from __future__ import annotations

import copy
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch_geometric.utils import scatter
from tqdm import tqdm

from scheduler.learn.env import SchedulingEnv
from scheduler.learn.options import DqnArgs
from scheduler.learn.ppo import Episodes, Step, logits_and_values, observed
from scheduler.learn.seeding import finish_training, start_training
from scheduler.policy.config import ScorerConfig
from scheduler.policy.model import NodeScorer


@dataclass
class Transition:
    state: Step  # its ``action`` is the position taken among its candidates
    reward: float
    following: Step | None  # the next decision; None at the end of an episode


def q_network(args: DqnArgs, nodes: int) -> NodeScorer:
    """A Q-network of ``args.kind``: its logits are the Q-values themselves."""
    fixed = args.kind in ("flat-mlp", "pooled-gnn")
    config = ScorerConfig(
        kind=args.kind,
        prior_weight=0.0,
        reserve_term=False,
        score_step=0.0,
        max_nodes=nodes if fixed else 0,
    )
    return NodeScorer(config)


def epsilon(args: DqnArgs, step: int) -> float:
    """Linear decay from ``start_e`` to ``end_e`` over ``exploration_fraction`` of the run."""
    duration = max(1.0, args.exploration_fraction * args.total_steps)
    slope = (args.end_e - args.start_e) / duration
    return max(args.end_e, args.start_e + slope * step)


def td_targets(target: NodeScorer, batch: list[Transition], gamma: float) -> torch.Tensor:
    """r + gamma * max over the next decision's feasible nodes of the target's Q."""
    rewards = torch.tensor([t.reward for t in batch], dtype=torch.float32)
    following = [(i, t.following) for i, t in enumerate(batch) if t.following is not None]
    best = torch.zeros(len(batch))
    if following:
        with torch.no_grad():
            q, _ = logits_and_values(target, [s for _, s in following])
        index = torch.from_numpy(
            np.concatenate([np.full(s.candidates.size, k) for k, (_, s) in enumerate(following)])
        )
        maxima = scatter(q, index, dim=0, dim_size=len(following), reduce="max")
        best[torch.tensor([i for i, _ in following])] = maxima
    return rewards + gamma * best


def taken_q(model: NodeScorer, batch: list[Transition]) -> torch.Tensor:
    q, _ = logits_and_values(model, [t.state for t in batch])
    starts = np.concatenate([[0], np.cumsum([t.state.candidates.size for t in batch])[:-1]])
    return q[torch.from_numpy(starts + np.array([t.state.action for t in batch]))]


def soft_update(target: NodeScorer, online: NodeScorer, tau: float) -> None:
    with torch.no_grad():
        for kept, learned in zip(target.parameters(), online.parameters(), strict=True):
            kept.copy_(tau * learned + (1.0 - tau) * kept)


def main(args: DqnArgs) -> Path:
    started = time.time()
    rng, writer = start_training(args.seed, args.out)

    env = SchedulingEnv(args.traces, args.node_fraction, args.frag_coef)
    episodes = Episodes(env, writer, args.seed * 1000)
    observation, info = episodes.first()
    model = q_network(args, observation["nodes"].shape[0])
    target = copy.deepcopy(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate)
    buffer: deque[Transition] = deque(maxlen=args.buffer_size)

    loss_value = float("nan")
    with tqdm(total=args.total_steps, desc="DQN decisions", disable=args.quiet) as bar:
        for global_step in range(args.total_steps):
            step = observed(observation, info)
            if rng.random() < epsilon(args, global_step):
                step.action = int(rng.integers(step.candidates.size))
            else:
                with torch.no_grad():
                    q, _ = logits_and_values(model, [step])
                step.action = int(torch.argmax(q))
            observation, reward, done, info = episodes.step(int(step.candidates[step.action]), global_step)
            # At an episode's end the observation is the next episode's: no successor.
            buffer.append(Transition(step, reward, None if done else observed(observation, info)))
            bar.update(1)

            if global_step >= args.learning_starts and global_step % args.train_frequency == 0:
                picks = rng.choice(len(buffer), size=min(args.batch_size, len(buffer)), replace=False)
                batch = [buffer[i] for i in picks]
                loss = torch.nn.functional.smooth_l1_loss(
                    taken_q(model, batch), td_targets(target, batch, args.gamma)
                )
                optimizer.zero_grad()
                loss.backward()  # type: ignore[no-untyped-call]
                optimizer.step()
                loss_value = loss.item()
                if global_step % 100 == 0:
                    writer.add_scalar("losses/td_loss", loss_value, global_step)
                    writer.add_scalar("charts/epsilon", epsilon(args, global_step), global_step)
            if global_step % args.target_network_frequency == 0:
                soft_update(target, model, args.tau)
    return finish_training(
        writer,
        model,
        args.out,
        {
            "stage": "dqn",
            "kind": args.kind,
            "traces": list(args.traces),
            "node_fraction": args.node_fraction,
            "first_episode_seed": args.seed * 1000,
            "episodes_finished": episodes.finished,
            "decisions": args.total_steps,
            "final_td_loss": None if np.isnan(loss_value) else loss_value,
            "seconds": round(time.time() - started, 1),
        },
    )
