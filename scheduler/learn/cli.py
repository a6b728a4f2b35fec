"""``rl-scheduler train``, ``rl-scheduler tune`` and ``rl-scheduler evaluate``.

``train`` runs one stage (``train imitation|es|ppo``) or the pipeline (imitation of
the ``fgd-reserve`` teacher, then evolution strategies on the saturated allocation).
The shipped checkpoint is ``train imitation`` with its defaults. ``evaluate`` replays
a checkpoint beside its teacher (``fgd-reserve``), beside itself with the network
switched off (``gnn-network-off``) and beside the baselines; it prints the same table,
``summary.json`` and plot as ``simulate``, then the learned policy's paired per-seed
differences against the teacher, the ablation and FGD (on the synthetic workload, which
has no GPUs: the teacher, the ablation and every baseline named) with a 95% t-interval.
"""

from __future__ import annotations

import argparse
import importlib
import json
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

from scheduler.cli_values import existing_dir, named_by
from scheduler.learn.ablation import NETWORK_OFF
from scheduler.learn.args import add_dataclass_arguments, from_namespace
from scheduler.learn.options import (
    DqnArgs,
    EsArgs,
    ImitationArgs,
    PipelineArgs,
    PpoArgs,
    RolloutArgs,
    TuneArgs,
)
from scheduler.plugins.profiles import profile_names
from scheduler.policy.config import PER_NODE_KINDS
from scheduler.sim import paired, report
from scheduler.sim.catalog import pod_list_path
from scheduler.sim.cli import FGD_BASELINES, _advance, print_issues
from scheduler.sim.replay_options import add_node_list, add_outputs, add_ray_address, add_seeds, add_workers

LEARNED = "gnn"
TEACHER = "fgd-reserve"
STAGE_MODULES: dict[type, str] = {
    ImitationArgs: "imitation",
    EsArgs: "es",
    PpoArgs: "ppo",
    DqnArgs: "dqn",
    RolloutArgs: "rollout",
}


def run_pipeline(args: PipelineArgs) -> Path:
    from scheduler.learn import es, imitation  # noqa: PLC0415 - torch loads only for training

    started = time.time()
    imitated = imitation.main(
        ImitationArgs(
            traces=args.traces,
            episodes_per_trace=args.imitation_episodes_per_trace,
            epochs=args.imitation_epochs,
            seed=args.seed,
            out=args.out / "imitation",
            quiet=args.quiet,
        )
    )
    remaining = max(60.0, args.time_limit_s - (time.time() - started))
    final = es.main(
        EsArgs(
            init=imitated,
            traces=args.traces,
            node_fraction=args.es_node_fraction,
            generations=args.es_generations,
            pairs=args.es_pairs,
            seed=args.seed,
            workers=args.workers,
            ray_address=args.ray_address,
            time_limit_s=remaining,
            out=args.out / "es",
            quiet=args.quiet,
        )
    )
    target = args.out / "checkpoint"
    target.mkdir(parents=True, exist_ok=True)
    manifest = json.loads((final / "manifest.json").read_text())
    manifest["training"]["pipeline_seconds"] = round(time.time() - started, 1)
    manifest["training"]["pipeline_command"] = "rl-scheduler train pipeline " + " ".join(
        f"--{k.replace('_', '-')} {','.join(map(str, v)) if isinstance(v, tuple) else v}"
        for k, v in vars(args).items()
        if k not in ("quiet",) and v is not None
    )
    (target / "model.safetensors").write_bytes((final / "model.safetensors").read_bytes())
    (target / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return target


def register(commands: Any) -> None:
    train: argparse.ArgumentParser = commands.add_parser(
        "train",
        help="train the learned policy (imitation, then evolution strategies; or PPO)",
        description=__doc__,
    )
    stages = train.add_subparsers(dest="stage", metavar="STAGE")

    for name, cls, text in (
        ("pipeline", PipelineArgs, "imitation, then ES on the saturated allocation (default)"),
        ("imitation", ImitationArgs, "imitate the fgd-reserve teacher (the shipped checkpoint)"),
        ("es", EsArgs, "evolution strategies on the saturated allocation from a checkpoint"),
        ("ppo", PpoArgs, "PPO with action masking (actor-critic)"),
        ("dqn", DqnArgs, "DQN with action masking (replay buffer, target network)"),
        ("rollout", RolloutArgs, "learn where one step of lookahead over fgd-reserve beats it"),
    ):
        stage = stages.add_parser(name, help=text)
        add_dataclass_arguments(stage, cls)
        stage.set_defaults(handler=_train, args_class=cls)
    train.set_defaults(handler=_train, args_class=None)

    tune: argparse.ArgumentParser = commands.add_parser(
        "tune", help="search ES's hyperparameters with Optuna", description=TuneArgs.__doc__
    )
    add_dataclass_arguments(tune, TuneArgs)
    tune.set_defaults(handler=_tune)

    evaluate: argparse.ArgumentParser = commands.add_parser(
        "evaluate",
        help="replay a checkpoint against the baselines",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    evaluate.add_argument(
        "--checkpoint", type=existing_dir, default=None, help="checkpoint folder (default: the one shipped)"
    )
    evaluate.add_argument(
        "--trace",
        action="append",
        type=named_by(pod_list_path),
        help="openb trace name or CSV path; repeatable [default]",
    )
    evaluate.add_argument(
        "--policy",
        action="append",
        choices=profile_names(),
        metavar="POLICY",
        help=f"baselines beside {LEARNED}, {TEACHER} and {NETWORK_OFF} (always replayed); "
        f"repeatable [{', '.join(('default', *FGD_BASELINES))}]",
    )
    add_seeds(evaluate)
    add_node_list(evaluate, "openb node list name or CSV path (traces only)")
    evaluate.add_argument(
        "--synthetic", action="store_true", help="the synthetic CPU/memory workload instead of traces"
    )
    add_workers(evaluate)
    add_ray_address(evaluate, "replays")
    add_outputs(evaluate, "runs/evaluate", "folder for the outputs")
    evaluate.add_argument(
        "--record", action="store_true", help="write the results into the checkpoint's manifest.json"
    )
    evaluate.set_defaults(handler=_evaluate)


def _train(args: argparse.Namespace) -> int:
    cls = args.args_class or PipelineArgs
    if args.args_class is None:
        # ``rl-scheduler train`` with no stage: the pipeline with its defaults.
        options: Any = PipelineArgs()
    else:
        options = from_namespace(cls, args)
    started = time.time()
    if cls is PipelineArgs:
        folder = run_pipeline(options)
    else:
        # torch loads only for training: each stage's module is imported when it runs.
        stage = importlib.import_module(f"scheduler.learn.{STAGE_MODULES[cls]}")
        folder = stage.main(options)
    minutes = (time.time() - started) / 60
    print(f"wrote {folder} ({minutes:.1f} min)")
    return 0


def _tune(args: argparse.Namespace) -> int:
    from scheduler.learn import tune  # noqa: PLC0415 - optuna and torch load only here

    started = time.time()
    tune.main(from_namespace(TuneArgs, args))
    print(f"({(time.time() - started) / 60:.1f} min)")
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from scheduler.learn import evaluate as evaluation  # noqa: PLC0415
    from scheduler.learn.ablation import write_network_off  # noqa: PLC0415
    from scheduler.policy.checkpoint import default_checkpoint_path, load_checkpoint  # noqa: PLC0415

    checkpoint = args.checkpoint or default_checkpoint_path()
    loaded = load_checkpoint(checkpoint)  # refuse a bad checkpoint before starting workers
    checkpoints = {LEARNED: checkpoint}
    learned = [LEARNED, TEACHER]
    if loaded.config.kind in PER_NODE_KINDS:
        checkpoints[NETWORK_OFF] = write_network_off(checkpoint, args.out / "network-off-checkpoint")
        learned.append(NETWORK_OFF)
    else:
        print(f"note: a {loaded.config.kind!r} checkpoint has no network to switch off; no {NETWORK_OFF}")
    baselines = args.policy or ["default", *FGD_BASELINES]
    policies = [*learned, *(p for p in baselines if p not in learned)]
    compared = [p for p in (TEACHER, NETWORK_OFF, "fgd") if p in policies]
    with tqdm(total=None, unit="pod", disable=args.quiet, desc="evaluate") as bar:
        if args.synthetic:
            policies = [p for p in policies if p not in FGD_BASELINES]  # they need GPUs
            _, summary = evaluation.evaluate_synthetic(
                policies,
                args.seeds,
                checkpoints,
                args.workers,
                on_pods=_advance(bar),
                ray_address=args.ray_address,
            )
            # No FGD without GPUs: the named baselines (MostAllocated, kube's default) instead.
            compared = [p for p in policies if p != LEARNED]
            differences = paired.paired_synthetic(summary, LEARNED, compared)
            tables = [
                report.synthetic_table(summary),
                report.format_table(*paired.synthetic_rows(differences)),
            ]
            summary["paired"] = [paired.as_json(d) for d in differences]
        else:
            traces = args.trace or ["default"]
            results, summary = evaluation.evaluate_traces(
                traces,
                policies,
                args.seeds,
                checkpoints,
                args.workers,
                _advance(bar),
                args.nodes,
                args.ray_address,
            )
            print_issues(results)
            by_trace = paired.paired_traces(summary, LEARNED, compared)
            tables = [report.table(summary), report.format_table(*paired.paired_rows(by_trace))]
            if len(by_trace) > 1:
                tables.append(report.format_table(*paired.across_traces(by_trace)))
            summary["paired"] = {t: [paired.as_json(d) for d in rows] for t, rows in by_trace.items()}
            report.plot(results, args.out / "curves.png")
            summary["headline"] = evaluation.headline(summary)
    print(tables[0])
    print(f"\npaired over seeds ({paired.CONFIDENCE:.0%} Student-t interval on the mean difference):")
    print(tables[1])
    if len(tables) > 2:
        print("\nacross traces:")
        print(tables[2])
    summary["checkpoint"] = str(checkpoint)
    report.write_summary(summary, args.out / "summary.json")
    print(
        f"wrote {args.out / 'summary.json'}" + ("" if args.synthetic else f" and {args.out / 'curves.png'}")
    )
    if args.record:
        key = "synthetic" if args.synthetic else "traces"
        _, manifest = _read(checkpoint)
        evaluation_record = dict(manifest.get("evaluation") or {})
        evaluation_record[key] = replace_none(summary)
        path = evaluation.record_in_manifest(checkpoint, evaluation_record)
        print(f"recorded the results in {path}")
    return 0


def _read(checkpoint: Path) -> tuple[Path, dict[str, Any]]:
    from scheduler.policy.weights import read_manifest  # noqa: PLC0415

    return read_manifest(checkpoint)


def replace_none(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary without per-seed detail (kept in summary.json), for the manifest."""
    out = dict(summary)
    traces = out.get("traces")
    if isinstance(traces, dict):
        out["traces"] = {
            trace: {
                policy: {k: v for k, v in entry.items() if k != "per_seed"}
                for policy, entry in policies.items()
            }
            for trace, policies in traces.items()
        }
    return out
