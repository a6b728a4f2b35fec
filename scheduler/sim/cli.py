"""``rl-scheduler simulate``: replay traces or a synthetic workload under several
policies and seeds, print the comparison, write ``summary.json`` and a plot."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tqdm import tqdm

from scheduler.errors import SchedulerInputError
from scheduler.plugins.profiles import profile_names
from scheduler.sim import report
from scheduler.sim.catalog import DEFAULT_NODE_LIST, pod_list_path
from scheduler.sim.replay import NODE_ORDER_DRAWS
from scheduler.sim.sweep import expand, run_sweep, run_synthetic_spec, run_trace
from scheduler.sim.synthetic import SyntheticSpec

FGD_BASELINES = ("random", "dot-prod", "gpu-clustering", "gpu-packing", "best-fit", "fgd")
DEFAULT_POLICIES = ("default", *FGD_BASELINES)


def parse_seeds(text: str) -> list[int]:
    """``42-51`` or ``42,45,50``."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            if "-" in part.strip()[1:]:
                low, high = part.split("-", 1)
                seeds.extend(range(int(low), int(high) + 1))
            elif part.strip():
                seeds.append(int(part))
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds {text!r}: expected e.g. 42-51 or 42,43") from None
    if not seeds:
        raise argparse.ArgumentTypeError(f"seeds {text!r}: no seed given")
    return seeds


def _advance(bar: tqdm[Any]) -> Callable[[int], None]:
    def advance(pods: int) -> None:
        bar.update(pods)

    return advance


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "simulate",
        help="replay traces or a synthetic workload and compare policies",
        description=__doc__,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--trace",
        action="append",
        help="openb trace name (default, gpushare40, ...) or CSV path; repeatable [default]",
    )
    parser.add_argument(
        "--synthetic",
        action="store_true",
        help="run the synthetic CPU/memory workload with departures instead of a trace",
    )
    parser.add_argument(
        "--policy",
        action="append",
        choices=profile_names(),
        help=f"score profile; repeatable [{', '.join(DEFAULT_POLICIES)}]",
    )
    parser.add_argument(
        "--seeds", type=parse_seeds, default=parse_seeds("42-51"), help="seeds, e.g. 42-51 or 42,43"
    )
    parser.add_argument(
        "--nodes", default=DEFAULT_NODE_LIST, help="openb node list name or CSV path (traces only)"
    )
    parser.add_argument(
        "--tune", type=float, default=1.3, help="inflate the workload to this multiple of GPU capacity"
    )
    parser.add_argument("--node-order-draws", type=int, default=NODE_ORDER_DRAWS, help=argparse.SUPPRESS)
    parser.add_argument("--synthetic-nodes", type=int, default=40, help="nodes of the synthetic cluster")
    parser.add_argument(
        "--synthetic-pods", type=int, default=4000, help="pod arrivals of the synthetic workload"
    )
    parser.add_argument("--synthetic-load", type=float, default=1.1, help="steady-state demand / capacity")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="parallel processes")
    parser.add_argument(
        "--out", type=Path, default=Path("runs/simulate"), help="folder for summary.json and curves.png"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(handler=simulate)


def simulate(args: argparse.Namespace) -> int:
    policies = args.policy or list(DEFAULT_POLICIES)
    if args.workers < 1:
        raise SchedulerInputError("simulate", "--workers", f"must be at least 1, got {args.workers}")
    if args.synthetic:
        return _simulate_synthetic(args, policies)
    traces = args.trace or ["default"]
    for trace in traces:
        pod_list_path(trace)  # fail before starting workers on a bad name
    specs = expand(
        traces, policies, args.seeds, nodes=args.nodes, tune=args.tune, node_order_draws=args.node_order_draws
    )
    with tqdm(total=None, unit="pod", disable=args.quiet, desc=f"{len(specs)} replays") as bar:
        results = run_sweep(specs, run_trace, args.workers, on_pods=_advance(bar))
    issues = sorted({issue for r in results for issue in r.issues})
    for issue in issues[:20]:
        print(f"warning: {issue}")
    if len(issues) > 20:
        print(f"warning: ... and {len(issues) - 20} more problems in the input")
    summary = report.summarise(results)
    print(report.table(summary))
    report.write_summary(summary, args.out / "summary.json")
    report.plot(results, args.out / "curves.png")
    print(f"wrote {args.out / 'summary.json'} and {args.out / 'curves.png'}")
    return 0


def _simulate_synthetic(args: argparse.Namespace, policies: list[str]) -> int:
    if args.synthetic_nodes < 1 or args.synthetic_pods < 1 or args.synthetic_load <= 0:
        raise SchedulerInputError("simulate", "--synthetic-*", "nodes, pods and load must be positive")
    specs = [
        SyntheticSpec(
            p, s, nodes=args.synthetic_nodes, pods=args.synthetic_pods, target_load=args.synthetic_load
        )
        for p in policies
        for s in args.seeds
    ]
    with tqdm(total=len(specs) * args.synthetic_pods, unit="pod", disable=args.quiet) as bar:
        results = run_sweep(specs, run_synthetic_spec, args.workers, on_pods=_advance(bar))
    summary = report.summarise_synthetic(results)
    print(report.synthetic_table(summary))
    report.write_summary(summary, args.out / "summary.json")
    print(f"wrote {args.out / 'summary.json'}")
    return 0
