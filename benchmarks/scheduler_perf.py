"""kube's own scheduler benchmark, scheduler_perf, on the local control plane: its test
cases (every performance-config.yaml of test/integration/scheduler_perf in the pinned
Kubernetes module, read in place) run against kube-scheduler and rl-scheduler profiles.

    nice -n 10 .venv/bin/python benchmarks/scheduler_perf.py --nodes 500,1000 \\
        [--cases SchedulingBasic,SchedulingPodAffinity,...] \\
        [--schedulers kube-scheduler,fgd-reserve,fgd,gnn] [--rounds 3] [--qps-burst 5000/5000] \\
        [--name rl-perf] [--run-timeout 600] [--out runs/scheduler_perf] [--keep-cluster] [--list]

For each node count and test case (sized as ``scheduler_perf_plan`` says; ``--list``
prints the plans and the skipped cases with why): it makes the nodes from the case's
node template (KWOK nodes, no other labels but the hostname and KWOK's), the namespaces,
and the init pods, which a kube-scheduler started for them places (as kube's harness
does); then, per round and scheduler (interleaved), it creates the measured pods while
nothing schedules them, starts the scheduler under test and reports pods/s between the
first and the last bind its watch saw ((bound - 1) / span), the pods bound, why the others
are pending (their PodScheduled condition), and every hard constraint broken over all the
case's pods (``scheduler_perf_checks``). The measured pods are then deleted; the init pods
stay for the next run. Tables: medians over rounds, lowest and highest pods/s, and
x kube = median / kube-scheduler's median; the same as JSON under ``--out``.
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import json
import math
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from null_binder import raw_list, raw_watch
from scheduler_perf_checks import broken_constraints
from scheduler_perf_plan import NamespacesOp, NodesOp, Plan, PodsOp, plan, test_cases
from throughput import free_port, make_scheduler, start_cluster
from throughput_cluster import BindWatcher, RunTimeoutError, wait_nodes_schedulable
from throughput_schedulers import REPO, KubeScheduler, RunContext, SchedulerExitedError, SchedulerUnderTest

sys.path.insert(0, str(REPO / "hack"))
from devcluster import cluster, kube, names
from devcluster.binaries import Binaries
from devcluster.workload import new_run_id

PERF_LABEL = "rl-scheduler.io/scheduler-perf"
INIT_SCHEDULER = "perf-init"
STALL_S = 30.0  # no bind for this long with pods pending: the run is over
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
    pending: dict[str, int] = field(default_factory=dict)  # reason -> pods
    broken: list[str] = field(default_factory=list)
    error: str = ""


class AnyNamespaceBindWatcher(BindWatcher):
    """``BindWatcher`` over every namespace (scheduler_perf puts pods in several)."""

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


def node_manifest(template: dict[str, Any], name: str, labels: dict[str, str]) -> dict[str, Any]:
    node = copy.deepcopy(template)
    metadata = node.setdefault("metadata", {})
    metadata.pop("generateName", None)
    metadata["name"] = name
    metadata["labels"] = {
        **(metadata.get("labels") or {}),
        names.HOSTNAME_LABEL: name,
        names.KWOK_TYPE_LABEL: names.KWOK_TYPE_VALUE,
        names.GENERATED_BY_LABEL: names.GENERATED_BY_VALUE,
        PERF_LABEL: "node",
        **labels,
    }
    metadata["annotations"] = {
        **(metadata.get("annotations") or {}),
        names.KWOK_NODE_ANNOTATION: names.KWOK_NODE_VALUE,
        "node.alpha.kubernetes.io/ttl": "0",
    }
    status = node.setdefault("status", {})
    status.setdefault("allocatable", dict(status.get("capacity") or {}))
    return node


def pod_manifest(template: dict[str, Any], name: str, scheduler_name: str, run: str) -> dict[str, Any]:
    pod = copy.deepcopy(template)
    metadata = pod.setdefault("metadata", {})
    metadata.pop("generateName", None)
    metadata["name"] = name
    metadata["labels"] = {**(metadata.get("labels") or {}), PERF_LABEL: run}
    pod["spec"]["schedulerName"] = scheduler_name
    return pod


def create_all(core: client.CoreV1Api, pods: list[tuple[str, dict[str, Any]]]) -> None:
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda p: core.create_namespaced_pod(p[0], kube.body(p[1])), pods))


def make_nodes(core: client.CoreV1Api, ops: list[NodesOp], timeout_s: float) -> None:
    """This benchmark's nodes become exactly those of ``ops`` (other nodes are left alone;
    the benchmark's own cluster has none)."""
    existing = [n["metadata"]["name"] for n in _perf_nodes(core)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(core.delete_node, existing))
    manifests = []
    for op_index, op in enumerate(ops):
        for i in range(op.count):
            labels = {op.label_key: op.label_values[i % len(op.label_values)]} if op.label_key else {}
            manifests.append(node_manifest(op.template, f"perf-{op_index}-{i}", labels))
    deadline = time.monotonic() + timeout_s
    while _perf_nodes(core):  # a deleted node lingers until its finalizers run
        if time.monotonic() > deadline:
            raise RunTimeoutError(f"old nodes still there after {timeout_s:.0f} s")
        time.sleep(1.0)
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda m: core.create_node(kube.body(m)), manifests))
    wait_nodes_schedulable(core, {m["metadata"]["name"] for m in manifests}, timeout_s)


def _perf_nodes(core: client.CoreV1Api) -> list[dict[str, Any]]:
    response: Any = core.list_node(label_selector=f"{PERF_LABEL}=node", _preload_content=False)
    items: list[dict[str, Any]] = json.loads(response.data)["items"]
    return items


def delete_run_pods(
    core: client.CoreV1Api, namespaces: set[str], selector: str, timeout_s: float = 300
) -> None:
    for namespace in namespaces:
        core.delete_collection_namespaced_pod(namespace, label_selector=selector, grace_period_seconds=0)
    deadline = time.monotonic() + timeout_s
    while raw_list(core, label_selector=selector, limit=1)["items"]:
        if time.monotonic() > deadline:
            raise RunTimeoutError(f"pods {selector} still there after {timeout_s:.0f} s")
        time.sleep(1.0)


def pending_reasons(pods: list[dict[str, Any]]) -> dict[str, int]:
    reasons: dict[str, int] = {}
    for pod in pods:
        if (pod.get("spec") or {}).get("nodeName"):
            continue
        conditions = (pod.get("status") or {}).get("conditions") or []
        message = next((c.get("message", "") for c in conditions if c.get("type") == "PodScheduled"), "")
        reason = message or "no PodScheduled condition"
        reasons[reason] = reasons.get(reason, 0) + 1
    return reasons


# ---- one case -----------------------------------------------------------------------


def wait_bound(scheduler: SchedulerUnderTest, watcher: BindWatcher, pods: int, timeout_s: float) -> None:
    """Until every pod is bound, or none was for ``STALL_S`` (pods left pending), or
    ``timeout_s`` passed."""
    deadline = time.monotonic() + timeout_s
    last, last_change = -1, time.monotonic()
    while watcher.bound < pods:
        scheduler.check_alive()
        now = time.monotonic()
        if watcher.bound != last:
            last, last_change = watcher.bound, now
        if now - last_change > STALL_S or now > deadline:
            return
        time.sleep(POLL_S)


def place_init_pods(
    core: client.CoreV1Api, context: RunContext, init: list[tuple[str, dict[str, Any]]]
) -> None:
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
            raise RuntimeError(f"kube-scheduler placed {watcher.bound} of {len(init)} init pods")
    finally:
        placer.stop()
        watcher.stop()


@dataclass
class CaseCluster:
    """What every run of one case shares."""

    core: client.CoreV1Api
    kubeconfig: Path
    workdir: Path
    namespaces: set[str]
    nodes: list[dict[str, Any]]
    namespace_labels: dict[str, dict[str, str]]


def measure(
    shared: CaseCluster, args: argparse.Namespace, measured_ops: list[tuple[int, PodsOp]], result: RunResult
) -> None:
    """One scheduler on the case's measured pods; fills ``result``."""
    core = shared.core
    qps, burst = args.qps_burst
    run = new_run_id("perf")
    scheduler = make_scheduler(result.scheduler, args)
    pods = [
        (op.namespace, pod_manifest(op.template, f"{run}-{index}-{i}", scheduler.scheduler_name, run))
        for index, op in measured_ops
        for i in range(op.count)
    ]
    watcher = AnyNamespaceBindWatcher(core, f"{PERF_LABEL}={run}")
    print(f"  {result.scheduler} round {result.round}: ", end="", flush=True)
    try:
        create_all(core, pods)
        watcher.start()
        run_dir = shared.workdir / f"{result.scheduler}-{result.round}"
        run_dir.mkdir(exist_ok=True)
        scheduler.start(RunContext(shared.kubeconfig, qps, burst, run_dir, free_port()))
        wait_bound(scheduler, watcher, len(pods), args.run_timeout)
        times = sorted(watcher.bound_at.values())
        result.bound = len(times)
        if len(times) >= 2:
            result.span_s = times[-1] - times[0]
            result.pods_per_s = (len(times) - 1) / result.span_s if result.span_s > 0 else math.inf
        if result.bound:
            scheduler.latency(result.bound)  # reads which policy scored, from /metrics
        result.ran = scheduler.what_ran()
        scheduler.stop()
        everything = raw_list(core, label_selector=PERF_LABEL)["items"]
        mine = [p for p in everything if p["metadata"]["labels"].get(PERF_LABEL) in (run, "init")]
        result.pending = pending_reasons([p for p in mine if p["metadata"]["labels"][PERF_LABEL] == run])
        result.broken = broken_constraints(mine, shared.nodes, shared.namespace_labels)
        print(
            f"{result.pods_per_s:.1f} pods/s, {result.bound}/{result.measured} bound, "
            f"{len(result.broken)} constraints broken ({result.ran})",
            flush=True,
        )
    except (SchedulerExitedError, RunTimeoutError, ApiException, RuntimeError, OSError) as error:
        result.error = str(error)
        print(f"FAILED: {error}", flush=True)
    finally:
        scheduler.stop()
        watcher.stop()
        delete_run_pods(core, shared.namespaces, f"{PERF_LABEL}={run}")


def run_case(
    core: client.CoreV1Api, kubeconfig: Path, the_plan: Plan, args: argparse.Namespace, folder: Path
) -> list[RunResult]:
    qps, burst = args.qps_burst
    nodes = [op for op in the_plan.ops if isinstance(op, NodesOp)]
    make_nodes(core, nodes, timeout_s=60 + sum(op.count for op in nodes) / 5)
    namespaces = {ns for op in the_plan.ops if isinstance(op, NamespacesOp) for ns in op.names}
    namespaces |= {op.namespace for op in the_plan.ops if isinstance(op, PodsOp)}
    for namespace in sorted(namespaces):
        kube.ensure_namespace(core, namespace, kubeconfig)
    delete_run_pods(core, namespaces, PERF_LABEL)
    init: list[tuple[str, dict[str, Any]]] = []
    measured_ops = []
    for index, op in enumerate(the_plan.ops):
        if isinstance(op, PodsOp) and not op.measured:
            init += [
                (op.namespace, pod_manifest(op.template, f"init-{index}-{i}", INIT_SCHEDULER, "init"))
                for i in range(op.count)
            ]
        elif isinstance(op, PodsOp):
            measured_ops.append((index, op))
    workdir = folder / f"{the_plan.nodes}-{the_plan.case}"
    workdir.mkdir(parents=True, exist_ok=True)
    place_init_pods(core, RunContext(kubeconfig, qps, burst, workdir, free_port()), init)
    print(f"  {len(init)} init pods placed by kube-scheduler", flush=True)
    node_list = _perf_nodes(core)
    namespace_labels = {
        n["metadata"]["name"]: n["metadata"].get("labels") or {}
        for n in json.loads(core.list_namespace(_preload_content=False).data)["items"]
    }
    shared = CaseCluster(core, kubeconfig, workdir, namespaces, node_list, namespace_labels)
    results = []
    for round_ in range(1, args.rounds + 1):
        for variant in args.schedulers:
            result = RunResult(the_plan.case, the_plan.nodes, variant, round_, the_plan.measured_pods)
            measure(shared, args, measured_ops, result)
            results.append(result)
    delete_run_pods(core, namespaces, PERF_LABEL)
    return results


# ---- the report -------------------------------------------------------------------------


def table(results: list[RunResult], schedulers: list[str]) -> str:
    lines = [
        f"{'case':44} {'nodes':>5} {'scheduler':14} {'pods/s':>8} {'min':>7} {'max':>7} {'x kube':>6} "
        f"{'bound':>10} {'broken':>6}"
    ]
    keys = sorted({(r.nodes, r.case) for r in results})
    for nodes, case in keys:
        medians: dict[str, float] = {}
        for variant in schedulers:
            rows = [r for r in results if (r.nodes, r.case, r.scheduler) == (nodes, case, variant)]
            rates = [r.pods_per_s for r in rows if not r.error and not math.isnan(r.pods_per_s)]
            if not rows:
                continue
            median = statistics.median(rates) if rates else math.nan
            medians[variant] = median
            kube_rate = medians.get("kube-scheduler", math.nan)
            ratio = median / kube_rate if kube_rate else math.nan
            bound = min(r.bound for r in rows)
            broken = max(len(r.broken) for r in rows)
            lines.append(
                f"{case:44} {nodes:5d} {variant:14} {median:8.1f} {min(rates, default=math.nan):7.1f} "
                f"{max(rates, default=math.nan):7.1f} {ratio:6.2f} "
                f"{f'{bound}/{rows[0].measured}':>10} {broken:6d}"
            )
            for reason, count in sorted({k: v for r in rows for k, v in r.pending.items()}.items()):
                lines.append(f"{'':44} {'':5} {'':14} pending {count}: {reason[:120]}")
            lines += [f"{'':44} {'':5} {'':14} FAILED: {r.error[:160]}" for r in rows if r.error]
    return "\n".join(lines)


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
    runnable, skipped = [], []
    for nodes in args.nodes:
        for path, case in test_cases():
            if wanted is not None and case["name"] not in wanted:
                continue
            planned = plan(path, case, nodes)
            if isinstance(planned, str):
                skipped.append(f"{case['name']} at {nodes} nodes: {planned}")
            else:
                runnable.append(planned)
    return runnable, skipped


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    runnable, skipped = plans(args)
    for the_plan in runnable:
        counts = ", ".join(
            f"{type(op).__name__[:-2].lower()} {getattr(op, 'count', '')}".strip() for op in the_plan.ops
        )
        print(f"{the_plan.case} at {the_plan.nodes} nodes (from {the_plan.workload}): {counts}")
    print("skipped:\n  " + "\n  ".join(skipped))
    if args.list:
        return 0
    info = start_cluster(args.name)
    core = kube.core_v1(info.kubeconfig)
    folder = args.out / dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    folder.mkdir(parents=True, exist_ok=True)
    results: list[RunResult] = []
    try:
        for the_plan in runnable:
            print(f"{the_plan.case} at {the_plan.nodes} nodes:", flush=True)
            results += run_case(core, info.kubeconfig, the_plan, args, folder)
            (folder / "results.json").write_text(json.dumps([asdict(r) for r in results], indent=1))
    finally:
        if not args.keep_cluster:
            cluster.down(args.name)
    report = table(results, args.schedulers)
    print(report)
    (folder / "table.txt").write_text(report + "\n\nskipped:\n" + "\n".join(skipped) + "\n")
    return 0 if all(not r.error and not r.broken for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
