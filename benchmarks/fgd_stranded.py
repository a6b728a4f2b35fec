"""Where the GPU capacity is stranded when the cluster saturates, per policy.

    python benchmarks/fgd_stranded.py [--trace default] [--seeds 42] [--policies fgd,gnn]
        [--checkpoint DIR]

Replays the trace and, at the first failed pod and at 100% arrived, prints:
- idle GPU split into fully free GPUs (on nodes with less than 4 cores left, and on
  others) and the free share left on partly used GPUs;
- at the first failure: how many GPUs were still fully free and the most CPU any node
  holding one had left (under FGD: ~40 GPUs, on nodes with < 2.5 cores);
- the pods that failed by kind;
- the share patterns on partly used GPUs that strand the most (e.g. one 810 share
  alone strands 190 milli that only the rare <= 190 shares can use).
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from scheduler.cli_values import parse_seeds
from scheduler.framework.profile import schedule_pod
from scheduler.learn.episode import EpisodeSpec, make_episode
from scheduler.objects.pod import Pod
from scheduler.plugins.profiles import build_profile
from scheduler.plugins.registry import ProfileContext
from scheduler.state.cluster_state import CPU_COLUMN, ClusterState

CPU_STARVED_CORES = 4


def kind(pod: Pod) -> str:
    if not pod.gpu.milli_per_gpu:
        return "cpu-only"
    if pod.gpu.is_share:
        return "share"
    return f"{pod.gpu.count}-gpu"


def idle_split(state: ClusterState) -> dict[str, float]:
    free = np.where(state.gpu_exists(), state.gpu_free_milli, 0)
    cores = (state.allocatable[:, CPU_COLUMN] - state.requested[:, CPU_COLUMN]) / 1000
    full = (free == 1000).sum(axis=1)
    partial = np.where((free > 0) & (free < 1000), free, 0).sum(axis=1) / 1000
    starved = cores < CPU_STARVED_CORES
    return {
        "idle_gpus": float(free.sum() / 1000),
        "full_gpus_cpu_starved": float(full[starved].sum()),
        "full_gpus_elsewhere": float(full[~starved].sum()),
        "partial_free_gpus": float(partial.sum()),
    }


def share_patterns(state: ClusterState, top: int = 8) -> list[str]:
    shares: dict[tuple[str, int], list[int]] = defaultdict(list)
    for placement in state.pods():
        if placement.pod.gpu.is_share:
            shares[(placement.node, placement.gpu_indices[0])].append(placement.pod.gpu.milli_per_gpu)
    counts = Counter(tuple(sorted(v, reverse=True)) for v in shares.values())
    rows = sorted(counts.items(), key=lambda kv: -(1000 - sum(kv[0])) * kv[1])[:top]
    return [
        f"{n:5d} x {list(p)} strands {1000 - sum(p)} each, {n * (1000 - sum(p)) / 1000:.1f} GPUs"
        for p, n in rows
    ]


def analyse(trace: str, policy: str, seed: int, checkpoint: Path | None) -> None:
    episode = make_episode(EpisodeSpec(trace, seed))
    state = episode.fresh_state()
    profile = build_profile(policy, ProfileContext(typical_pods=episode.typical, checkpoint=checkpoint))
    rng = np.random.default_rng(seed)
    arrived = 0
    failed: Counter[str] = Counter()
    first_failure: str | None = None
    for pod in episode.arrivals:
        decision = schedule_pod(state, pod, profile, rng)
        arrived += pod.gpu.total_milli
        if decision.scheduled:
            state.place(pod, decision.node, decision.gpu_indices)
        else:
            failed[kind(pod)] += 1
            if first_failure is None:
                free = np.where(state.gpu_exists(), state.gpu_free_milli, 0)
                cores = (state.allocatable[:, CPU_COLUMN] - state.requested[:, CPU_COLUMN]) / 1000
                holders = (free == 1000).any(axis=1)
                most = float(cores[holders].max()) if holders.any() else 0.0
                first_failure = (
                    f"first failure at {100 * arrived / episode.capacity_milli:.2f}% arrived "
                    f"({kind(pod)}, {pod.cpu_milli / 1000:g} cores): {int((free == 1000).sum())} GPUs fully "
                    f"free, the most CPU a node holding one had left: {most:.1f} cores"
                )
        if arrived >= episode.capacity_milli:
            break
    print(f"== {trace} / {policy} / seed {seed}")
    print(f"   {first_failure or 'no failure before 100% arrived'}")
    split = idle_split(state)
    print(
        f"   at 100% arrived: {split['idle_gpus']:.1f} GPUs idle = "
        f"{split['full_gpus_cpu_starved']:.0f} fully free on nodes with < {CPU_STARVED_CORES} cores left + "
        f"{split['full_gpus_elsewhere']:.0f} fully free elsewhere + "
        f"{split['partial_free_gpus']:.1f} on partly used GPUs"
    )
    print(f"   failed by kind: {dict(failed.most_common())}")
    for line in share_patterns(state):
        print(f"   {line}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trace", default="default")
    parser.add_argument("--seeds", type=parse_seeds, default=parse_seeds("42"))
    parser.add_argument("--policies", default="fgd,fgd-reserve,gnn")
    parser.add_argument("--checkpoint", type=Path, default=None)
    args = parser.parse_args()
    for seed in args.seeds:
        for policy in args.policies.split(","):
            analyse(args.trace, policy, seed, args.checkpoint)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
