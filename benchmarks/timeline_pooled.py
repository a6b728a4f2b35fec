"""What a cluster without node boundaries gives on the timeline replay, beside a profile.

    python benchmarks/timeline_pooled.py --trace default --load 1 --seeds 42-51 [--workers 2]

Replays each seed with the profile (``--policy``, fgd-reserve by default) and on the
pooled cluster of ``scheduler.sim.timeline_pooled`` with both of its queues (backfill,
the timeline replay's; fifo, no pod before an older one), and prints, per arm, the
GPU-hours waited by pods of 4 or more GPUs and the GPU-hours of failed pods, summed over
the seeds and as a ratio to the profile's sums (issue #34's bars are such ratios), with
a paired 95% interval on the per-seed difference. The pooled cluster is a reference no
placement on nodes reaches: what it still waits and loses, node boundaries do not
explain.
"""

from __future__ import annotations

import argparse
import os
from concurrent.futures import ProcessPoolExecutor

from scheduler.cli_values import parse_seeds
from scheduler.sim.paired import paired_difference
from scheduler.sim.timeline import DEFAULT_MAX_WAIT_S, TimelineSpec, replay_timeline
from scheduler.sim.timeline_metrics import TimelineMetrics, timeline_metrics
from scheduler.sim.timeline_pooled import QUEUES, replay_pooled

METRICS = (("multi_gpu_wait_gpu_hours", "4+ GPU pods' waited GPU-h"), ("gpu_hours_failed", "failed GPU-h"))


def replay_arm(arm: str, spec: TimelineSpec) -> TimelineMetrics:
    """One seed of one arm: the profile's replay, or ``pooled-<queue>``."""
    for queue in QUEUES:
        if arm == f"pooled-{queue}":
            return timeline_metrics(replay_pooled(spec, queue))
    return timeline_metrics(replay_timeline(spec))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trace", default="default")
    parser.add_argument("--load", type=float, default=1.0)
    parser.add_argument("--seeds", type=parse_seeds, default=list(range(42, 52)))
    parser.add_argument("--policy", default="fgd-reserve")
    parser.add_argument("--max-wait", type=float, default=DEFAULT_MAX_WAIT_S)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()

    arms = [args.policy, *(f"pooled-{q}" for q in QUEUES)]
    specs = {
        s: TimelineSpec(args.trace, args.policy, s, load=args.load, max_wait_s=args.max_wait)
        for s in args.seeds
    }
    jobs = [(arm, seed) for arm in arms for seed in args.seeds]
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        done = list(pool.map(replay_arm, [a for a, _ in jobs], [specs[s] for _, s in jobs]))
    results = dict(zip(jobs, done, strict=True))

    seeds = f"seeds {args.seeds[0]}-{args.seeds[-1]}"
    print(f"{args.trace}, load {args.load:g}, {seeds}, max wait {args.max_wait:g} s")
    headers = [f"{label} (sum, x {args.policy}, paired difference [95%])" for _, label in METRICS]
    print("| arm | " + " | ".join(headers) + " |")
    print("|---|" + "---|" * len(METRICS))
    for arm in arms:
        cells = []
        for metric, _ in METRICS:
            ours = {s: float(getattr(results[arm, s], metric)) for s in args.seeds}
            theirs = {s: float(getattr(results[args.policy, s], metric)) for s in args.seeds}
            ratio = sum(ours.values()) / max(sum(theirs.values()), 1e-9)
            cell = f"{sum(ours.values()):.0f}, {ratio:.2f}x"
            paired = paired_difference(arm, args.policy, metric, ours, theirs) if arm != args.policy else None
            if paired is not None and paired.low is not None and paired.high is not None:
                cell += f", {paired.mean:+.0f} [{paired.low:+.0f}, {paired.high:+.0f}]"
            cells.append(cell)
        print(f"| {arm} | " + " | ".join(cells) + " |")
    failed = {arm: sum(results[arm, s].multi_gpu_failed for s in args.seeds) for arm in arms}
    pods = sum(results[args.policy, s].multi_gpu_pods for s in args.seeds)
    print("4+ GPU pods failed, of " + f"{pods}: " + ", ".join(f"{arm} {n}" for arm, n in failed.items()))


if __name__ == "__main__":
    main()
