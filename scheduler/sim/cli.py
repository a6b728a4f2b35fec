"""``rl-scheduler simulate``: replay traces or a synthetic workload under several
policies and seeds (in local processes, or on a Ray cluster with ``--ray-address``),
print the comparison, write ``summary.json`` and a plot."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from tqdm import tqdm

from scheduler.cli_values import COUNT, NON_NEGATIVE, POSITIVE, named_by, number
from scheduler.plugins.profiles import profile_names
from scheduler.sim import report
from scheduler.sim.catalog import pod_list_path
from scheduler.sim.replay import NODE_ORDER_DRAWS
from scheduler.sim.replay_options import add_node_list, add_outputs, add_ray_address, add_seeds, add_workers
from scheduler.sim.sweep import expand, run_sweep, run_synthetic_spec, run_trace
from scheduler.sim.synthetic import SyntheticSpec

FGD_BASELINES = ("random", "dot-prod", "gpu-clustering", "gpu-packing", "best-fit", "fgd")
# The chart's default profile (fgd-reserve) and the learned policy (the shipped
# checkpoint) beside kube's default profile and the FGD paper's six.
CHART_DEFAULT = "fgd-reserve"
LEARNED = "gnn"
DEFAULT_POLICIES = (CHART_DEFAULT, LEARNED, "default", *FGD_BASELINES)


def chosen_policies(args: argparse.Namespace) -> list[str]:
    """The policies a parsed ``simulate`` command line replays."""
    return list(args.policy or DEFAULT_POLICIES)


class HasIssues(Protocol):
    """A replay's result: the input's problems it met."""

    @property
    def issues(self) -> Sequence[str]: ...


def print_issues(results: Sequence[HasIssues], shown: int = 20) -> None:
    """The input's problems (bad rows, unknown GPU models), each once, the first ``shown``."""
    issues = sorted({issue for r in results for issue in r.issues})
    for issue in issues[:shown]:
        print(f"warning: {issue}")
    if len(issues) > shown:
        print(f"warning: ... and {len(issues) - shown} more problems in the input")


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
        type=named_by(pod_list_path),
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
    add_seeds(parser)
    add_node_list(parser, "openb node list name or CSV path (traces only)")
    parser.add_argument(
        "--tune",
        type=number(float, POSITIVE),
        default=1.3,
        help="inflate the workload to this multiple of GPU capacity",
    )
    parser.add_argument(
        "--node-order-draws", type=number(int, NON_NEGATIVE), default=NODE_ORDER_DRAWS, help=argparse.SUPPRESS
    )
    parser.add_argument(
        "--synthetic-nodes", type=number(int, COUNT), default=40, help="nodes of the synthetic cluster"
    )
    parser.add_argument(
        "--synthetic-pods",
        type=number(int, COUNT),
        default=4000,
        help="pod arrivals of the synthetic workload",
    )
    parser.add_argument(
        "--synthetic-load", type=number(float, POSITIVE), default=1.1, help="steady-state demand / capacity"
    )
    add_workers(parser)
    add_ray_address(parser, "replays")
    add_outputs(parser, "runs/simulate", "folder for summary.json and curves.png")
    parser.set_defaults(handler=simulate)


def simulate(args: argparse.Namespace) -> int:
    policies = chosen_policies(args)
    if args.synthetic:
        return _simulate_synthetic(args, policies)
    traces = args.trace or ["default"]
    specs = expand(
        traces, policies, args.seeds, nodes=args.nodes, tune=args.tune, node_order_draws=args.node_order_draws
    )
    with tqdm(total=None, unit="pod", disable=args.quiet, desc=f"{len(specs)} replays") as bar:
        results = run_sweep(specs, run_trace, args.workers, _advance(bar), args.ray_address)
    print_issues(results)
    summary = report.summarise(results)
    print(report.table(summary))
    report.write_summary(summary, args.out / "summary.json")
    report.plot(results, args.out / "curves.png")
    print(f"wrote {args.out / 'summary.json'} and {args.out / 'curves.png'}")
    return 0


def _simulate_synthetic(args: argparse.Namespace, policies: list[str]) -> int:
    specs = [
        SyntheticSpec(
            p, s, nodes=args.synthetic_nodes, pods=args.synthetic_pods, target_load=args.synthetic_load
        )
        for p in policies
        for s in args.seeds
    ]
    with tqdm(total=len(specs) * args.synthetic_pods, unit="pod", disable=args.quiet) as bar:
        results = run_sweep(specs, run_synthetic_spec, args.workers, _advance(bar), args.ray_address)
    summary = report.summarise_synthetic(results)
    print(report.synthetic_table(summary))
    report.write_summary(summary, args.out / "summary.json")
    print(f"wrote {args.out / 'summary.json'}")
    return 0
