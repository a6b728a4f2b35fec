"""kube's own scheduler benchmark, scheduler_perf, on the local control plane: its test
cases (every performance-config.yaml of test/integration/scheduler_perf in the pinned
Kubernetes module, read in place) run against kube-scheduler and rl-scheduler profiles.

    nice -n 10 .venv/bin/python benchmarks/scheduler_perf.py --nodes 500,1000 \\
        [--cases SchedulingBasic,SchedulingPodAffinity,...] \\
        [--schedulers kube-scheduler,fgd-reserve,fgd,gnn] [--rounds 3] [--qps-burst 5000/5000] \\
        [--name rl-perf] [--run-timeout 600] [--measured before-start|while-running] \\
        [--out runs/scheduler_perf] [--keep-cluster] [--list]

For each node count and test case (sized as ``scheduler_perf_plan`` says; ``--list``
prints the plans and the skipped cases with why): it makes the nodes from the case's
node template (KWOK nodes, no other labels but the hostname and KWOK's), the namespaces,
PriorityClasses, the DRA driver's ResourceSlices, ``createAny`` objects and the claims
the harness allocates (``scheduler_perf_dra``), and the init pods, which a kube-scheduler
started for them places (as kube's harness does; ``scheduler_perf_objects``); then, per
round and scheduler (interleaved), it creates the background pods (``skipWaitToCompletion``)
and the measured pods while nothing schedules them (the measured ones after a ``barrier``
once the scheduler has passed it), starts the scheduler under test with the case's
``deletePods`` and ``churn`` (``scheduler_perf_background``) and reports pods/s between
the first and the last bind its watch saw ((bound - 1) / span, as kube's harness samples
its throughput from the first scheduled pod on), the pods bound, why the others are
pending (their PodScheduled condition), and every hard constraint broken over all the
case's pods (``scheduler_perf_checks``, ``_fit``, ``_volume_checks``, ``_claim_checks``).
A case with a metric window (kube's event-handling cases) runs instead in sequence,
each run from an empty cluster (``scheduler_perf_sequence``), measured over the window's
pods bound inside it.
Each round's line also says when the first and the last bind came after the scheduler's
start, and the scheduler's attempts by result, from its /metrics: where binds wait on
something else (a preemptor on its victims' deletions), the rate after the first bind
says how the binds bunch, and the last bind says when the work was done. With
``--measured while-running`` the measured pods are made once the scheduler's /readyz
answers, as kube's harness makes them while its scheduler runs; creation then paces both
schedulers, and a preemptor is tried as it arrives instead of in one pass over all of
them. The run's
pods are then deleted; the init pods stay for the next run unless the run may have
removed some (preemption, deletions, churn). Tables (``scheduler_perf_report``): medians
over rounds, lowest and highest pods/s, and x kube = median / kube-scheduler's median;
the same as JSON under ``--out``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from null_binder import raw_list, raw_watch
from scheduler_perf_background import RunActivity, wait_barrier
from scheduler_perf_checks import broken_constraints
from scheduler_perf_claim_checks import broken_claim_constraints
from scheduler_perf_dra import (
    allocate_claims,
    delete_claims,
    dra_objects,
    driver_nodes,
    replace_slices,
    resource_slice,
    wait_claims_released,
)
from scheduler_perf_fit import broken_fit
from scheduler_perf_objects import (
    PERF_LABEL,
    ROLE_LABEL,
    PodObjects,
    create_all,
    create_any,
    delete_run_pods,
    ensure_namespaces,
    ensure_priority_classes,
    list_nodes,
    make_nodes,
    perf_nodes,
    pod_objects,
)
from scheduler_perf_ops import (
    AllocClaimsOp,
    AnyOp,
    ChurnOp,
    DeletePodsOp,
    NamespacesOp,
    NodesOp,
    Plan,
    PodsOp,
    ResourceDriverOp,
    UpdateOp,
)
from scheduler_perf_plan import plan, test_cases
from scheduler_perf_report import pending_reasons, table
from scheduler_perf_sequence import Sequence
from scheduler_perf_steady import run_steadily
from scheduler_perf_volume_checks import broken_volume_constraints
from scheduler_perf_volumes import storage_objects
from throughput import free_port, make_scheduler, start_cluster
from throughput_cluster import BindWatcher, RunTimeoutError
from throughput_schedulers import (
    REPO,
    KubeScheduler,
    RunContext,
    SchedulerExitedError,
    SchedulerUnderTest,
    parse_series,
)

sys.path.insert(0, str(REPO / "hack"))
from devcluster import cluster, kube
from devcluster.binaries import Binaries
from devcluster.workload import new_run_id

INIT_SCHEDULER = "perf-init"
BEFORE_START, WHILE_RUNNING = "before-start", "while-running"  # --measured
STALL_S = 30.0  # no bind for this long with pods pending: the run is over
FIRST_BIND_S = 180.0  # the same, before the first bind
POLL_S = 0.2


@dataclass
class RunResult:
    case: str
    nodes: int
    scheduler: str
    round: int
    measured: int
    ran: str = ""  # what scheduled (a learned profile may have fallen back)
    bound: int = 0
    pods_per_s: float = math.nan
    span_s: float = math.nan
    first_bind_s: float = math.nan  # from the scheduler's start to the first bind
    last_bind_s: float = math.nan  # and to the last: when every measured pod it bound was bound
    ready_s: float = math.nan  # --measured while-running: from its start to /readyz answering
    created_s: float = math.nan  # --measured while-running: creating the measured pods took
    attempts: dict[str, int] = field(default_factory=dict)  # result -> scheduling attempts, from /metrics
    pending: dict[str, int] = field(default_factory=dict)  # reason -> measured pods
    others_pending: dict[str, int] = field(default_factory=dict)  # the same for background, churned pods
    broken: list[str] = field(default_factory=list)
    error: str = ""


class AnyNamespaceBindWatcher(BindWatcher):
    """``BindWatcher`` over every namespace (scheduler_perf puts pods in several)."""

    def _record(self, pod: dict[str, Any]) -> None:
        key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"  # names repeat across namespaces
        if (pod.get("spec") or {}).get("nodeName") and key not in self.bound_at:
            self.bound_at[key] = time.time()

    def _list(self) -> str:
        listing = raw_list(self.core, label_selector=self.selector)
        for item in listing["items"]:
            self._record(item)
        return str(listing["metadata"]["resourceVersion"])

    def _follow(self, resource_version: str) -> None:
        while not self._stop.is_set():
            try:
                for event in raw_watch(self.core, resource_version, label_selector=self.selector):
                    if self._stop.is_set():
                        return
                    resource_version = event["object"]["metadata"]["resourceVersion"]
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        self._record(event["object"])
            except Exception as error:  # expired or dropped: list again
                print(f"  watch restarted: {type(error).__name__}: {str(error)[:200]}", flush=True)
                time.sleep(0.5)
                resource_version = self._list()


# ---- objects ------------------------------------------------------------------------


# ---- one case -----------------------------------------------------------------------


def wait_bound(scheduler: SchedulerUnderTest, watcher: BindWatcher, pods: int, timeout_s: float) -> None:
    """Until every pod is bound, or none was for ``STALL_S`` since the last bind (pods
    left pending) or for ``FIRST_BIND_S`` before the first, or ``timeout_s`` passed.
    Where every measured pod preempts (PreemptionBasic), none binds until each has been
    tried once and the first victims are gone: hundreds of cycles before the first bind,
    for either scheduler, on a busy machine."""
    deadline = time.monotonic() + timeout_s
    last, last_change = 0, time.monotonic()
    while watcher.bound < pods:
        scheduler.check_alive()
        now = time.monotonic()
        if watcher.bound != last:
            last, last_change = watcher.bound, now
        stall_s = STALL_S if last else FIRST_BIND_S
        if now - last_change > stall_s or now > deadline:
            return
        time.sleep(POLL_S)


def place_init_pods(core: client.CoreV1Api, context: RunContext, init: list[PodObjects]) -> None:
    if not init:
        return
    placer = KubeScheduler(INIT_SCHEDULER, Binaries.in_cache().kube_scheduler)
    watcher = AnyNamespaceBindWatcher(core, f"{PERF_LABEL}=init")
    watcher.start()
    try:
        placer.start(context)
        create_all(core, init)
        wait_bound(placer, watcher, len(init), 600)
        if watcher.bound < len(init):
            pending = pending_reasons(raw_list(core, label_selector=f"{PERF_LABEL}=init")["items"])
            raise RuntimeError(
                f"kube-scheduler placed {watcher.bound} of {len(init)} init pods; pending: "
                + "; ".join(f"{n}: {reason[:200]}" for reason, n in sorted(pending.items()))
            )
    finally:
        placer.stop()
        watcher.stop()


@dataclass
class CaseCluster:
    """What every run of one case shares."""

    core: client.CoreV1Api
    kubeconfig: Path
    workdir: Path
    plan: Plan
    namespaces: set[str]
    namespace_labels: dict[str, dict[str, str]]

    @property
    def uses_claims(self) -> bool:
        """Whether the case makes DRA claims or claim templates."""
        return any(isinstance(op, AnyOp) and op.resource.startswith("resourceclaim") for op in self.plan.ops)

    @property
    def pod_namespaces(self) -> set[str]:
        """The namespaces of the measured and background pods."""
        return {
            op.namespace for op in self.plan.ops if isinstance(op, PodsOp) and (op.measured or op.background)
        }


def run_pods(the_plan: Plan, run: str, scheduler_name: str) -> tuple[list[PodObjects], list[PodObjects]]:
    """A run's measured pods (but those made in steady state, ``scheduler_perf_steady``),
    and its background ones (``skipWaitToCompletion``)."""
    measured: list[PodObjects] = []
    background: list[PodObjects] = []
    for index, op in enumerate(the_plan.ops):
        if isinstance(op, PodsOp) and (op.measured or op.background) and not op.steady_s:
            made = [pod_objects(op, i, f"{run}-{index}-{i}", scheduler_name, run) for i in range(op.count)]
            (measured if op.measured else background).extend(made)
    return measured, background


@dataclass
class Measured:
    """What one run has under way: its id, the scheduler under test, the watch of its
    binds, what goes on beside them, its measured pods, and whether those were made
    before the scheduler started."""

    run: str
    scheduler: SchedulerUnderTest
    watcher: BindWatcher
    activity: RunActivity
    pods: list[PodObjects]
    made_before_start: bool


def bind_measured(shared: CaseCluster, args: argparse.Namespace, result: RunResult, the: Measured) -> None:
    """Once the scheduler under test has started: past the case's barrier (or its /readyz
    answering), with the case's deletions and churn going on, the measured pods made
    (unless they were before its start) and bound, or made in steady state."""
    core, the_plan = shared.core, shared.plan
    if the_plan.barrier_stage:
        selector = f"{PERF_LABEL}={the.run},{ROLE_LABEL}=background"
        wait_barrier(core, selector, the_plan.barrier_stage, args.run_timeout)
    elif not the.made_before_start:  # kube's harness: its scheduler runs when createPods starts
        result.ready_s = the.scheduler.wait_ready(args.run_timeout)
    the.activity.start()
    steady = the_plan.steady
    if steady is not None:
        index, op = steady
        name = the.scheduler.scheduler_name
        result.measured = run_steadily(core, op, index, the.run, name, the.watcher, STALL_S)
        return
    if not the.made_before_start:
        created = time.time()
        create_all(core, the.pods)
        result.created_s = time.time() - created
    wait_bound(the.scheduler, the.watcher, len(the.pods), args.run_timeout)


def start_under_test(
    shared: CaseCluster, args: argparse.Namespace, scheduler: SchedulerUnderTest, round_: int
) -> float:
    """The scheduler under test started, its files in the case's folder; when (wall clock)."""
    qps, burst = args.qps_burst
    run_dir = shared.workdir / f"{scheduler.scheduler_name}-{round_}"
    run_dir.mkdir(exist_ok=True)
    started = time.time()
    scheduler.start(RunContext(shared.kubeconfig, qps, burst, run_dir, free_port()))
    return started


def measure(shared: CaseCluster, args: argparse.Namespace, result: RunResult) -> None:
    """One scheduler on the case's measured pods; fills ``result``."""
    core, the_plan = shared.core, shared.plan
    run = new_run_id("perf")
    scheduler = make_scheduler(result.scheduler, args)
    pods, background = run_pods(the_plan, run, scheduler.scheduler_name)
    during = [op for op in the_plan.ops if isinstance(op, DeletePodsOp | ChurnOp)]
    activity = RunActivity(core, during, run, scheduler.scheduler_name)
    watcher = AnyNamespaceBindWatcher(core, f"{PERF_LABEL}={run},!{ROLE_LABEL}")
    print(f"  {result.scheduler} round {result.round}: ", end="", flush=True)
    try:
        if shared.uses_claims:  # the last run's claims deallocated (shared ones) or deleted (from templates)
            wait_claims_released(client.ResourceV1Api(core.api_client), shared.pod_namespaces, 120)
        create_all(core, background)
        before_start = args.measured == BEFORE_START and not the_plan.barrier_stage and not the_plan.steady
        if before_start:  # so that creation does not pace the scheduler
            create_all(core, pods)
        watcher.start()
        started = start_under_test(shared, args, scheduler, result.round)
        bind_measured(shared, args, result, Measured(run, scheduler, watcher, activity, pods, before_start))
        activity.stop()
        record_binds(result, sorted(watcher.bound_at.values()), started, scheduler)
        scheduler.stop()
        check(shared, run, result)
        result.error = "; ".join(activity.errors)
        print(round_line(result), flush=True)
    except (SchedulerExitedError, RunTimeoutError, ApiException, RuntimeError, OSError, ValueError) as error:
        result.error = str(error)
        print(f"FAILED: {error}", flush=True)
    finally:
        scheduler.stop()
        activity.stop()
        watcher.stop()
        activity.cleanup()
        delete_run_pods(core, shared.namespaces, f"{PERF_LABEL}={run}")


def round_line(result: RunResult) -> str:
    made = ""
    if not math.isnan(result.ready_s):
        made = f"measured pods made from {result.ready_s:.1f} s (/readyz)"
        made += ", " if math.isnan(result.created_s) else f" in {result.created_s:.1f} s, "
    return (
        f"{result.pods_per_s:.1f} pods/s, {result.bound}/{result.measured} bound, "
        f"{len(result.broken)} constraints broken ({result.ran}); binds from "
        f"{result.first_bind_s:.1f} to {result.last_bind_s:.1f} s after its start, "
        f"{made}attempts {attempts_text(result.attempts)}"
    )


def record_binds(
    result: RunResult, times: list[float], started: float, scheduler: SchedulerUnderTest
) -> None:
    """The rate between the first and the last bind (``times``, sorted), the wait for the
    first, and what the scheduler's /metrics say of the run."""
    result.bound = len(times)
    if len(times) >= 2:
        result.span_s = times[-1] - times[0]
        result.pods_per_s = (len(times) - 1) / result.span_s if result.span_s > 0 else math.inf
    if times:
        result.first_bind_s = times[0] - started
        result.last_bind_s = times[-1] - started
    if result.bound:
        scheduler.latency(result.bound)  # reads which policy scored, from /metrics
    result.attempts = attempts(scheduler)
    result.ran = scheduler.what_ran()


def attempts(scheduler: SchedulerUnderTest) -> dict[str, int]:
    """Scheduling attempts by result (``scheduler_schedule_attempts_total``, kube's name in
    both schedulers), and ``preemption`` (``scheduler_preemption_attempts_total``); empty when
    /metrics does not answer. Says how often pods were tried, beside how fast they bound."""
    try:
        text = scheduler.scrape()
    except OSError:
        return {}
    counts: dict[str, int] = {}
    for labels, value in parse_series(text, "scheduler_schedule_attempts_total"):
        if labels.get("profile") == scheduler.scheduler_name:
            counts[labels["result"]] = counts.get(labels["result"], 0) + int(value)
    for _, value in parse_series(text, "scheduler_preemption_attempts_total"):
        counts["preemption"] = counts.get("preemption", 0) + int(value)
    return counts


def attempts_text(counts: dict[str, int]) -> str:
    return ", ".join(f"{result} {n}" for result, n in sorted(counts.items())) or "not read"


def check(shared: CaseCluster, run: str, result: RunResult) -> None:
    """Pending reasons and broken constraints over the run's and the init pods."""
    core = shared.core
    everything = raw_list(core, label_selector=PERF_LABEL)["items"]
    mine = [p for p in everything if p["metadata"]["labels"].get(PERF_LABEL) in (run, "init")]
    of_run = [p for p in mine if p["metadata"]["labels"][PERF_LABEL] == run]
    result.pending = pending_reasons([p for p in of_run if ROLE_LABEL not in p["metadata"]["labels"]])
    result.others_pending = pending_reasons([p for p in of_run if ROLE_LABEL in p["metadata"]["labels"]])
    # every node: the benchmark's, those its churn made, and any other of the cluster
    nodes = list_nodes(core)
    result.broken = broken_constraints(mine, nodes, shared.namespace_labels, shared.plan.counts_only_grow)
    result.broken += broken_fit(mine, nodes)
    claims, volumes, csi_nodes = storage_objects(core, PERF_LABEL)
    result.broken += broken_volume_constraints(mine, nodes, claims, volumes, csi_nodes)
    if shared.uses_claims:
        resource_claims, classes, slices = dra_objects(client.ResourceV1Api(core.api_client))
        result.broken += broken_claim_constraints(mine, nodes, resource_claims, classes, slices)


def make_dra_objects(core: client.CoreV1Api, the_plan: Plan, nodes: list[NodesOp]) -> None:
    """In the case's order: the driver's ResourceSlices (those of an earlier case
    replaced), ``createAny``'s objects (DRA claims of an earlier run deleted first) and
    ``allocResourceClaims``."""
    resource = client.ResourceV1Api(core.api_client)
    slices = [
        resource_slice(op.driver, node, op.max_claims, {PERF_LABEL: "driver"})
        for op in the_plan.ops
        if isinstance(op, ResourceDriverOp)
        for node in driver_nodes(nodes, op.nodes)
    ]
    replace_slices(resource, slices, f"{PERF_LABEL}=driver", 60)
    claimed = {
        op.namespace for op in the_plan.ops if isinstance(op, AnyOp) and op.resource == "resourceclaims"
    }
    delete_claims(resource, sorted(claimed), 120)
    for op in the_plan.ops:
        if isinstance(op, AnyOp):
            create_any(core, op)
        elif isinstance(op, AllocClaimsOp):
            allocated = allocate_claims(resource, op.namespace)
            print(f"  {allocated} claims allocated by the harness", flush=True)


def prepare_namespaces(core: client.CoreV1Api, kubeconfig: Path, the_plan: Plan) -> set[str]:
    """The case's namespaces, made and emptied of this benchmark's pods."""
    named = [op for op in the_plan.ops if isinstance(op, NamespacesOp)]
    others = {
        op.namespace
        for op in the_plan.ops
        if isinstance(op, PodsOp | AnyOp | ChurnOp | DeletePodsOp | UpdateOp) and op.namespace
    }
    ensure_namespaces(core, kubeconfig, named, others)
    namespaces = {ns for op in named for ns in op.names} | others
    delete_run_pods(core, namespaces, PERF_LABEL)
    return namespaces


def namespace_labels(core: client.CoreV1Api) -> dict[str, dict[str, str]]:
    listed: Any = core.list_namespace(_preload_content=False)
    return {
        n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in json.loads(listed.data)["items"]
    }


def run_case(
    core: client.CoreV1Api, kubeconfig: Path, the_plan: Plan, args: argparse.Namespace, folder: Path
) -> list[RunResult]:
    if the_plan.in_sequence:
        return run_in_sequence(core, kubeconfig, the_plan, args, folder)
    qps, burst = args.qps_burst
    nodes = [op for op in the_plan.ops if isinstance(op, NodesOp)]
    make_nodes(core, nodes, timeout_s=60 + sum(op.count for op in nodes) / 5)
    ensure_priority_classes(core.api_client, the_plan.priorities)
    namespaces = prepare_namespaces(core, kubeconfig, the_plan)
    make_dra_objects(core, the_plan, nodes)
    init = [
        pod_objects(op, i, f"init-{index}-{i}", INIT_SCHEDULER, "init")
        for index, op in enumerate(the_plan.ops)
        if isinstance(op, PodsOp) and not op.measured and not op.background
        for i in range(op.count)
    ]
    workdir = folder / f"{the_plan.nodes}-{the_plan.case}"
    workdir.mkdir(parents=True, exist_ok=True)

    def place() -> None:
        place_init_pods(core, RunContext(kubeconfig, qps, burst, workdir, free_port()), init)
        print(f"  {len(init)} init pods placed by kube-scheduler", flush=True)

    place()
    shared = CaseCluster(core, kubeconfig, workdir, the_plan, namespaces, namespace_labels(core))
    results: list[RunResult] = []
    for round_ in range(1, args.rounds + 1):
        for variant in args.schedulers:
            result = RunResult(the_plan.case, the_plan.nodes, variant, round_, the_plan.measured_pods)
            results.append(result)
            if the_plan.replaces_init and len(results) > 1:  # the last run may have removed init pods
                delete_run_pods(core, namespaces, f"{PERF_LABEL}=init")
                try:
                    place()
                except (RunTimeoutError, RuntimeError) as error:  # this run is lost, the next places anew
                    result.error = f"init pods: {error}"
                    print(f"  {variant} round {round_}: FAILED: {result.error}", flush=True)
                    continue
            measure(shared, args, result)
    delete_run_pods(core, namespaces, PERF_LABEL)
    return results


def run_in_sequence(
    core: client.CoreV1Api, kubeconfig: Path, the_plan: Plan, args: argparse.Namespace, folder: Path
) -> list[RunResult]:
    """A case with a metric window (``scheduler_perf_sequence``): each run from a cluster
    without this benchmark's nodes, rounds interleaved."""
    make_nodes(core, [], timeout_s=120)
    ensure_priority_classes(core.api_client, the_plan.priorities)
    namespaces = prepare_namespaces(core, kubeconfig, the_plan)
    workdir = folder / f"{the_plan.nodes}-{the_plan.case}"
    workdir.mkdir(parents=True, exist_ok=True)
    shared = CaseCluster(core, kubeconfig, workdir, the_plan, namespaces, namespace_labels(core))
    results: list[RunResult] = []
    for round_ in range(1, args.rounds + 1):
        for variant in args.schedulers:
            result = RunResult(the_plan.case, the_plan.nodes, variant, round_, the_plan.measured_pods)
            results.append(result)
            measure_in_sequence(shared, args, result)
    return results


def measure_in_sequence(shared: CaseCluster, args: argparse.Namespace, result: RunResult) -> None:
    """One scheduler through the case's operations; fills ``result`` from the binds of the
    window's pods inside the window."""
    core = shared.core
    run = new_run_id("perf")
    scheduler = make_scheduler(result.scheduler, args)
    watcher = AnyNamespaceBindWatcher(core, f"{PERF_LABEL}={run}")
    print(f"  {result.scheduler} round {result.round}: ", end="", flush=True)
    try:
        watcher.start()
        started = start_under_test(shared, args, scheduler, result.round)
        result.ready_s = scheduler.wait_ready(args.run_timeout)
        sequence = Sequence(core, shared.plan, run, scheduler.scheduler_name, args.run_timeout)
        window = sequence.execute()
        scheduler.check_alive()
        bound = {f"{namespace}/{name}" for namespace, name in window.bound_when_closed}
        deadline = time.monotonic() + STALL_S
        while not bound <= watcher.bound_at.keys() and time.monotonic() < deadline:
            time.sleep(POLL_S)  # the watch tells the last binds a little later
        record_binds(
            result, sorted(t for key, t in watcher.bound_at.items() if key in bound), started, scheduler
        )
        scheduler.stop()
        check(shared, run, result)
        result.error = "; ".join(window.errors)
        print(
            f"{result.pods_per_s:.1f} pods/s, {result.bound}/{result.measured} bound in the window of "
            f"{window.closed - window.opened:.1f} s, {len(result.broken)} constraints broken ({result.ran}); "
            f"attempts {attempts_text(result.attempts)}",
            flush=True,
        )
    except (SchedulerExitedError, ApiException, RuntimeError, OSError, ValueError, TimeoutError) as error:
        result.error = str(error)
        print(f"FAILED: {error}", flush=True)
    finally:
        scheduler.stop()
        watcher.stop()
        delete_run_pods(core, shared.namespaces, f"{PERF_LABEL}={run}")
        delete_run_nodes(core, run, args.run_timeout)


def delete_run_nodes(core: client.CoreV1Api, run: str, timeout_s: float) -> None:
    """The nodes and CSINodes a run made; waits until the nodes are gone (the next run
    makes nodes of the same names)."""
    selector = f"{PERF_LABEL}={run}"
    client.StorageV1Api(core.api_client).delete_collection_csi_node(label_selector=selector)
    core.delete_collection_node(label_selector=selector)
    deadline = time.monotonic() + timeout_s
    while perf_nodes(core, run):
        if time.monotonic() > deadline:
            raise RunTimeoutError(f"nodes {selector} still there after {timeout_s:.0f} s")
        time.sleep(0.5)


# ---- the report -------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", default="500,1000")
    parser.add_argument("--cases", default="", help="test case names (default: every runnable one)")
    parser.add_argument("--schedulers", default="kube-scheduler,fgd-reserve,fgd,gnn")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--qps-burst", default="5000/5000")
    parser.add_argument("--name", default="rl-perf")
    parser.add_argument("--run-timeout", type=float, default=600)
    parser.add_argument(
        "--measured",
        choices=(BEFORE_START, WHILE_RUNNING),
        default=BEFORE_START,
        help="when the measured pods are made: before the scheduler starts (creation does not pace it), "
        "or once its /readyz answers, as kube's harness makes them while its scheduler runs "
        f"(cases with a barrier make them after it either way) [{BEFORE_START}]",
    )
    parser.add_argument("--checkpoint", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "scheduler_perf")
    parser.add_argument("--keep-cluster", action="store_true", help="leave the cluster running")
    parser.add_argument("--list", action="store_true", help="print the plans and skipped cases, run nothing")
    args = parser.parse_args(argv)
    args.nodes = [int(n) for n in args.nodes.split(",")]
    args.schedulers = args.schedulers.split(",")
    qps, burst = args.qps_burst.split("/")
    args.qps_burst = (float(qps), int(burst))
    return args


def plans(args: argparse.Namespace) -> tuple[list[Plan], list[str]]:
    wanted = set(args.cases.split(",")) if args.cases else None
    runnable: list[Plan] = []
    skipped: list[str] = []
    for nodes in args.nodes:
        for path, case in test_cases():
            if wanted is not None and case["name"] not in wanted:
                continue
            planned = plan(path, case, nodes)
            if isinstance(planned, str):
                skipped.append(f"{case['name']} at {nodes} nodes: {planned}")
            elif not any(
                (p.case, p.workload, p.nodes) == (planned.case, planned.workload, planned.nodes)
                for p in runnable
            ):
                runnable.append(planned)  # a case at kube's own size runs once for every --nodes
    return runnable, skipped


def op_summary(the_plan: Plan) -> list[tuple[str, int]]:
    """Each operation as ``kind count``, runs of equal ones as one with how many."""
    summary: list[tuple[str, int]] = []
    for op in the_plan.ops:
        what = f"{type(op).__name__[:-2].lower()} {getattr(op, 'count', '')}".strip()
        if isinstance(op, PodsOp):
            what += " measured" if op.measured else " background" if op.background else ""
            what += " with volumes" if op.claim is not None else ""
        if summary and summary[-1][0] == what:
            summary[-1] = (what, summary[-1][1] + 1)
        else:
            summary.append((what, 1))
    return summary


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    runnable, skipped = plans(args)
    for the_plan in runnable:
        counts = ", ".join(f"{what} x{n}" if n > 1 else what for what, n in op_summary(the_plan))
        print(f"{the_plan.case} at {the_plan.nodes} nodes (from {the_plan.workload}): {counts}")
    print("skipped:\n  " + "\n  ".join(skipped))
    if args.list:
        return 0
    info = start_cluster(args.name)
    core = kube.core_v1(info.kubeconfig)
    folder = args.out / dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    folder.mkdir(parents=True, exist_ok=True)
    results: list[RunResult] = []
    failed: list[str] = []  # cases whose setup failed (the init pods not all placed, ...): the run goes on
    try:
        for the_plan in runnable:
            print(f"{the_plan.case} at {the_plan.nodes} nodes:", flush=True)
            try:
                results += run_case(core, info.kubeconfig, the_plan, args, folder)
            except (RunTimeoutError, ApiException, RuntimeError, OSError) as error:
                failed.append(f"{the_plan.case} at {the_plan.nodes} nodes: {error}")
                print(f"  FAILED: {error}", flush=True)
            (folder / "results.json").write_text(json.dumps([asdict(r) for r in results], indent=1))
    finally:
        if not args.keep_cluster:
            cluster.down(args.name)
    report = table(results, args.schedulers)
    if failed:
        report += "\n\nfailed:\n" + "\n".join(failed)
    print(report)
    (folder / "table.txt").write_text(report + "\n\nskipped:\n" + "\n".join(skipped) + "\n")
    return 0 if not failed and all(not r.error and not r.broken for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
