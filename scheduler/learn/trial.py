"""One trial of ``rl-scheduler tune``, in a worker process (local or on Ray): ES from
the initial checkpoint with the trial's hyperparameters, then the trained checkpoint
scored on held-out episodes by ES's own fitness (``es.episode_fitness``: the mean GPU
allocation at saturation). ES draws its episodes' seeds below ``HELD_OUT_SEED``; the
held-out ones are ``HELD_OUT_SEED`` and up, so no trial has trained on them. No optuna
here: a Ray cluster's nodes need only the learn extra."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from torch.utils.tensorboard import SummaryWriter

from scheduler.learn import es
from scheduler.learn.episode import EpisodeSpec
from scheduler.learn.options import EsArgs
from scheduler.policy.checkpoint import load_checkpoint

HELD_OUT_SEED = 1_000_000  # es.main draws episode seeds with rng.integers(1_000_000)


@dataclass(frozen=True)
class TrialTask:
    number: int
    params: Mapping[str, float]
    es: EsArgs
    held_out: tuple[EpisodeSpec, ...]
    log_dir: Path  # TensorBoard: ES's charts and the held-out score


@dataclass(frozen=True)
class TrialResult:
    number: int
    params: Mapping[str, float]
    value: float  # mean held-out allocation, % of GPU capacity
    held_out: tuple[float, ...]  # per held-out episode
    checkpoint: Path
    seconds: float


def held_out_specs(traces: Sequence[str], episodes: int, node_fraction: float) -> tuple[EpisodeSpec, ...]:
    return tuple(
        EpisodeSpec(trace, HELD_OUT_SEED + i, node_fraction) for trace in traces for i in range(episodes)
    )


def es_settings(params: Mapping[str, float], base: EsArgs) -> EsArgs:
    """``base`` with the trial's values (``reserve_scale_multiplier`` scales the six
    reserve scales; ``pairs`` is a count)."""
    changes: dict[str, object] = {}
    for name, value in params.items():
        if name == "reserve_scale_multiplier":
            changes["reserve_scale"] = tuple(value * scale for scale in base.reserve_scale)
        elif name == "pairs":
            changes["pairs"] = int(value)
        else:
            changes[name] = float(value)
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def held_out_scores(task: tuple[Path, tuple[EpisodeSpec, ...]]) -> tuple[float, ...]:
    """A checkpoint's fitness on each held-out episode."""
    checkpoint, specs = task
    model = load_checkpoint(checkpoint).model
    return tuple(es.episode_fitness(model, spec) for spec in specs)


def run_trial(task: TrialTask) -> TrialResult:
    started = time.time()
    checkpoint = es.main(task.es, log_dir=task.log_dir)
    scores = held_out_scores((checkpoint, task.held_out))
    value = float(np.mean(scores))
    with SummaryWriter(str(task.log_dir)) as writer:
        writer.add_scalar("eval/held_out_allocation", value, task.es.generations)
    return TrialResult(task.number, task.params, value, scores, checkpoint, time.time() - started)
