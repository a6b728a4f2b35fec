"""Fine-tuning a policy on the digital twin, with the same evolution strategy the
offline training ends with (``scheduler.learn.es``): the reserve term and the head's
last layer move along the ranked, antithetic estimate of the fitness gradient; every
member plays the same twin episodes (common random numbers). The result is the best
centre seen on those episodes, the starting policy included.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from scheduler.learn.es import (
    STD_PODS,
    Adam,
    centered_ranks,
    get_vector,
    hidden_activation_std,
    scales,
    set_vector,
)
from scheduler.learn.options import EsArgs
from scheduler.online.twin import TwinEpisode, play
from scheduler.policy.model import NodeScorer, numpy_scorer
from scheduler.policy.plugin import GnnScore, model_profile
from scheduler.state.cluster_state import ClusterState


@dataclass
class TuningArgs:
    generations: int = 6
    """ES iterations per update"""
    pairs: int = 3
    """antithetic pairs per generation"""
    sigma: float = 1.0
    """perturbation size, in units of each parameter group's scale"""
    learning_rate: float = 0.3
    """Adam step size, in the same units"""
    time_limit_s: float = 600.0
    """stop an update after this long"""
    seed: int = 0


@dataclass
class TuningResult:
    model: NodeScorer
    history: list[dict[str, float]] = field(default_factory=list)
    seconds: float = 0.0


def fitness(model: NodeScorer, episodes: Sequence[TwinEpisode]) -> float:
    """Mean twin fitness of ``model`` over ``episodes``."""
    scorer = numpy_scorer(model)
    values = [play(e, model_profile(GnnScore(scorer, e.typical)), seed=i) for i, e in enumerate(episodes)]
    return float(np.mean(values))


def fine_tune(incumbent: NodeScorer, episodes: Sequence[TwinEpisode], args: TuningArgs) -> TuningResult:
    """A copy of ``incumbent`` improved on ``episodes`` (the incumbent is untouched)."""
    started = time.monotonic()
    rng = np.random.default_rng(args.seed)
    model = copy.deepcopy(incumbent)
    es = EsArgs(sigma=args.sigma, learning_rate=args.learning_rate)
    first = episodes[0]
    std = hidden_activation_std(model, first.typical, ClusterState(first.nodes), first.arrivals[:STD_PODS])
    scale = scales(model, es, std)
    theta = get_vector(model)
    optimizer = Adam(args.learning_rate)
    history: list[dict[str, float]] = []
    # Keep the best centre seen on the training episodes (the incumbent included), so a
    # noisy step can only cost time, not quality.
    best_theta, best = theta.copy(), fitness(model, episodes)
    for generation in range(args.generations):
        noise = rng.standard_normal((args.pairs, theta.size))
        members = [theta + sign * args.sigma * scale * eps for eps in noise for sign in (1.0, -1.0)]
        values = []
        for member in members:
            set_vector(model, member)
            values.append(fitness(model, episodes))
        ranked = centered_ranks(np.array(values))
        gradient = ((ranked[0::2] - ranked[1::2])[:, None] * noise).sum(axis=0) / (2 * args.pairs)
        theta = theta + scale * optimizer.step(gradient)
        set_vector(model, theta)
        centre = fitness(model, episodes)
        if centre > best:
            best_theta, best = theta.copy(), centre
        history.append(
            {"generation": generation, "population_mean": float(np.mean(values)), "centre": centre}
        )
        if time.monotonic() - started > args.time_limit_s:
            break
    set_vector(model, best_theta)
    return TuningResult(model, history, time.monotonic() - started)
