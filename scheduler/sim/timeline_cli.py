"""``rl-scheduler timeline``: replay a trace in time (pods arrive at their compressed
creation times and leave after their lifetimes; ``scheduler.sim.timeline``) under
several policies and seeds, print the comparison, write ``summary.json`` and a plot."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from tqdm import tqdm

from scheduler.cli_values import (
    COUNT,
    FRACTION,
    NON_NEGATIVE,
    POSITIVE,
    existing_dir,
    named_by,
    number,
    parse_seeds,
)
from scheduler.errors import CommandLineError, SchedulerInputError
from scheduler.plugins.profiles import profile_names
from scheduler.sim import paired, report, timeline_report
from scheduler.sim.catalog import DEFAULT_NODE_LIST, node_list_path, pod_list_path
from scheduler.sim.cli import LEARNED, _advance, print_issues
from scheduler.sim.replay import gpu_capacity_milli
from scheduler.sim.sweep import run_sweep
from scheduler.sim.timeline import DEFAULT_MAX_WAIT_S, TimedWorkload, TimelineSpec, load_timed_workload
from scheduler.sim.timeline_metrics import run_timeline

# rl-scheduler's policy first (the paired differences are its), its teacher, FGD and
# kube-scheduler's default profile.
DEFAULT_POLICIES = (LEARNED, "fgd-reserve", "fgd", "default")
# A quarter of the openb node list: the default trace can offer it up to 1.8 x its GPUs
# over the busy window (the whole list, 0.45 x), so --load 1 and past it are reachable.
DEFAULT_NODE_FRACTION = 0.25


def chosen_policies(args: argparse.Namespace) -> list[str]:
    """The policies a parsed ``timeline`` command line replays, the first one paired
    with the others."""
    return list(args.policy or DEFAULT_POLICIES)


class _OneTrace(argparse.Action):
    """Stores the trace; refuses a second ``--trace`` (``simulate`` takes several, this
    command replays one), rather than keeping the last one silently."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,  # noqa: ARG002 - argparse's signature
        namespace: argparse.Namespace,
        values: Any,
        option: Any = None,  # noqa: ARG002
    ) -> None:
        first = getattr(namespace, "_trace_given", None)
        if first is not None:
            raise argparse.ArgumentError(
                self, f"given twice ({first!r}, then {values!r}); one trace per command"
            )
        namespace._trace_given = values
        setattr(namespace, self.dest, values)


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "timeline",
        help="replay a trace in time, pods arriving and leaving, and compare policies",
        description=__doc__,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--trace",
        action=_OneTrace,
        type=named_by(pod_list_path),
        default="default",
        help="openb trace name (default, gpushare40, ...) or CSV path with creation and deletion times",
    )
    parser.add_argument(
        "--policy",
        action="append",
        choices=profile_names(),
        help=f"score profile; repeatable; the first is paired with the rest [{', '.join(DEFAULT_POLICIES)}]",
    )
    parser.add_argument(
        "--seeds",
        type=parse_seeds,
        default=parse_seeds("42-51"),
        help="seeds (non-negative), e.g. 42-51 or 42,43",
    )
    parser.add_argument(
        "--load",
        type=number(float, POSITIVE),
        default=1.0,
        help="offered GPU load over the busy window, x the GPUs of --node-fraction of the node list; "
        "sets the arrivals' compression",
    )
    parser.add_argument(
        "--node-fraction",
        type=number(float, FRACTION),
        default=DEFAULT_NODE_FRACTION,
        help="share of the node list replayed: a sample stratified by node shape, drawn with each seed "
        "(1: every node)",
    )
    parser.add_argument(
        "--max-wait",
        type=number(float, NON_NEGATIVE),
        default=DEFAULT_MAX_WAIT_S,
        help="simulated seconds a pod may stay pending before it fails",
    )
    parser.add_argument(
        "--nodes",
        type=named_by(node_list_path),
        default=DEFAULT_NODE_LIST,
        help="openb node list name or CSV path",
    )
    parser.add_argument(
        "--checkpoint",
        type=existing_dir,
        default=None,
        help="the gnn policy's checkpoint (default: the one shipped)",
    )
    parser.add_argument(
        "--workers", type=number(int, COUNT), default=os.cpu_count() or 1, help="parallel processes"
    )
    parser.add_argument(
        "--out", type=Path, default=Path("runs/timeline"), help="folder for summary.json and curves.png"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(handler=timeline)


def compression(trace: str, nodes: str, load: float, fraction: float) -> tuple[float, TimedWorkload]:
    """The ``k`` of ``--load`` on this trace and node list; a load out of reach is an
    error naming ``--load``."""
    workload = load_timed_workload(trace, nodes)
    if not workload.pods:
        raise CommandLineError("timeline", "--trace", f"{trace}: no pod to replay")
    try:
        k = workload.compression_for(load, fraction)
    except SchedulerInputError as error:
        raise CommandLineError(
            "timeline", "--load" if error.field == "load" else "--trace", error.problem
        ) from None
    return k, workload


def describe_load(workload: TimedWorkload, k: float, fraction: float, seeds: list[int]) -> str:
    """The offered load at ``k`` and the GPUs it is a multiple of; with a sample, the
    GPUs each seed's sample holds and the load offered to them (min-max over seeds)."""
    nominal = workload.nominal_capacity_milli(fraction)
    offered = workload.offered_load(k, nominal)
    if fraction >= 1.0:
        return f"offered GPU load {offered:.3f} x capacity ({workload.capacity_milli // 1000} GPUs)"
    held = [gpu_capacity_milli(workload.cluster(fraction, seed)) // 1000 for seed in seeds]
    loads = [workload.offered_load(k, 1000 * gpus) for gpus in held]
    return (
        f"offered GPU load {offered:.3f} x {workload.describe_capacity(fraction)} (the seeds' samples hold "
        f"{_span(held, 'd')}, offered {_span(loads, '.3f')} x theirs)"
    )


def _span(values: list[int] | list[float], spec: str) -> str:
    low, high = (format(v, spec) for v in (min(values), max(values)))
    return low if low == high else f"{low}-{high}"


def timeline(args: argparse.Namespace) -> int:
    policies = chosen_policies(args)
    k, workload = compression(args.trace, args.nodes, args.load, args.node_fraction)
    print(
        f"{args.trace}: arrivals compressed k = {k:.6g}x; "
        f"{describe_load(workload, k, args.node_fraction, args.seeds)}; max wait {args.max_wait:g} s"
    )
    checkpoint = str(args.checkpoint) if args.checkpoint else None
    specs = [
        TimelineSpec(
            args.trace, p, s, args.nodes, args.load, args.max_wait, checkpoint, k, args.node_fraction
        )
        for p in policies
        for s in args.seeds
    ]
    with tqdm(total=None, unit="pod", disable=args.quiet, desc=f"{len(specs)} replays") as bar:
        results = run_sweep(specs, run_timeline, args.workers, on_pods=_advance(bar))
    print_issues(results)
    summary = timeline_report.summarise(results)
    print(timeline_report.table(summary))
    differences = timeline_report.headline_differences(results)
    if differences:
        print(f"\npaired over seeds ({paired.CONFIDENCE:.0%} Student-t interval on the mean difference):")
        print(timeline_report.paired_table(summary, differences))
    report.write_summary(summary, args.out / "summary.json")
    timeline_report.plot(results, args.out / "curves.png")
    print(f"wrote {args.out / 'summary.json'} and {args.out / 'curves.png'}")
    return 0
