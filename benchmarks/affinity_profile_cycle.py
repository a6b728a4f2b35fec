"""A whole scheduling cycle per profile on kube's scheduler_perf affinity workloads, in
process: what each profile's filters and scores cost per pod where many placed pods
carry affinity terms (the learned policy's share of the 100-pod affinity cases).

    .venv/bin/python benchmarks/affinity_profile_cycle.py [--nodes 1000] [--pods 300] \\
        [--warmup 50] [--profiles fgd-reserve,fgd,gnn] [--workloads SchedulingPodAffinity,...]

The cluster is ``affinity_cycle.seeded_cluster``: ``--nodes`` of kube's ``node-default.yaml`` and one
init pod of the workload's template per node (namespace sched-0); then ``--pods``
measured pods (sched-1), each placed where the profile decides, the first ``--warmup``
untimed. FGD's typical pods are openb's ``default`` trace, as ``policy_inference`` reads
them; the learned policy is the shipped checkpoint. Prints, per workload and profile,
the cycle's p50/p99 and the mean of each extension point's time (``Decision.timings``).
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from dataclasses import replace

import numpy as np
from affinity_cycle import WORKLOADS, seeded_cluster, template_pod

from scheduler.framework.profile import schedule_pod
from scheduler.plugins.profiles import build_profile
from scheduler.plugins.registry import ProfileContext
from scheduler.sim.catalog import pod_list_path
from scheduler.sim.replay import trace_typical_pods
from scheduler.sim.trace import load_pods


def run(workload: str, profile_name: str, nodes: int, pods: int, warmup: int, context: ProfileContext) -> str:
    state = seeded_cluster(workload, nodes, nodes)
    template = WORKLOADS[workload]
    profile = build_profile(profile_name, context)
    rng = np.random.default_rng(0)
    base = template_pod(template, "sched-1", "measured")
    cycles: list[float] = []
    points: Counter[str] = Counter()
    for i in range(warmup + pods):
        pod = replace(base, name=f"measured-{i}", uid=f"uid-measured-{i}")
        started = time.perf_counter()
        decision = schedule_pod(state, pod, profile, rng)
        elapsed = time.perf_counter() - started
        if i >= warmup:
            cycles.append(elapsed)
            points.update(decision.timings)
        if decision.scheduled:
            state.place(pod, decision.node, decision.gpu_indices)
    ms = np.array(cycles) * 1000
    means = "  ".join(f"{name} {total / pods * 1000:.2f}" for name, total in sorted(points.items()))
    return f"{np.percentile(ms, 50):8.2f} {np.percentile(ms, 99):8.2f}   {means}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=300, help="measured pods timed per workload and profile")
    parser.add_argument("--warmup", type=int, default=50, help="measured pods placed before timing")
    parser.add_argument("--profiles", default="fgd-reserve,fgd,gnn")
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    args = parser.parse_args()
    context = ProfileContext(typical_pods=trace_typical_pods(load_pods(pod_list_path("default"))))
    print(f"{'workload':36} {'profile':12} {'p50 ms':>8} {'p99 ms':>8}   mean ms per extension point")
    for workload in args.workloads.split(","):
        for profile in args.profiles.split(","):
            figures = run(workload, profile, args.nodes, args.pods, args.warmup, context)
            print(f"{workload:36} {profile:12} {figures}")


if __name__ == "__main__":
    main()
