"""How fast a profile scores a pod, on clusters of 1,000 and 5,000 nodes.

    python benchmarks/policy_inference.py [--checkpoint DIR] [--nodes 1000,5000]
        [--pods 2000] [--warmup 100] [--profiles gnn,fgd-reserve,fgd]

The cluster is openb's GPU nodes drawn with replacement (renamed) up to the size; the
pods are the default trace's, in its order, each placed where the policy says, so the
cluster fills as it would live. Prints, per size, p50/p90/p99 of the time the gnn
plugin takes to score one pod over its feasible nodes (the Score extension point),
and of the whole scheduling cycle (filters, score, GPU choice). With several
``--profiles`` each replays the same pods on the same cluster, one after another.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from scheduler.framework.profile import schedule_pod
from scheduler.plugins.profiles import build_profile
from scheduler.plugins.registry import ProfileContext
from scheduler.sim.catalog import node_list_path, pod_list_path
from scheduler.sim.replay import trace_typical_pods
from scheduler.sim.trace import load_nodes, load_pods
from scheduler.state.cluster_state import ClusterState


def percentiles(samples: list[float]) -> str:
    ms = np.array(samples) * 1000
    return "  ".join(f"p{p} {np.percentile(ms, p):6.2f} ms" for p in (50, 90, 99))


def run(size: int, pods: int, warmup: int, checkpoint: Path | None, profile_name: str) -> None:
    base = load_nodes(node_list_path())
    rng = np.random.default_rng(size)
    picks = rng.integers(len(base), size=size)
    nodes = [replace(base[int(i)], name=f"node-{k:05d}") for k, i in enumerate(picks)]
    trace = load_pods(pod_list_path("default"))
    state = ClusterState(nodes)
    profile = build_profile(
        profile_name, ProfileContext(typical_pods=trace_typical_pods(trace), checkpoint=checkpoint)
    )
    score_times: list[float] = []
    cycle_times: list[float] = []
    first = 0.0
    placed = 0
    for i, pod in enumerate(trace[: pods + warmup]):
        started = time.perf_counter()
        decision = schedule_pod(state, pod, profile, rng)
        elapsed = time.perf_counter() - started
        if i == 0:
            first = decision.timings.get("Score", 0.0)
        if i >= warmup and decision.feasible.size > 1:
            score_times.append(decision.timings["Score"])
            cycle_times.append(elapsed)
        if decision.scheduled:
            state.place(pod, decision.node, decision.gpu_indices)
            placed += 1
    gpus = int(state.gpu_count.sum()) * 1000
    print(
        f"{profile_name}: {size:5d} nodes, {len(score_times)} pods timed ({placed} placed, "
        f"{100 * state.allocated_gpu_milli() / gpus:.0f}% of GPU allocated at the end)"
    )
    print(f"    score one pod:       {percentiles(score_times)}")
    print(f"    whole cycle:         {percentiles(cycle_times)}")
    print(f"    first pod (cold):    {first * 1000:6.2f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checkpoint", type=Path, default=None, help="checkpoint (default: the shipped one)")
    parser.add_argument("--nodes", default="1000,5000", help="cluster sizes")
    parser.add_argument("--pods", type=int, default=2000, help="pods timed per size")
    parser.add_argument("--warmup", type=int, default=100, help="pods scheduled before timing")
    parser.add_argument("--profiles", default="gnn", help="profiles to time, comma-separated")
    args = parser.parse_args()
    print(f"cpus: {os.cpu_count()}; load average: {os.getloadavg()[0]:.1f}")
    for size in (int(s) for s in args.nodes.split(",")):
        for profile in args.profiles.split(","):
            run(size, args.pods, args.warmup, args.checkpoint, profile)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
