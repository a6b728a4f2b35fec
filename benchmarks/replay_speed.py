"""How fast the trace replay runs.

    python benchmarks/replay_speed.py [--trace default] [--workers 2] [--skip-sweep]

Prints (1) one FGD replay of the trace in this single process (one core): wall and
CPU seconds and pods per second; (2) the 10-seed x 6-policy sweep of the trace with
``--workers`` processes: wall seconds. CPU seconds are the figure to compare across
runs on a busy machine; wall seconds are what a user waits.
"""

from __future__ import annotations

import argparse
import os
import time

from scheduler.cli_values import parse_seeds
from scheduler.sim.cli import FGD_BASELINES
from scheduler.sim.replay import ReplaySpec, replay
from scheduler.sim.sweep import expand, run_sweep, run_trace


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trace", default="default")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--skip-sweep", action="store_true")
    args = parser.parse_args()

    replay(ReplaySpec(args.trace, "fgd", 41))  # warm imports and caches of the file system
    wall, cpu = time.perf_counter(), time.process_time()
    log = replay(ReplaySpec(args.trace, "fgd", 42))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    pods = len(log.scheduled)
    print(
        f"one FGD replay of {args.trace}: {pods} pods on 1213 nodes in {wall:.1f} s wall, "
        f"{cpu:.1f} s CPU ({pods / cpu:.0f} pods per CPU second)"
    )
    if args.skip_sweep:
        return
    specs = expand([args.trace], FGD_BASELINES, parse_seeds("42-51"))
    started = time.perf_counter()
    run_sweep(specs, run_trace, args.workers)
    print(
        f"sweep of {args.trace}, 6 policies x 10 seeds = {len(specs)} replays with {args.workers} workers: "
        f"{time.perf_counter() - started:.0f} s wall"
    )


if __name__ == "__main__":
    main()
