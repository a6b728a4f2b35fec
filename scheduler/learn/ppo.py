"""PPO with action masking over the scheduling environment (CleanRL's ppo.py shape).

Read top to bottom: arguments, seeding, the actor-critic (a ``NodeScorer`` with a
value head; the actor's logits over the feasible nodes divided by a temperature),
the rollout loop, GAE, the clipped update, TensorBoard logging under ``charts/``
and ``losses/``, the checkpoint. Each decision is its own graph; for the per-node
kinds (gnn, mlp) a minibatch is their disjoint union, for the seed projects' fixed
action lists (flat-mlp, pooled-gnn) one forward pass per decision; either way a
softmax per decision over its feasible nodes.

This is the honest-comparison path (and the seed projects' algorithm family); on two
cores the shipped policy is trained by imitation and ES instead (``es.py``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch.utils.tensorboard import SummaryWriter
from torch_geometric.nn import global_mean_pool
from torch_geometric.utils import scatter
from torch_geometric.utils import softmax as grouped_softmax
from tqdm import tqdm

from scheduler.learn.env import Observation, SchedulingEnv
from scheduler.learn.options import PpoArgs
from scheduler.learn.seeding import finish_training, start_training
from scheduler.policy.checkpoint import load_checkpoint
from scheduler.policy.config import PER_NODE_KINDS, SCORER_KINDS, ScorerConfig
from scheduler.policy.model import NodeScorer


@dataclass
class Step:
    node_x: npt.NDArray[np.float32]
    edge_index: npt.NDArray[np.int64]
    candidates: npt.NDArray[np.int64]
    pair_x: npt.NDArray[np.float32]
    pod_x: npt.NDArray[np.float32]
    action: int  # position in candidates
    logprob: float
    value: float
    reward: float = 0.0
    done: bool = False


@dataclass
class Episodes:
    """A training run's episodes, one after another, seeded from ``seed`` up: each
    one's return is summed, and logged with its allocation when it ends."""

    env: SchedulingEnv
    writer: SummaryWriter
    seed: int
    finished: int = 0
    episode_return: float = 0.0

    def first(self) -> tuple[Observation, dict[str, Any]]:
        return self.env.reset(seed=self.seed)

    def step(self, node: int, global_step: int) -> tuple[Observation, float, bool, dict[str, Any]]:
        """``env.step(node)`` as (observation, reward, done, info). At an episode's end
        it is logged at ``global_step`` and the next episode's first decision comes back."""
        observation, reward, terminated, truncated, info = self.env.step(node)
        self.episode_return += reward
        done = terminated or truncated
        if done:
            self.writer.add_scalar("charts/episodic_return", self.episode_return, global_step)
            self.writer.add_scalar("charts/allocated_percent", info["allocated_percent"], global_step)
            self.finished += 1
            self.seed += 1
            self.episode_return = 0.0
            observation, info = self.env.reset(seed=self.seed)
        return observation, float(reward), done, info


def observed(observation: Observation, info: dict[str, Any]) -> Step:
    """The decision the environment asks for, as a step with no action taken yet."""
    candidates = info["candidates"]
    return Step(
        observation["nodes"],
        info["edge_index"],
        candidates,
        observation["pairs"][candidates],
        observation["pod"],
        0,
        0.0,
        0.0,
    )


def per_node_logits_and_values(model: NodeScorer, steps: list[Step]) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-node kinds (gnn, mlp): the batch as one disjoint union of graphs; each
    candidate's logit from its own embedding, each decision's value from the mean of its
    graph's embeddings and the pod."""
    offset, node_x, edges, candidates, pair_x, pod_rows, pod_x, graph = 0, [], [], [], [], [], [], []
    for i, step in enumerate(steps):
        node_x.append(step.node_x)
        edges.append(step.edge_index + offset)
        candidates.append(step.candidates + offset)
        pair_x.append(step.pair_x)
        pod_rows.append(np.broadcast_to(step.pod_x, (step.candidates.size, step.pod_x.size)))
        pod_x.append(step.pod_x)
        graph.append(np.full(step.node_x.shape[0], i))
        offset += step.node_x.shape[0]
    x = torch.from_numpy(np.concatenate(node_x))
    edge_index = torch.from_numpy(np.concatenate(edges, axis=1))
    embedding = model.embed(x, edge_index)
    logits = model.head_logits(
        embedding[torch.from_numpy(np.concatenate(candidates))],
        torch.from_numpy(np.concatenate(pair_x)),
        torch.from_numpy(np.concatenate(pod_rows)),
    )
    if model.value is None:  # a Q-network (DQN): logits only
        return logits, torch.zeros(0)
    pooled = global_mean_pool(embedding, torch.from_numpy(np.concatenate(graph)))
    values = model.value(torch.cat([pooled, torch.from_numpy(np.stack(pod_x))], dim=1)).squeeze(1)
    return logits, values


def fixed_action_logits_and_values(model: NodeScorer, steps: list[Step]) -> tuple[torch.Tensor, torch.Tensor]:
    """The seed designs (flat-mlp, pooled-gnn): the whole cluster maps to one logit per
    node position, so each decision is its own forward pass; candidates past
    ``max_nodes`` get -1e9 (``NodeScorer.forward``)."""
    logits, values = [], []
    for step in steps:
        node_x, edges = torch.from_numpy(step.node_x), torch.from_numpy(step.edge_index)
        pod_x = torch.from_numpy(step.pod_x)
        candidates = torch.from_numpy(step.candidates)
        logits.append(model(node_x, edges, candidates, torch.from_numpy(step.pair_x), pod_x))
        if model.value is not None:
            values.append(model.state_value(node_x, edges, pod_x))
    return torch.cat(logits), torch.stack(values) if values else torch.zeros(0)


def logits_and_values(model: NodeScorer, steps: list[Step]) -> tuple[torch.Tensor, torch.Tensor]:
    """Every decision's candidate logits, concatenated, and its value (none without a
    value head), for any kind."""
    per_node = model.config.kind in PER_NODE_KINDS
    forward = per_node_logits_and_values if per_node else fixed_action_logits_and_values
    return forward(model, steps)


def forward_batch(
    model: NodeScorer, steps: list[Step], temperature: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Log-probabilities of the taken actions, entropies, values, logits of a batch."""
    raw, values = logits_and_values(model, steps)
    logits = raw / temperature
    index = torch.from_numpy(np.concatenate([np.full(s.candidates.size, i) for i, s in enumerate(steps)]))
    probs = grouped_softmax(logits, index)
    logp = torch.log(probs + 1e-12)
    entropy = scatter(-probs * logp, index, dim=0, dim_size=len(steps), reduce="sum")
    starts = np.concatenate([[0], np.cumsum([s.candidates.size for s in steps])[:-1]])
    taken = torch.from_numpy(starts + np.array([s.action for s in steps]))
    return logp[taken], entropy, values, logits


def main(args: PpoArgs) -> Path:  # noqa: PLR0915 - one readable script, as CleanRL writes it
    started = time.time()
    rng, writer = start_training(args.seed, args.out)

    env = SchedulingEnv(args.traces, args.node_fraction, args.frag_coef)
    if args.init is not None:
        loaded = load_checkpoint(args.init).model
        config = ScorerConfig(**{**loaded.config.to_json(), "value_head": True})
        model = NodeScorer(config)
        model.load_state_dict(loaded.state_dict(), strict=False)
    else:
        if args.kind not in SCORER_KINDS:
            raise ValueError(f"kind {args.kind!r}: expected one of {', '.join(SCORER_KINDS)}")
        observation, info = env.reset(seed=args.seed)
        nodes = observation["nodes"].shape[0]
        fixed = args.kind in ("flat-mlp", "pooled-gnn")
        config = ScorerConfig(kind=args.kind, value_head=True, max_nodes=nodes if fixed else 0)
        model = NodeScorer(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate, eps=1e-5)

    episodes = Episodes(env, writer, args.seed * 1000)
    observation, info = episodes.first()
    updates = max(1, args.total_steps // args.num_steps)
    global_step = 0
    with tqdm(total=updates * args.num_steps, desc="PPO decisions", disable=args.quiet) as bar:
        for update in range(updates):
            rollout: list[Step] = []
            for _ in range(args.num_steps):
                candidates = info["candidates"]
                step = observed(observation, info)
                with torch.no_grad():
                    _, _, value, logits = forward_batch(model, [step], args.temperature)
                    probs = torch.softmax(logits, dim=0).numpy().astype(np.float64)
                position = int(rng.choice(candidates.size, p=probs / probs.sum()))
                step.action, step.logprob, step.value = (
                    position,
                    float(np.log(probs[position] + 1e-12)),
                    float(value),
                )
                global_step += 1
                observation, step.reward, step.done, info = episodes.step(
                    int(candidates[position]), global_step
                )
                rollout.append(step)
                bar.update(1)

            # GAE over the rollout; the value of the state after the last step bootstraps.
            with torch.no_grad():
                if info["candidates"].size:
                    tail = observed(observation, info)
                    next_value = float(forward_batch(model, [tail], args.temperature)[2][0])
                else:
                    next_value = 0.0
            advantages = np.zeros(len(rollout))
            last = 0.0
            for t in reversed(range(len(rollout))):
                following = next_value if t == len(rollout) - 1 else rollout[t + 1].value
                alive = 0.0 if rollout[t].done else 1.0
                delta = rollout[t].reward + args.gamma * following * alive - rollout[t].value
                last = delta + args.gamma * args.gae_lambda * alive * last
                advantages[t] = last
            returns = advantages + np.array([s.value for s in rollout])

            for _ in range(args.update_epochs):
                order = rng.permutation(len(rollout))
                for start in range(0, len(order), args.minibatch_size):
                    chosen = order[start : start + args.minibatch_size]
                    batch = [rollout[i] for i in chosen]
                    logp, entropy, values, _ = forward_batch(model, batch, args.temperature)
                    old = torch.tensor([s.logprob for s in batch], dtype=torch.float32)
                    adv = torch.tensor(advantages[chosen], dtype=torch.float32)
                    adv = (adv - adv.mean()) / (adv.std() + 1e-8) if adv.numel() > 1 else adv
                    ratio = torch.exp(logp - old)
                    pg_loss = torch.max(
                        -adv * ratio, -adv * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)
                    ).mean()
                    v_loss = 0.5 * ((values - torch.tensor(returns[chosen], dtype=torch.float32)) ** 2).mean()
                    loss = pg_loss - args.ent_coef * entropy.mean() + args.vf_coef * v_loss
                    optimizer.zero_grad()
                    loss.backward()  # type: ignore[no-untyped-call]
                    torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                    optimizer.step()
            writer.add_scalar("losses/policy_loss", pg_loss.item(), global_step)
            writer.add_scalar("losses/value_loss", v_loss.item(), global_step)
            writer.add_scalar("losses/entropy", entropy.mean().item(), global_step)
            writer.add_scalar("charts/steps_per_second", global_step / (time.time() - started), global_step)
            writer.add_scalar("charts/update", update, global_step)
    return finish_training(
        writer,
        model,
        args.out,
        {
            "stage": "ppo",
            "traces": list(args.traces),
            "node_fraction": args.node_fraction,
            "first_episode_seed": args.seed * 1000,
            "episodes_finished": episodes.finished,
            "decisions": global_step,
            "seconds": round(time.time() - started, 1),
        },
    )
