"""CPU per pod of InterPodAffinity (PreFilter, Filter, Score) in process, on kube's
scheduler_perf affinity workloads: the plugins as they are (placed pods read by group)
against the pod-by-pod reference they replaced (tests/unit/inter_pod_affinity_reference.py).

    .venv/bin/python benchmarks/affinity_cycle.py [--measure-pods 200] \\
        [--workloads SchedulingPodAffinity,...]

Sizes are kube's ``500Nodes`` workload of each test case (affinity/performance-config.yaml),
the measured pods cut to ``--measure-pods``.

Nodes are kube's ``node-default.yaml`` with a hostname label and, for
SchedulingPodAffinity, ``topology.kubernetes.io/zone: zone1`` (its
``labelNodePrepareStrategy``); init pods (namespace sched-0) and measured pods (sched-1)
are the workload's pod template from the Kubernetes module of the pinned release (see
``scheduler_perf_source.py``). Each measured pod goes to the first best-scoring node the
filter leaves, as the plugins decide, so both implementations read the same states.
Prints, per workload, microseconds of process CPU per pod for each and their ratio.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler_perf_source import load_yaml, scheduler_perf_dir

from scheduler.framework.plugin import CycleContext
from scheduler.framework.status import Code
from scheduler.objects.node import Node
from scheduler.objects.pod import Pod
from scheduler.objects.pod_manifest import pod_from_manifest
from scheduler.plugins.filters.inter_pod_affinity import InterPodAffinity
from scheduler.plugins.scores.inter_pod_affinity import InterPodAffinityScore
from scheduler.state.cluster_state import ClusterState
from tests.builders import make_node
from tests.unit.inter_pod_affinity_reference import reference_counts, reference_score

WORKLOADS = {
    "SchedulingPodAffinity": "pod-with-pod-affinity.yaml",
    "SchedulingPreferredPodAffinity": "pod-with-preferred-pod-affinity.yaml",
    "SchedulingPreferredPodAntiAffinity": "pod-with-preferred-pod-anti-affinity.yaml",
    "SchedulingPodAntiAffinity": "pod-with-pod-anti-affinity.yaml",
}


def template_pod(template: str, namespace: str, name: str) -> Pod:
    manifest = load_yaml(scheduler_perf_dir() / "templates" / template)
    manifest["metadata"] = {**manifest["metadata"], "name": name, "namespace": namespace}
    manifest["metadata"].pop("generateName", None)
    return pod_from_manifest(manifest)


def cluster(workload: str, nodes: int) -> ClusterState:
    zone = {"topology.kubernetes.io/zone": "zone1"} if workload == "SchedulingPodAffinity" else {}
    built: list[Node] = [make_node(f"node-{i}", cpu="4", memory="32Gi", labels=zone) for i in range(nodes)]
    return ClusterState(built)


def decide(state: ClusterState, pod: Pod) -> tuple[int | None, float, float]:
    """The node the plugins choose (None: none fits), and the CPU seconds of the
    plugins and of the reference on this state."""
    nodes = np.arange(len(state), dtype=np.int64)
    start = time.process_time()
    ctx = CycleContext(state, pod)
    plugin = InterPodAffinity()
    feasible = nodes
    if plugin.pre_filter(ctx).code != Code.SKIP:
        rejected = np.zeros(nodes.size, np.bool_)
        for rejection in plugin.filter(ctx, nodes):
            rejected |= rejection.nodes
        feasible = nodes[~rejected]
    scores = InterPodAffinityScore().score(CycleContext(state, pod), feasible)
    grouped = time.process_time() - start
    start = time.process_time()
    reference_counts(CycleContext(state, pod))
    reference_score(CycleContext(state, pod), feasible)
    reference = time.process_time() - start
    if feasible.size == 0:
        return None, grouped, reference
    # Ties go to the emptiest node (a stand-in for the resource scores).
    pods_on = np.array([len(state.pods_on_node[int(n)]) for n in feasible])
    best = np.lexsort((pods_on, -scores))[0]
    return int(feasible[best]), grouped, reference


def seeded_cluster(workload: str, nodes: int, init_pods: int) -> ClusterState:
    """``cluster`` with ``init_pods`` of the workload's template (namespace sched-0) placed
    round-robin (kube-scheduler places them in the real harness)."""
    state = cluster(workload, nodes)
    for i in range(init_pods):
        pod = template_pod(WORKLOADS[workload], "sched-0", f"init-{i}")
        state.place(pod, state.nodes[i % nodes].name)
    return state


def run(workload: str, nodes: int, init_pods: int, measure_pods: int) -> tuple[float, float, int]:
    state = seeded_cluster(workload, nodes, init_pods)
    template = WORKLOADS[workload]
    grouped_total = reference_total = 0.0
    unplaced = 0
    base = template_pod(template, "sched-1", "measured")
    for i in range(measure_pods):
        pod = replace(base, name=f"measured-{i}", uid=f"uid-measured-{i}")
        node, grouped, reference = decide(state, pod)
        grouped_total += grouped
        reference_total += reference
        if node is None:
            unplaced += 1
        else:
            state.place(pod, state.nodes[node].name)
    return grouped_total / measure_pods, reference_total / measure_pods, unplaced


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--measure-pods", type=int, default=200)
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    args = parser.parse_args()
    config = load_yaml(scheduler_perf_dir() / "affinity" / "performance-config.yaml")
    print(f"{'workload':36} {'nodes':>6} {'init':>5} {'measured':>8} {'grouped us/pod':>15} ", end="")
    print(f"{'pod-by-pod us/pod':>18} {'speed-up':>9} {'unplaced':>9}")
    for workload in args.workloads.split(","):
        case = next(c for c in config if c["name"] == workload)
        params = next(w for w in case["workloads"] if w["name"] == "500Nodes")["params"]
        nodes, init = params["initNodes"], params["initPods"]
        measured = min(args.measure_pods, params["measurePods"])
        grouped, reference, unplaced = run(workload, nodes, init, measured)
        print(f"{workload:36} {nodes:6d} {init:5d} {measured:8d} {grouped * 1e6:15.0f} ", end="")
        print(f"{reference * 1e6:18.0f} {reference / grouped:8.1f}x {unplaced:9d}")


if __name__ == "__main__":
    main()
