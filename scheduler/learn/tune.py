"""``rl-scheduler tune``: Optuna over ES's hyperparameters.

Why ES: it is the stage that optimises what the scheduler is judged on (the GPU
allocated once the cluster is saturated) and whose settings (perturbation size, step,
which parameters move how far) have no principled value; a trial is a short ES run
from a fixed checkpoint, cheap next to re-imitating a teacher. The objective is ES's
own fitness measured on held-out episodes (``trial``), so a trial that only overfits
its training episodes does not win.

Optuna's TPE sampler, seeded, suggests ``--parallel`` trials at a time and sees their
results before suggesting the next batch: the same seed gives the same suggestions
and, since every trial's ES is seeded too, the same study, whether the trials ran in
local processes or on Ray. Every trial starts from the same checkpoint and trains on
the same episodes (common random numbers), so trials differ by their settings alone.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from scheduler.errors import CommandLineError
from scheduler.learn.episode import EpisodeSpec
from scheduler.learn.options import EsArgs, TuneArgs
from scheduler.learn.trial import (
    TrialResult,
    TrialTask,
    es_settings,
    held_out_scores,
    held_out_specs,
    run_trial,
)
from scheduler.learn.tune_space import DEFAULT_SPACE, TUNABLE, Choices, SearchSpace, describe
from scheduler.parallel import Workers, task_pool
from scheduler.policy.weights import MANIFEST_FILE, default_checkpoint_path, read_manifest
from scheduler.sim.report import format_table

BEST_FILE = "best.json"
JOURNAL_FILE = "optuna.journal"
OBJECTIVE = (
    "mean GPU allocation (% of capacity) over the pod events with 95-130% arrived, of the trial's trained "
    "checkpoint on the held-out episodes (ES's fitness on seeds ES never draws)"
)


def distributions(space: SearchSpace) -> dict[str, BaseDistribution]:
    found: dict[str, BaseDistribution] = {}
    for name, dimension in space.dimensions:
        if isinstance(dimension, Choices):
            found[name] = CategoricalDistribution(dimension.values)
        elif TUNABLE[name].integer:
            found[name] = IntDistribution(int(dimension.low), int(dimension.high), log=dimension.log)
        else:
            found[name] = FloatDistribution(dimension.low, dimension.high, log=dimension.log)
    return found


def new_study(seed: int, storage: optuna.storages.BaseStorage | None = None) -> optuna.Study:
    """A study that maximises, its TPE sampler seeded."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(
        study_name="tune",
        direction="maximize",
        sampler=optuna.samplers.TPESampler(seed=seed),
        storage=storage,
    )


def _refuse_a_used_folder(out: Path) -> None:
    used = [name for name in (BEST_FILE, JOURNAL_FILE) if (out / name).exists()]
    if used:
        raise CommandLineError(
            "tune", "--out", f"{out} holds a study already ({used[0]}); name another folder or remove it"
        )


def _row(result: TrialResult, names: list[str]) -> list[str]:
    return [
        str(result.number),
        *(f"{result.params[n]:.4g}" for n in names),
        f"{result.value:.2f}",
        f"{result.seconds:.0f}",
    ]


def _trial_json(result: TrialResult) -> dict[str, Any]:
    return {
        "trial": result.number,
        "params": dict(result.params),
        "value": result.value,
        "held_out": list(result.held_out),
        "seconds": round(result.seconds, 1),
        "checkpoint": str(result.checkpoint),
    }


def _keep_best(best: TrialResult, out: Path, record: dict[str, Any]) -> Path:
    """The best trial's checkpoint, copied to ``out/checkpoint`` with the study's
    verdict in its manifest (``tune``)."""
    target = out / "checkpoint"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(best.checkpoint, target)
    _, manifest = read_manifest(target)
    manifest["tune"] = record
    (target / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
    return target


def _trial_tasks(
    batch: list[optuna.Trial], base: EsArgs, held_out: tuple[EpisodeSpec, ...], out: Path
) -> list[TrialTask]:
    """Each trial's ES settings, its checkpoint under ``out/trials/trial_N`` and its
    TensorBoard logs in ``out/tensorboard/trial_N``."""
    return [
        TrialTask(
            trial.number,
            dict(trial.params),
            es_settings(trial.params, replace(base, out=out / "trials" / f"trial_{trial.number}")),
            held_out,
            out / "tensorboard" / f"trial_{trial.number}",
        )
        for trial in batch
    ]


def main(args: TuneArgs) -> Path:
    """Run the study; returns the best checkpoint's folder."""
    started = time.time()
    out = args.out
    _refuse_a_used_folder(out)
    out.mkdir(parents=True, exist_ok=True)
    space = args.space or DEFAULT_SPACE
    suggested = distributions(space)
    init = args.init or default_checkpoint_path()
    study = new_study(args.seed, JournalStorage(JournalFileBackend(str(out / JOURNAL_FILE))))
    held_out = held_out_specs(args.traces, args.held_out_episodes, args.node_fraction)
    base = EsArgs(
        init=init,
        traces=args.traces,
        node_fraction=args.node_fraction,
        episodes_per_trace=args.episodes_per_trace,
        generations=args.generations,
        pairs=args.pairs,
        seed=args.seed,
        workers=1,  # the trials are what runs in parallel
        quiet=True,
    )
    writer = SummaryWriter(str(out / "tensorboard" / "study"))
    results: list[TrialResult] = []
    if not args.quiet:
        print(f"search space: {describe(space)}")
    with (
        task_pool(Workers(args.parallel, args.ray_address)) as pool,
        tqdm(total=args.trials, desc="trials", unit="trial", disable=args.quiet) as bar,
    ):
        init_scores = pool.map(held_out_scores, [(init, held_out)])[0]
        while len(results) < args.trials:
            # A batch is suggested before any of it is told: --parallel trials at once.
            batch = [study.ask(suggested) for _ in range(min(args.parallel, args.trials - len(results)))]
            done = pool.map(run_trial, _trial_tasks(batch, base, held_out, out))
            for trial, result in zip(batch, done, strict=True):
                study.tell(trial, result.value)
                results.append(result)
                best_so_far = max(r.value for r in results)
                writer.add_scalar("tune/held_out_allocation", result.value, result.number)
                writer.add_scalar("tune/best_so_far", best_so_far, result.number)
                bar.set_postfix(best=f"{best_so_far:.2f}")
                bar.update(1)
    writer.close()
    init_value = sum(init_scores) / len(init_scores)
    best = max(results, key=lambda r: (r.value, -r.number))  # ties: the first trial
    verdict: dict[str, Any] = {
        "objective": OBJECTIVE,
        "best": {"trial": best.number, "params": dict(best.params), "value": best.value},
        "init": {"checkpoint": str(init), "value": init_value, "held_out": list(init_scores)},
        "held_out_episodes": [[spec.trace, spec.seed, spec.node_fraction] for spec in held_out],
    }
    checkpoint = _keep_best(best, out, verdict)
    settings = {k: v for k, v in vars(args).items() if k not in ("space", "quiet", "out")}
    best_entry = {**verdict["best"], "held_out": list(best.held_out), "checkpoint": str(checkpoint)}
    summary = {
        **verdict,
        "best": best_entry,
        "space": space.as_json(),
        "settings": {**settings, "init": str(init), "traces": list(args.traces)},
        "trials": [_trial_json(r) for r in sorted(results, key=lambda r: r.number)],
        "seconds": round(time.time() - started, 1),
    }
    (out / BEST_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    _print_study(results, best, init_value, space)
    print(
        f"wrote {out / BEST_FILE}, {checkpoint}, {out / JOURNAL_FILE} and TensorBoard logs "
        f"(tensorboard --logdir {out / 'tensorboard'})"
    )
    return checkpoint


def _print_study(
    results: list[TrialResult], best: TrialResult, init_value: float, space: SearchSpace
) -> None:
    names = [name for name, _ in space.dimensions]
    header = ["trial", *names, "held-out alloc", "seconds"]
    print(format_table(header, [_row(r, names) for r in sorted(results, key=lambda r: r.number)]))
    print(
        f"best: trial {best.number}, held-out allocation {best.value:.2f} "
        f"(the initial checkpoint: {init_value:.2f}); "
        + ", ".join(f"{n} {best.params[n]:.4g}" for n in names)
    )
