"""Scheduling throughput on the local control plane: kube-scheduler (built from
source), rl-scheduler (heuristic and learned profiles) and a null binder (the ceiling
the API server allows a Python client), at the same client QPS/burst.

    nice -n 10 .venv/bin/python benchmarks/throughput.py --nodes 100,1000,5000 \\
        --pods 1000 --qps-burst 50/100,5000/5000 [--schedulers kube-scheduler,fgd,gnn,null] \\
        [--rounds 3] [--gpu-plugin hami|nvidia] [--rate 150] [--name rl-bench] [--keep-cluster] \\
        [--run-timeout 600] [--out runs/throughput]

It starts a dev cluster without kube-scheduler (hack/devcluster, ``--name``), so only
the scheduler under test binds, and adds KWOK nodes sized from the openb GPU node list
(lifting the admission plugin's not-ready taint itself once KWOK reports a node Ready:
the node lifecycle controller takes over 10 minutes for 5,000 nodes). Pods: 500m CPU
and 1 GiB each, 1 in 5 with a whole GPU and 1 in 5 with half a GPU; all fit.
For each node count, QPS/burst and scheduler: it deletes leftover pods, creates the M
pods while nothing schedules them (each scheduler has a schedulerName of its own),
starts the scheduler process and watches the pods. It reports pods/s between the first
and the last bind its watch saw ((bound - 1) / span), p50 and p99 of the attempts that
bound a pod (``scheduler_scheduling_attempt_duration_seconds{result="scheduled"}``,
interpolated like Prometheus' histogram_quantile; the null binder's own latencies go
through the same buckets), the process's CPU time (utime + stime, from its start to the
last bind, and within the binding span) and its peak memory (VmHWM). Tables go to
stdout, the same and more as JSON to ``--out``. With ``--rounds N`` every scheduler runs
N times, the schedulers interleaved, and the tables give the median of each figure,
the lowest and highest pods/s, and ratios of medians. Schedulers: ``kube-scheduler``,
``null``, ``null-events`` (the null binder posting kube-scheduler's ``Scheduled``
event after each bind: the ceiling for a scheduler that reports like kube-scheduler),
or an rl-scheduler profile (``fgd``, ``best-fit``, ``gnn``, ...). ``--gpu-plugin nvidia``
gives the nodes whole GPUs of NVIDIA's plain device plugin (every scheduler then makes
the same calls per pod); ``--rate`` replaces the burst with a steady arrival.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import re
import signal
import socket
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from throughput_cluster import (
    NAMESPACE,
    BindWatcher,
    NodeRelabeller,
    PacedCreator,
    RunTimeoutError,
    bench_node_specs,
    check_fits,
    create_pods,
    delete_pods,
    ensure_nodes,
    pod_requests,
    run_manifests,
)
from throughput_schedulers import (
    REPO,
    KubeScheduler,
    NullBinder,
    RlScheduler,
    RunContext,
    SchedulerExitedError,
    SchedulerUnderTest,
    cpu_seconds,
    peak_memory_mib,
)

sys.path.insert(0, str(REPO / "hack"))
from devcluster import cluster, kube, names, processes
from devcluster import nodes as devnodes
from devcluster.binaries import Binaries, openb_file
from devcluster.workload import new_run_id

POLL_S = 0.1


@dataclass(frozen=True)
class ClientLimits:
    qps: float
    burst: int

    @property
    def label(self) -> str:
        return f"{self.qps:g}/{self.burst}"


@dataclass
class RunResult:
    nodes: int
    qps: float
    burst: int
    scheduler: str  # as asked for: kube-scheduler, null, or an rl-scheduler profile
    ran: str = ""  # what actually scheduled (a learned profile may have fallen back)
    pods: int = 0
    bound: int = 0
    pods_per_s: float = math.nan
    span_s: float = math.nan  # first to last bind
    startup_s: float = math.nan  # process start to first bind
    p50_ms: float = math.nan
    p99_ms: float = math.nan
    latency_method: str = ""
    cpu_s: float = math.nan  # process start to last bind
    cpu_binding_s: float = math.nan  # first to last bind
    peak_mib: float = math.nan
    load_average: float = math.nan  # 1-minute load when the run started
    relabelled: int = 0  # nodes given a new label during the run (--relabel-per-s)
    offered_per_s: float = math.nan  # --rate: pods created a second, as sent
    e2e_p50_ms: float = math.nan  # --rate: creation (the request sent) to bound (the watch)
    e2e_p99_ms: float = math.nan
    round: int = 1
    error: str = ""


# ---- arguments --------------------------------------------------------------------


def parse_counts(text: str) -> list[int]:
    counts = sorted({int(part) for part in text.split(",") if part.strip()})
    if not counts or counts[0] < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give positive counts, e.g. 100,1000")
    return counts


def parse_limits(text: str) -> list[ClientLimits]:
    limits = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        qps, sep, burst = part.partition("/")
        try:
            limits.append(ClientLimits(float(qps), int(burst)))
        except ValueError:
            sep = ""
        if not sep or limits[-1].qps <= 0 or limits[-1].burst < 1:
            raise argparse.ArgumentTypeError(f"{part!r}: write QPS/BURST, e.g. 50/100")
    return limits


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=parse_counts, default=[100, 1000, 5000], help="node counts")
    parser.add_argument("--pods", type=int, default=1000, help="pods per run, created at once")
    parser.add_argument("--qps-burst", type=parse_limits, default=parse_limits("50/100,5000/5000"))
    parser.add_argument(
        "--schedulers",
        default="kube-scheduler,fgd,gnn,null",
        help="kube-scheduler, null, null-events, or rl-scheduler profiles (fgd, best-fit, gnn, ...)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run every scheduler this many times, interleaved; tables give medians and ranges",
    )
    parser.add_argument("--checkpoint", type=Path, help="learned policy checkpoint for rl-scheduler gnn")
    parser.add_argument("--node-list", type=Path, help="openb node list CSV [the GPU node list]")
    parser.add_argument("--name", default="rl-bench", help="dev cluster name")
    parser.add_argument("--keep-cluster", action="store_true", help="leave the cluster running")
    parser.add_argument(
        "--run-timeout", type=float, default=600.0, help="seconds per run, start to last bind"
    )
    parser.add_argument(
        "--node-timeout-per-100",
        type=float,
        default=60.0,
        help="seconds per 100 nodes to become Ready and untainted (1,000 took 200 s on 2 busy cores)",
    )
    parser.add_argument(
        "--relabel-per-s",
        type=float,
        default=0.0,
        help="during each run, patch a label onto this many nodes a second (as a fresh cluster's "
        "node lifecycle controller does)",
    )
    parser.add_argument(
        "--gpu-plugin",
        choices=("hami", "nvidia"),
        default="hami",
        help="the nodes' GPUs: HAMi's (shares; GPU pods bind under HAMi's node lock, which the "
        "dev cluster's device-plugin stand-in releases) or the plain NVIDIA device plugin's "
        "(whole GPUs, the half-GPU pods ask a whole one: every scheduler makes the same calls)",
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="a steady arrival instead of a burst: once the scheduler has bound a first pod, the "
        "--pods pods are created at this many a second while it schedules; the table gives the "
        "rate offered, the rate bound and creation-to-bound latencies",
    )
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "throughput")
    args = parser.parse_args(argv)
    args.schedulers = [s.strip() for s in args.schedulers.split(",") if s.strip()]
    if args.pods < 2:
        parser.error("--pods: at least 2 (pods/s needs a first and a last bind)")
    if args.rounds < 1:
        parser.error("--rounds: at least 1")
    if args.rate < 0 or args.rate != args.rate:
        parser.error(f"--rate: a number of pods a second, at least 0 (0: a burst), got {args.rate}")
    return args


# ---- one run ----------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def make_scheduler(variant: str, args: argparse.Namespace) -> SchedulerUnderTest:
    """A scheduler by name; ``<profile>@<checkout>`` runs rl-scheduler from another
    checkout (``fgd-reserve@/tmp/base``), so two versions are compared in one run."""
    profile, _, checkout = variant.partition("@")
    suffix = re.sub(r"[^a-z0-9-]+", "-", Path(checkout).name.lower()).strip("-") if checkout else ""
    scheduler_name = f"bench-{profile}" + (f"-{suffix or 'checkout'}" if checkout else "")
    if variant == "kube-scheduler":
        return KubeScheduler(scheduler_name, Binaries.in_cache().kube_scheduler)
    if variant in ("null", "null-events"):
        return NullBinder(scheduler_name, events=variant == "null-events")
    where = Path(checkout).resolve() if checkout else None
    if where is not None and not (where / "scheduler" / "cli.py").is_file():
        raise SystemExit(f"--schedulers: {variant}: {where} is not a checkout of rl-scheduler")
    return RlScheduler(scheduler_name, profile, args.checkpoint if profile == "gnn" else None, where)


def wait_all_bound(scheduler: SchedulerUnderTest, watcher: BindWatcher, pods: int, timeout_s: float) -> float:
    """Wait until the watch has seen every pod bound; returns the scheduler's CPU
    seconds when the first bind was seen."""
    deadline = time.monotonic() + timeout_s
    cpu_at_first = math.nan
    while watcher.bound < pods:
        scheduler.check_alive()
        if math.isnan(cpu_at_first) and watcher.bound:
            cpu_at_first = cpu_seconds(scheduler.pid)
        if time.monotonic() > deadline:
            raise RunTimeoutError(
                f"{scheduler.label}: {watcher.bound} of {pods} pods bound after {timeout_s:.0f} s; "
                f"last lines of its log:\n{scheduler.log_tail()}"
            )
        time.sleep(POLL_S)
    return cpu_at_first


def record_process(scheduler: SchedulerUnderTest, result: RunResult, pods: int, cpu_at_first: float) -> None:
    """The scheduler process's figures once its ``pods`` are bound: CPU (all, and since
    the first bind), peak memory, attempt latencies and what ran."""
    result.cpu_s = cpu_seconds(scheduler.pid)
    result.cpu_binding_s = result.cpu_s - cpu_at_first
    result.peak_mib = peak_memory_mib(scheduler.pid)
    latency = scheduler.latency(pods)
    result.p50_ms, result.p99_ms = latency.p50_s * 1000, latency.p99_s * 1000
    result.latency_method = f"{latency.method} of {latency.count}"
    result.ran = scheduler.what_ran()


def record_binds(result: RunResult, times: list[float]) -> None:
    """Pods bound and pods/s between the first and the last bind ``times`` (sorted)."""
    result.bound = len(times)
    if len(times) >= 2:
        result.span_s = times[-1] - times[0]
        result.pods_per_s = (len(times) - 1) / result.span_s if result.span_s > 0 else math.inf


def measure_steady(
    core: client.CoreV1Api, scheduler: SchedulerUnderTest, context: RunContext, result: RunResult,
    timeout_s: float, rate: float, shares: bool = True,
) -> None:  # fmt: skip
    """The scheduler started on an empty queue; once it has bound a first pod (start to
    first bind), the run's pods are created at ``rate`` a second while it schedules."""
    run_id = new_run_id("tp")
    watcher = BindWatcher(core, f"{names.RUN_LABEL}={run_id}")
    watcher.start()
    creator = PacedCreator(core, run_id, scheduler.scheduler_name, result.pods, rate, shares)
    warm_up = f"{run_id}-warm-up"
    result.load_average = os.getloadavg()[0]
    started = time.time()
    try:
        scheduler.start(context)
        [manifest] = run_manifests(run_id, scheduler.scheduler_name, 1, shares)
        manifest["metadata"]["name"] = warm_up
        core.create_namespaced_pod(NAMESPACE, kube.body(manifest))
        wait_all_bound(scheduler, watcher, 1, timeout_s)
        result.startup_s = watcher.bound_at[warm_up] - started
        cpu_at_first = cpu_seconds(scheduler.pid)
        creator.start()
        wait_all_bound(scheduler, watcher, result.pods + 1, timeout_s)
        creator.join(timeout_s)
        record_process(scheduler, result, result.pods + 1, cpu_at_first)
    finally:
        scheduler.stop()
        watcher.stop()
        bound = {name: at for name, at in watcher.bound_at.items() if name != warm_up}
        record_binds(result, sorted(bound.values()))
        result.offered_per_s = creator.offered_per_s
        waits = sorted(bound[name] - sent for name, sent in creator.created_at.items() if name in bound)
        if waits:
            percentiles = statistics.quantiles(waits, n=100, method="inclusive")
            result.e2e_p50_ms, result.e2e_p99_ms = 1000 * percentiles[49], 1000 * percentiles[98]
        if creator.errors:
            raise RuntimeError(f"{len(creator.errors)} pods not created, e.g. {creator.errors[0]}")


def measure(
    core: client.CoreV1Api, scheduler: SchedulerUnderTest, context: RunContext, result: RunResult,
    timeout_s: float, relabel_per_s: float = 0.0, shares: bool = True,
) -> None:  # fmt: skip
    run_id = new_run_id("tp")
    relabeller = NodeRelabeller(core, run_id, relabel_per_s) if relabel_per_s > 0 else None
    create_pods(core, run_id, scheduler.scheduler_name, result.pods, shares)
    watcher = BindWatcher(core, f"{names.RUN_LABEL}={run_id}")
    watcher.start()
    if watcher.bound:
        raise RuntimeError(f"{watcher.bound} pods were bound before {scheduler.label} started")
    result.load_average = os.getloadavg()[0]
    started = time.time()
    try:
        if relabeller is not None:
            relabeller.start()
        scheduler.start(context)
        cpu_at_first = wait_all_bound(scheduler, watcher, result.pods, timeout_s)
        record_process(scheduler, result, result.pods, cpu_at_first)
    finally:
        scheduler.stop()
        watcher.stop()
        if relabeller is not None:
            relabeller.stop()
            result.relabelled = relabeller.patched
        times = sorted(watcher.bound_at.values())
        record_binds(result, times)
        if times:
            result.startup_s = times[0] - started


def run_one(
    core: client.CoreV1Api, info: cluster.ClusterInfo, args: argparse.Namespace, nodes: int,
    limits: ClientLimits, variant: str, folder: Path, round_: int = 1,
) -> RunResult:  # fmt: skip
    result = RunResult(nodes, limits.qps, limits.burst, variant, pods=args.pods, round=round_)
    scheduler = make_scheduler(variant, args)
    workdir = folder / f"{nodes}-{limits.qps:g}-{limits.burst}-{variant}-{round_}"
    workdir.mkdir(parents=True, exist_ok=True)
    context = RunContext(info.kubeconfig, limits.qps, limits.burst, workdir, free_port())
    print(f"  {variant} at {limits.label}: ", end="", flush=True)
    try:
        delete_pods(core)
        shares = args.gpu_plugin == "hami"
        if args.rate:
            measure_steady(core, scheduler, context, result, args.run_timeout, args.rate, shares)
            print(
                f"offered {result.offered_per_s:.1f}, bound {result.pods_per_s:.1f} pods/s, creation to "
                f"bound p50 {result.e2e_p50_ms:.0f} ms, p99 {result.e2e_p99_ms:.0f} ms ({result.ran})",
                flush=True,
            )
        else:
            measure(core, scheduler, context, result, args.run_timeout, args.relabel_per_s, shares)
            print(
                f"{result.pods_per_s:.1f} pods/s, p50 {result.p50_ms:.0f} ms, p99 {result.p99_ms:.0f} ms "
                f"({result.ran})",
                flush=True,
            )
    except (SchedulerExitedError, RunTimeoutError, ApiException, RuntimeError, OSError) as error:
        result.error = str(error)
        print(f"FAILED after {result.bound} binds: {error}", flush=True)
    finally:
        scheduler.stop()
        try:
            delete_pods(core)
        except (RunTimeoutError, ApiException, OSError) as error:  # the next run tries again
            print(f"  cleaning up after {variant} failed: {error}", flush=True)
    return result


# ---- the matrix -------------------------------------------------------------------


def start_cluster(name: str) -> cluster.ClusterInfo:
    info = cluster.up(cluster.ClusterConfig(name=name, kube_scheduler=False))
    if "kube-scheduler" in processes.components(info.workdir):
        raise SystemExit(
            f"cluster {name!r} runs a kube-scheduler of its own (started without --no-kube-scheduler?); "
            f"stop it with `hack/cluster.sh down --name {name}` or pick another --name"
        )
    return info


def run_matrix(args: argparse.Namespace, info: cluster.ClusterInfo, report: Report) -> None:
    core = kube.core_v1(info.kubeconfig)
    kube.ensure_namespace(core, NAMESPACE, info.kubeconfig)
    rows = devnodes.read_openb_node_list(args.node_list or openb_file("openb_node_list_gpu_node"))
    hami = args.gpu_plugin == "hami"
    check_fits(bench_node_specs(rows, min(args.nodes), hami), pod_requests(args.pods, hami))
    for count in args.nodes:
        print(f"{count} nodes:", flush=True)
        try:
            ensure_nodes(
                core, bench_node_specs(rows, count, hami), timeout_s=args.node_timeout_per_100 * count / 100
            )
        except (RunTimeoutError, ApiException, OSError) as error:
            report.failures.append(f"{count} nodes: {error}")
            print(f"  FAILED to make {count} nodes: {error}; stopping here", flush=True)
            return
        for limits in args.qps_burst:
            # Rounds interleave the schedulers, so a slow spell of the machine (runs vary
            # by tens of percent) falls on all of them rather than on one.
            for round_ in range(1, args.rounds + 1):
                for variant in args.schedulers:
                    report.add(run_one(core, info, args, count, limits, variant, report.folder, round_))


# ---- the report -------------------------------------------------------------------


@dataclass
class Report:
    folder: Path
    argv: list[str]
    pods: int
    gpu_plugin: str
    rate: float
    results: list[RunResult]
    failures: list[str]

    def add(self, result: RunResult) -> None:
        self.results.append(result)
        self.write_json()

    def write_json(self) -> None:
        document = {
            "command": self.argv,
            "cpus": os.cpu_count(),
            "pods": self.pods,
            "gpu_plugin": self.gpu_plugin,
            "rate": self.rate,
            "results": [asdict(r) for r in self.results],
            "failures": self.failures,
            "tables": self.tables(),
        }
        (self.folder / "throughput.json").write_text(json.dumps(document, indent=2, default=str) + "\n")

    def steady_table(self, limits: ClientLimits, summaries: list[Summary], rounds: int) -> str:
        lines = [
            f"QPS/burst {limits.label}, {self.pods} pods at {self.rate:g}/s, {self.gpu_plugin} GPUs; "
            f"medians of {rounds} rounds",
            f"{'nodes':>6}  {'scheduler':<36} {'offered':>7} {'bound/s':>7} {'range':>13} "
            f"{'e2e p50 ms':>10} {'e2e p99 ms':>10} {'start s':>7} {'CPU s':>6} {'peak MiB':>8}",
        ]
        for summary in summaries:
            if summary.failed == summary.runs:
                lines.append(_failure_line(summary))
                continue
            failed = f" ({summary.failed} of {summary.runs} runs failed)" if summary.failed else ""
            lines.append(
                f"{summary.nodes:>6}  {summary.name:<36} {summary.offered_per_s:>7.1f} "
                f"{summary.pods_per_s:>7.1f} {summary.low:>6.1f}-{summary.high:<6.1f} "
                f"{summary.e2e_p50_ms:>10.0f} {summary.e2e_p99_ms:>10.0f} {summary.startup_s:>7.2f} "
                f"{summary.cpu_s:>6.1f} {summary.peak_mib:>8.0f}{failed}"
            )
        return "\n".join(lines)

    def tables(self) -> str:
        settings = sorted({(r.qps, r.burst) for r in self.results})
        return "\n\n".join(self.table(ClientLimits(q, b)) for q, b in settings)

    def table(self, limits: ClientLimits) -> str:
        rows = [r for r in self.results if (r.qps, r.burst) == (limits.qps, limits.burst)]
        summaries = summarize(rows)
        rounds = max(summary.runs for summary in summaries)
        if self.rate:
            return self.steady_table(limits, summaries, rounds)
        header = (
            f"QPS/burst {limits.label}, {self.pods} pods, {self.gpu_plugin} GPUs; "
            f"medians of {rounds} rounds\n"
            f"{'nodes':>6}  {'scheduler':<36} {'pods/s':>7} {'range':>13} {'p50 ms':>7} {'p99 ms':>7} "
            f"{'start s':>7} {'CPU s':>6} {'binding':>7} {'peak MiB':>8} "
            f"{'x kube':>6} {'x null':>6} {'x null+ev':>9}"
        )
        lines = [header]
        for summary in summaries:
            if summary.failed == summary.runs:
                lines.append(_failure_line(summary))
                continue
            ratios = [
                summary.pods_per_s / _rate_of(summaries, summary.nodes, baseline)
                for baseline in ("kube-scheduler", "null", "null-events")
            ]
            failed = f" ({summary.failed} of {summary.runs} runs failed)" if summary.failed else ""
            lines.append(
                f"{summary.nodes:>6}  {summary.name:<36} {summary.pods_per_s:>7.1f} "
                f"{summary.low:>6.1f}-{summary.high:<6.1f} {summary.p50_ms:>7.1f} {summary.p99_ms:>7.1f} "
                f"{summary.startup_s:>7.2f} {summary.cpu_s:>6.1f} {summary.cpu_binding_s:>7.1f} "
                f"{summary.peak_mib:>8.0f} "
                f"{ratios[0]:>6.2f} {ratios[1]:>6.2f} {ratios[2]:>9.2f}{failed}"
            )
        return "\n".join(lines)


@dataclass(frozen=True)
class Summary:
    """One scheduler at one node count and QPS/burst over its rounds: medians of the
    runs that bound every pod, and the lowest and highest pods/s among them."""

    nodes: int
    scheduler: str
    name: str
    runs: int
    failed: int
    pods_per_s: float
    low: float
    high: float
    p50_ms: float
    p99_ms: float
    startup_s: float
    cpu_s: float
    cpu_binding_s: float
    peak_mib: float
    offered_per_s: float
    e2e_p50_ms: float
    e2e_p99_ms: float
    error: str


def _failure_line(summary: Summary) -> str:
    reason = summary.error.splitlines()[0][:70]
    return f"{summary.nodes:>6}  {summary.name:<36} failed ({summary.runs} runs): {reason}"


def summarize(rows: list[RunResult]) -> list[Summary]:
    groups: dict[tuple[int, str], list[RunResult]] = {}
    for r in rows:
        groups.setdefault((r.nodes, r.scheduler), []).append(r)
    summaries = []
    for (nodes, scheduler), runs in groups.items():
        good = [r for r in runs if not r.error]
        rates = [r.pods_per_s for r in good]

        def median_of(field: str, good: list[RunResult] = good) -> float:
            return statistics.median(getattr(r, field) for r in good) if good else math.nan

        summaries.append(
            Summary(
                nodes=nodes,
                scheduler=scheduler,
                name=(good or runs)[0].ran or scheduler,
                runs=len(runs),
                failed=len(runs) - len(good),
                pods_per_s=median_of("pods_per_s"),
                low=min(rates, default=math.nan),
                high=max(rates, default=math.nan),
                p50_ms=median_of("p50_ms"),
                p99_ms=median_of("p99_ms"),
                startup_s=median_of("startup_s"),
                offered_per_s=median_of("offered_per_s"),
                e2e_p50_ms=median_of("e2e_p50_ms"),
                e2e_p99_ms=median_of("e2e_p99_ms"),
                cpu_s=median_of("cpu_s"),
                cpu_binding_s=median_of("cpu_binding_s"),
                peak_mib=median_of("peak_mib"),
                error=next((r.error for r in runs if r.error), ""),
            )
        )
    return summaries


def _rate_of(summaries: list[Summary], nodes: int, scheduler: str) -> float:
    for summary in summaries:
        if summary.nodes == nodes and summary.scheduler == scheduler:
            return summary.pods_per_s
    return math.nan


def _stop_on_sigterm(signum: int, frame: FrameType | None) -> None:  # noqa: ARG001
    raise KeyboardInterrupt  # runs the finally blocks: schedulers and cluster stop


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    folder = args.out / dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    folder.mkdir(parents=True, exist_ok=True)
    report = Report(folder, sys.argv, args.pods, args.gpu_plugin, args.rate, [], [])
    print(f"cluster {args.name!r} (no kube-scheduler); results in {folder}", flush=True)
    info = start_cluster(args.name)
    try:
        run_matrix(args, info, report)
    finally:
        report.write_json()
        if args.keep_cluster:
            print(f"cluster {args.name!r} kept: KUBECONFIG={info.kubeconfig}", flush=True)
        else:
            cluster.down(args.name)
    print("\n" + report.tables())
    for failure in report.failures:
        print(f"\nfailed: {failure}")
    print(f"\nJSON: {folder / 'throughput.json'}")
    return 1 if report.failures or any(r.error for r in report.results) else 0


if __name__ == "__main__":
    sys.exit(main())
