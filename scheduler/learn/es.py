"""Evolution strategies on the terminal allocation (OpenAI-ES, antithetic, ranked).

Read top to bottom. PPO needs ~10^4 decisions per episode and many episodes to
assign credit for a failure that happens thousands of pods after the placement that
caused it; on two cores that does not converge in the time budget. ES instead scores
a whole parameter vector by what matters, the GPU allocated once the cluster is
saturated (mean allocation over the pod events with 95-130% of capacity arrived),
and moves the parameters along the ranked, antithetic estimate of its gradient.

What moves: the reserve term (base, pressure slope, three pod-kind offsets, price per
core) and the head's last layer, each perturbed on its own scale. The GNN and the
head's hidden layer stay as imitation left them. Every member of a generation plays
the same episodes (common random numbers); episodes change every generation. Members play
in local processes, or on a Ray cluster with ``--ray-address`` (the same numbers: the
noise and the episodes are drawn here, each task is a parameter vector and an episode).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import torch
from torch import nn
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from scheduler.learn.episode import EpisodeSpec, make_episode, run_episode
from scheduler.learn.options import EsArgs
from scheduler.learn.seeding import finish_training
from scheduler.objects.pod import Pod
from scheduler.parallel import Workers, task_pool
from scheduler.policy.checkpoint import load_checkpoint
from scheduler.policy.model import NodeScorer, numpy_scorer
from scheduler.policy.plugin import GnnScore, model_profile
from scheduler.state.cluster_state import ClusterState
from scheduler.state.fragmentation import TypicalPods

FloatArray = npt.NDArray[np.float64]
STD_PODS = 20  # arrivals the hidden units' std is measured on


# ---- the parameter vector ----------------------------------------------------------


def trainable(model: NodeScorer) -> list[torch.Tensor]:
    last = cast(nn.Linear, model.head[-1])
    params: list[torch.Tensor] = []
    if model.reserve is not None:
        params += [model.reserve.reserve, model.reserve.weight]
    params += [last.weight, last.bias]
    return params


def get_vector(model: NodeScorer) -> FloatArray:
    return np.concatenate([p.detach().numpy().reshape(-1) for p in trainable(model)]).astype(np.float64)


def set_vector(model: NodeScorer, vector: FloatArray) -> None:
    offset = 0
    with torch.no_grad():
        for p in trainable(model):
            size = p.numel()
            p.copy_(torch.from_numpy(vector[offset : offset + size].reshape(p.shape)).to(p.dtype))
            offset += size


def scales(model: NodeScorer, args: EsArgs, hidden_std: float) -> FloatArray:
    parts: list[FloatArray] = []
    if model.reserve is not None:
        parts.append(np.array(args.reserve_scale, np.float64))
    last = cast(nn.Linear, model.head[-1])
    parts.append(
        np.full(last.weight.numel(), args.head_scale / max(hidden_std, 1e-3) / np.sqrt(last.weight.numel()))
    )
    parts.append(np.array([args.head_scale]))
    return np.concatenate(parts)


# ---- workers ----------------------------------------------------------------------

_WORKER: dict[str, Any] = {}


def _init_worker(checkpoint: str) -> None:
    torch.set_num_threads(1)
    _WORKER["model"] = load_checkpoint(Path(checkpoint)).model


def episode_fitness(model: NodeScorer, spec: EpisodeSpec) -> float:
    """The fitness: ``model``'s saturation allocation on the episode ``spec``."""
    episode = make_episode(spec)
    profile = model_profile(GnnScore(numpy_scorer(model), episode.typical))
    return run_episode(episode, profile).saturation_allocation()


def _fitness(task: tuple[FloatArray, EpisodeSpec]) -> float:
    vector, spec = task
    model: NodeScorer = _WORKER["model"]
    set_vector(model, vector)
    return episode_fitness(model, spec)


def hidden_activation_std(
    model: NodeScorer, typical: TypicalPods, state: ClusterState, pods: Sequence[Pod]
) -> float:
    """Std of the head's hidden units over every node of ``state`` for each of ``pods``
    (sets the scale of the last layer's perturbations; the online tuning measures it on
    the twin the same way)."""
    plugin = GnnScore(numpy_scorer(model), typical)
    nodes = np.arange(len(state), dtype=np.int64)
    embedding = plugin.cached.embeddings(state)
    rows = []
    for pod in pods:
        pair_x, _ = plugin.builder.pair_features(state, pod, nodes)
        pod_x = plugin.builder.pod_features(pod, state)
        rows.append(plugin.cached.scorer.head_hidden(embedding, pair_x, pod_x))
    return float(np.concatenate(rows).std())


def episode_activation_std(model: NodeScorer, spec: EpisodeSpec) -> float:
    """``hidden_activation_std`` on a trace episode's first arrivals."""
    episode = make_episode(spec)
    return hidden_activation_std(model, episode.typical, episode.fresh_state(), episode.arrivals[:STD_PODS])


@dataclass
class Adam:
    learning_rate: float
    beta1: float = 0.9
    beta2: float = 0.999
    m: FloatArray = field(default_factory=lambda: np.zeros(0))
    v: FloatArray = field(default_factory=lambda: np.zeros(0))
    t: int = 0

    def step(self, gradient: FloatArray) -> FloatArray:
        if self.m.size != gradient.size:
            self.m, self.v = np.zeros_like(gradient), np.zeros_like(gradient)
        self.t += 1
        self.m = self.beta1 * self.m + (1 - self.beta1) * gradient
        self.v = self.beta2 * self.v + (1 - self.beta2) * gradient**2
        m_hat = self.m / (1 - self.beta1**self.t)
        v_hat = self.v / (1 - self.beta2**self.t)
        update: FloatArray = self.learning_rate * m_hat / (np.sqrt(v_hat) + 1e-8)
        return update


def centered_ranks(values: FloatArray) -> FloatArray:
    ranks = np.empty(values.size)
    ranks[np.argsort(values, kind="stable")] = np.arange(values.size)
    return ranks / max(values.size - 1, 1) - 0.5


def main(args: EsArgs, log_dir: Path | None = None) -> Path:
    """Run ES from ``args.init``; returns the checkpoint folder. TensorBoard logs go to
    ``log_dir`` (default ``args.out / "tensorboard"``)."""
    started = time.time()
    rng = np.random.default_rng(args.seed)
    torch.set_num_threads(1)
    writer = SummaryWriter(str(log_dir or args.out / "tensorboard"))
    init = load_checkpoint(args.init)
    model = init.model
    theta = get_vector(model)
    std = episode_activation_std(model, EpisodeSpec(args.traces[0], args.seed, args.node_fraction))
    scale = scales(model, args, std)
    optimizer = Adam(args.learning_rate)
    history: list[dict[str, Any]] = []

    workers = Workers(args.workers, args.ray_address)
    with (
        task_pool(workers, _init_worker, (str(args.init.resolve()),)) as pool,
        tqdm(total=args.generations, desc="ES generations", disable=args.quiet) as bar,
    ):
        for generation in range(args.generations):
            specs = [
                EpisodeSpec(trace, int(rng.integers(1_000_000)), args.node_fraction)
                for trace in args.traces
                for _ in range(args.episodes_per_trace)
            ]
            noise = rng.standard_normal((args.pairs, theta.size))
            members = [theta + sign * args.sigma * scale * eps for eps in noise for sign in (1.0, -1.0)]
            tasks = [(member, spec) for member in [theta, *members] for spec in specs]
            fitness = np.array(pool.map(_fitness, tasks)).reshape(len(members) + 1, len(specs))
            center, population = fitness[0], fitness[1:]
            # Rank per episode, so a hard episode does not drown an easy one.
            ranked = np.mean([centered_ranks(population[:, j]) for j in range(len(specs))], axis=0)
            plus, minus = ranked[0::2], ranked[1::2]
            gradient = ((plus - minus)[:, None] * noise).sum(axis=0) / (2 * args.pairs)
            theta = theta + scale * optimizer.step(gradient)
            record = {
                "generation": generation,
                "center_fitness": float(center.mean()),
                "population_mean": float(population.mean()),
                "population_best": float(population.mean(axis=1).max()),
                "episodes": [(s.trace, s.seed) for s in specs],
                "seconds": round(time.time() - started, 1),
            }
            history.append(record)
            writer.add_scalar("charts/center_fitness", record["center_fitness"], generation)
            writer.add_scalar("charts/population_mean", record["population_mean"], generation)
            writer.add_scalar("charts/population_best", record["population_best"], generation)
            if model.reserve is not None:
                set_vector(model, theta)
                for i, name in enumerate(("base", "slope", "share", "whole", "cpu_only")):
                    writer.add_scalar(f"reserve/{name}", float(model.reserve.reserve[i].detach()), generation)
                writer.add_scalar("reserve/weight", float(model.reserve.weight.detach()), generation)
            bar.set_postfix(fitness=f"{record['center_fitness']:.3f}")
            bar.update(1)
            if args.time_limit_s and time.time() - started > args.time_limit_s:
                break
    set_vector(model, theta)
    seconds = time.time() - started
    training = dict(init.manifest.get("training") or {})
    return finish_training(
        writer,
        model,
        args.out,
        {
            "stage": "es",
            "imitation": training,
            "traces": list(args.traces),
            "node_fraction": args.node_fraction,
            "generations": len(history),
            "pairs": args.pairs,
            "sigma": args.sigma,
            "learning_rate": args.learning_rate,
            "seed": args.seed,
            "fitness": "mean GPU allocation (% of capacity) over the pod events with 95-130% arrived",
            "history": history,
            "seconds": round(seconds, 1),
        },
    )
