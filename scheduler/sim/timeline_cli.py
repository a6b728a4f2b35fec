"""``rl-scheduler timeline``: replay a trace in time (pods arrive at their creation times
and leave after their lifetimes, on one clock; ``scheduler.sim.timeline``) under several
policies and seeds, print the comparison, write ``summary.json`` and a plot."""

from __future__ import annotations

import argparse
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
)
from scheduler.errors import CommandLineError, SchedulerInputError
from scheduler.plugins.profiles import profile_names
from scheduler.sim import paired, report, timeline_report, timeline_starts
from scheduler.sim.catalog import pod_list_path
from scheduler.sim.cli import LEARNED, _advance, print_issues
from scheduler.sim.offered_load import busy_from
from scheduler.sim.replay import gpu_capacity_milli
from scheduler.sim.replay_options import add_node_list, add_outputs, add_seeds, add_workers
from scheduler.sim.reservations import ReservationConfig
from scheduler.sim.sweep import run_sweep
from scheduler.sim.timeline import (
    DEFAULT_MAX_WAIT_S,
    TimedWorkload,
    TimelineSpec,
    cluster_and_clock,
    load_timed_workload,
)
from scheduler.sim.timeline_lifetimes import LIFETIME_SOURCES, resolve_with_args, uses_lifetimes
from scheduler.sim.timeline_metrics import run_timeline
from scheduler.sim.timeline_starts import START_QUEUE, start_sources, start_variants

# rl-scheduler's policy first (the paired differences are its), its teacher, FGD and
# kube-scheduler's default profile.
DEFAULT_POLICIES = (LEARNED, "fgd-reserve", "fgd", "default")
# With --compress-arrivals, a quarter of the openb node list: the default trace can offer
# it up to 1.8 x its GPUs over the busy window (the whole list, 0.45 x).
COMPRESSED_NODE_FRACTION = 0.25
DEFAULT_LOAD = 1.0


# ``--policy P+reserve``: profile P with reservations for waiting multi-GPU pods.
RESERVE_SUFFIX = "+reserve"


def chosen_arms(args: argparse.Namespace) -> list[str]:
    """The policies a parsed ``timeline`` command line replays as given (``P+reserve``
    included), the first one paired with the others."""
    return list(args.policy or DEFAULT_POLICIES)


def chosen_policies(args: argparse.Namespace) -> list[str]:
    """The profiles a parsed ``timeline`` command line runs (without ``+reserve``)."""
    return [arm.removesuffix(RESERVE_SUFFIX) for arm in chosen_arms(args)]


def reservation_options(args: argparse.Namespace, arm: str) -> dict[str, Any]:
    """The reservations of an arm that ends in ``+reserve`` (none for the others)."""
    if not arm.endswith(RESERVE_SUFFIX):
        return {}
    try:
        config = ReservationConfig(args.reserve_gpus, args.reserve_max, args.backfill_quantile)
    except ValueError as error:
        raise CommandLineError("timeline", "--reserve-gpus", str(error)) from None
    source = args.reserve_lifetimes or args.lifetimes
    return {"reservations": config, "reservation_lifetimes": source}


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
        choices=[*profile_names(), *(f"{name}{RESERVE_SUFFIX}" for name in profile_names())],
        help=f"score profile; repeatable; the first is paired with the rest [{', '.join(DEFAULT_POLICIES)}]; "
        f"PROFILE{RESERVE_SUFFIX}: with reservations for waiting multi-GPU pods (--reserve-gpus)",
    )
    add_seeds(parser)
    parser.add_argument(
        "--load",
        type=number(float, POSITIVE),
        default=None,
        help="offered GPU load over the busy window, x the cluster's GPUs: sizes each seed's cluster, so "
        "not with --node-fraction (with --compress-arrivals: x the GPUs of --node-fraction of the node "
        f"list, and sets the arrivals' compression) [{DEFAULT_LOAD:g}]",
    )
    parser.add_argument(
        "--node-fraction",
        type=number(float, FRACTION),
        default=None,
        help="share of the node list replayed, a sample stratified by node shape drawn with each seed "
        "(1: every node); the load it gets is reported. Default: sized for --load "
        f"({COMPRESSED_NODE_FRACTION:g} with --compress-arrivals)",
    )
    parser.add_argument(
        "--time-scale",
        type=number(float, POSITIVE),
        default=1.0,
        help="every time of the trace divided by it, arrivals and lifetimes alike (only units change; "
        "the metrics are in the trace's seconds)",
    )
    parser.add_argument(
        "--compress-arrivals",
        action="store_true",
        help="the earlier replay: arrivals compressed k x to meet --load, lifetimes as they are (a pod "
        "of 10 minutes then outlives the next k x 10 minutes of arrivals); kept to measure what it does",
    )
    parser.add_argument(
        "--max-wait",
        type=number(float, NON_NEGATIVE),
        default=DEFAULT_MAX_WAIT_S,
        help="seconds (of the trace's clock) a pod may stay pending before it fails",
    )
    add_node_list(parser)
    parser.add_argument(
        "--checkpoint",
        type=existing_dir,
        default=None,
        help="the gnn policy's checkpoint (default: the one shipped)",
    )
    parser.add_argument(
        "--lifetimes",
        choices=LIFETIME_SOURCES,
        default="hidden",
        help="what lifetime-aware profiles (fgd-reserve-lifetime) are told of pods' remaining lifetimes: "
        "nothing, the trace's own (oracle: the ceiling), or a lifetime model's median, cross-fitted so no "
        "pod is forecast by a model fitted on it; other profiles ignore it",
    )
    parser.add_argument(
        "--lifetime-arg",
        action="append",
        type=key_value,
        default=[],
        metavar="KEY=VALUE",
        help="an arg of the lifetime-aware plugins, as in a profile's pluginConfig (weight=20, "
        "blocked=NodeHours, horizonHours=72); repeatable",
    )
    parser.add_argument(
        "--reserve-gpus",
        type=number(int, COUNT),
        default=4,
        metavar="K",
        help=f"for policies given as PROFILE{RESERVE_SUFFIX}: a pod asking K GPUs or more that fits nowhere "
        "reserves the node where its GPUs free soonest; other pods may go there only if they leave it intact "
        "(docs/timeline.md, Reservations)",
    )
    parser.add_argument(
        "--reserve-max",
        type=number(int, COUNT),
        default=1,
        metavar="R",
        help="reservations held at a time, the oldest waiting pods first",
    )
    parser.add_argument(
        "--backfill-quantile",
        type=number(float, FRACTION),
        default=0.9,
        metavar="Q",
        help="a pod backfills a reserved node when its remaining lifetime at this quantile ends before the "
        "reserved pod's expected start",
    )
    parser.add_argument(
        "--reserve-lifetimes",
        choices=LIFETIME_SOURCES,
        default=None,
        help="what the reservations are told of remaining lifetimes (hidden: no backfill, the node with the "
        "most free GPUs) [--lifetimes]",
    )
    parser.add_argument(
        "--predict-starts",
        type=start_sources,
        default=(),
        metavar="SOURCES",
        help="forecast the start (p50, p90) of each pod that fits nowhere on arrival, from residents' "
        "remaining lifetimes (model: the cross-fitted lifetime model; oracle: the true ones), and report "
        "how often actual starts fall within them; comma-separated, e.g. model,oracle",
    )
    parser.add_argument(
        "--start-queue",
        choices=START_QUEUE,
        default="ahead",
        help="with --predict-starts: place the pods ahead in the queue first (ahead), ignore them "
        "(ignore), or report both",
    )
    add_workers(parser)
    add_outputs(parser, "runs/timeline", "folder for summary.json and curves.png")
    parser.set_defaults(handler=timeline)


def compression(trace: str, nodes: str, load: float, fraction: float) -> tuple[float, TimedWorkload]:
    """The ``k`` of ``--load`` on this trace and node list (``--compress-arrivals``); a
    load out of reach is an error naming ``--load``."""
    workload = _workload(trace, nodes)
    try:
        k = workload.compression_for(load, fraction)
    except SchedulerInputError as error:
        raise _option_error(error) from None
    return k, workload


def _workload(trace: str, nodes: str) -> TimedWorkload:
    workload = load_timed_workload(trace, nodes)
    if not workload.pods:
        raise CommandLineError("timeline", "--trace", f"{trace}: no pod to replay")
    return workload


def _option_error(error: SchedulerInputError) -> CommandLineError:
    return CommandLineError("timeline", "--load" if error.field == "load" else "--trace", error.problem)


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


def describe_clusters(workload: TimedWorkload, specs: list[TimelineSpec]) -> str:
    """One clock: what the pods offer, and each seed's cluster (min-max over seeds): the
    share of the node list, its GPUs and the load offered to them."""
    try:
        clusters = [cluster_and_clock(workload, spec)[:2] for spec in specs]
        offered = workload.offered_on_trace_clock_milli()
    except SchedulerInputError as error:
        raise _option_error(error) from None
    held = [gpu_capacity_milli(nodes) // 1000 for nodes, _ in clusters]
    loads = [offered / max(1000 * gpus, 1) for gpus in held]
    creation = workload.creation_s
    window = _duration(float(creation[-1] - busy_from(creation)))
    spec = specs[0]
    sized = (
        f"sized for --load {spec.load:g}"
        if spec.node_fraction is None
        else f"--node-fraction {spec.node_fraction:g}"
    )
    fractions = _span([fraction for _, fraction in clusters], ".4f")
    return (
        f"one clock (the trace's seconds / {spec.time_scale:g}, arrivals and lifetimes alike): "
        f"the pods offer {offered / 1000:.1f} GPUs over the busy window ({window}); "
        f"clusters {sized}: the seeds' samples hold {_span(held, 'd')} GPUs ({fractions} of the node "
        f"list's {workload.capacity_milli // 1000}), offered {_span(loads, '.3f')} x theirs; "
        f"censored (running at the trace's end): {int(workload.censored.sum())} pods"
    )


def _duration(seconds: float) -> str:
    return f"{seconds / 86_400:.1f} days" if seconds >= 2 * 86_400 else f"{seconds / 3600:.2f} h"


def _span(values: list[int] | list[float], spec: str) -> str:
    low, high = (format(v, spec) for v in (min(values), max(values)))
    return low if low == high else f"{low}-{high}"


def refuse_options_that_clash(args: argparse.Namespace) -> None:
    """On one clock --load sizes the cluster, so it and --node-fraction cannot both be
    given; --time-scale scales arrivals and lifetimes alike, which compressed arrivals
    do not."""
    if args.compress_arrivals and args.time_scale != 1.0:
        raise CommandLineError(
            "timeline", "--time-scale", "scales arrivals and lifetimes alike; not with --compress-arrivals"
        )
    if "model" in (args.lifetimes, getattr(args, "reserve_lifetimes", None)) and args.time_scale != 1.0:
        raise CommandLineError(
            "timeline", "--lifetimes", "the model forecasts in the trace's seconds; not with --time-scale"
        )
    if args.predict_starts and "model" in args.predict_starts and args.time_scale != 1.0:
        raise CommandLineError(
            "timeline",
            "--predict-starts",
            "the model forecasts in the trace's seconds; not with --time-scale",
        )
    if not args.compress_arrivals and args.load is not None and args.node_fraction is not None:
        raise CommandLineError(
            "timeline",
            "--load",
            "on the trace's clock --load sizes the cluster; with --node-fraction the load follows from it "
            "(and is reported): give one of the two",
        )


def key_value(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` (the value is validated with the plugin's args)."""
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def lifetime_options(args: argparse.Namespace, policy: str) -> dict[str, Any]:
    """``--lifetimes`` and ``--lifetime-arg`` for a policy that reads them (none
    for the others, whose labels stay their names)."""
    if not uses_lifetimes(policy):
        return {}
    try:
        resolve_with_args(policy, args.lifetime_arg)
    except SchedulerInputError as error:
        raise CommandLineError("timeline", "--lifetime-arg", f"{error.field}: {error.problem}") from None
    return {"lifetimes": args.lifetimes, "lifetime_args": tuple(args.lifetime_arg)}


def timeline_specs(args: argparse.Namespace) -> tuple[list[TimelineSpec], str]:
    """The replays of a parsed command line, and the line that describes their load."""
    refuse_options_that_clash(args)
    arms = chosen_arms(args)
    policies = [arm.removesuffix(RESERVE_SUFFIX) for arm in arms]
    told = {
        arm: {**lifetime_options(args, p), **reservation_options(args, arm)}
        for arm, p in zip(arms, policies, strict=True)
    }  # refused before the trace loads
    checkpoint = str(args.checkpoint) if args.checkpoint else None
    load = DEFAULT_LOAD if args.load is None else args.load
    common = {
        "nodes": args.nodes,
        "load": load,
        "max_wait_s": args.max_wait,
        "checkpoint": checkpoint,
        "compress_arrivals": args.compress_arrivals,
        "predict_starts": start_variants(args.predict_starts, args.start_queue),
    }
    if args.compress_arrivals:
        fraction = COMPRESSED_NODE_FRACTION if args.node_fraction is None else args.node_fraction
        k, workload = compression(args.trace, args.nodes, load, fraction)
        specs = [
            TimelineSpec(args.trace, p, s, compression=k, node_fraction=fraction, **common, **told[arm])
            for arm, p in zip(arms, policies, strict=True)
            for s in args.seeds
        ]
        line = f"arrivals compressed k = {k:.6g}x; {describe_load(workload, k, fraction, args.seeds)}"
        return specs, line
    workload = _workload(args.trace, args.nodes)
    specs = [
        TimelineSpec(
            args.trace,
            p,
            s,
            node_fraction=args.node_fraction,
            time_scale=args.time_scale,
            **common,
            **told[arm],
        )
        for arm, p in zip(arms, policies, strict=True)
        for s in args.seeds
    ]
    return specs, describe_clusters(workload, specs[: len(args.seeds)])


def timeline(args: argparse.Namespace) -> int:
    specs, line = timeline_specs(args)
    print(f"{args.trace}: {line}; max wait {args.max_wait:g} s")
    with tqdm(total=None, unit="pod", disable=args.quiet, desc=f"{len(specs)} replays") as bar:
        results = run_sweep(specs, run_timeline, args.workers, on_pods=_advance(bar))
    print_issues(results)
    summary = timeline_report.summarise(results)
    print(timeline_report.table(summary))
    differences = timeline_report.headline_differences(results)
    if differences:
        print(
            f"\npaired over seeds ({paired.CONFIDENCE:.0%} Student-t interval on the mean difference; "
            "ahead: a higher value, the worse one for waits and failures):"
        )
        print(timeline_report.paired_table(summary, differences))
    if args.predict_starts:
        summary["start_coverage"] = timeline_starts.summarise(results)
        print(f"\npredicted starts of the pods that fit nowhere on arrival ({timeline_starts.TABLE_NOTE}):")
        print(timeline_starts.table(results))
    report.write_summary(summary, args.out / "summary.json")
    timeline_report.plot(results, args.out / "curves.png")
    print(f"wrote {args.out / 'summary.json'} and {args.out / 'curves.png'}")
    return 0
