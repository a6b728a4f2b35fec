"""A lower bound on the GPU any scheduler leaves unallocated on an openb trace.

    python benchmarks/packing_bound.py [--traces default,gpushare40] [--data DIR]

GPU shares pack into GPUs of 1000 milli. Whatever the nodes, CPU or order, the shares
placed on a GPU leave ``1000 - their sum`` idle, and an online scheduler places every
share that fits while any GPU has room: before the cluster saturates it places all the
shares that arrive. The least idle share over all ways of packing a multiset of shares
into GPUs is bounded below by the LP relaxation of bin packing (one variable per
packing pattern):

    minimise  sum_p x_p * (1000 - size(p))   subject to   sum_p a_ip x_p = n_i,  x >= 0

At 100% arrived, 6212 GPUs of demand have arrived: in expectation the trace's pods
scaled by 6212 / (the trace's GPU demand), shares included, and the LP bound scales
the same way. Up to saturation every arriving share is placed, so the bound at 100%
is a floor under "unallocated at 100% arrived" for any policy that never leaves a
fitting pod unplaced (shares arriving after saturation are too few to matter). CPU,
memory, GPU models and node boundaries only raise it.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import Counter
from pathlib import Path

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "openb"
GPUS = 6212


def shares(path: Path) -> tuple[Counter[int], float]:
    """Share sizes with their counts, and the trace's whole GPU demand (GPUs)."""
    counts: Counter[int] = Counter()
    demand = 0
    with path.open() as handle:
        for row in csv.DictReader(handle):
            gpus, milli = int(row["num_gpu"]), min(int(row["gpu_milli"]), 1000)
            if gpus and milli:
                demand += gpus * milli
            if gpus == 1 and 0 < milli < 1000:
                counts[milli] += 1
    return counts, demand / 1000


def patterns(sizes: list[int], counts: Counter[int]) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = []

    def walk(i: int, room: int, current: list[int]) -> None:
        if i == len(sizes):
            if any(current):
                out.append(tuple(current))
            return
        for k in range(min(room // sizes[i], counts[sizes[i]]) + 1):
            current.append(k)
            walk(i + 1, room - k * sizes[i], current)
            current.pop()

    walk(0, 1000, [])
    return out


def bound(counts: Counter[int]) -> tuple[float, float]:
    """(least idle share in GPUs, share demand in GPUs)."""
    import numpy as np  # noqa: PLC0415
    from scipy.optimize import linprog  # noqa: PLC0415

    sizes = sorted(counts, reverse=True)
    columns = patterns(sizes, counts)
    a = np.array(columns, float).T
    waste = 1000 - np.array(sizes) @ a
    result = linprog(waste, A_eq=a, b_eq=[counts[s] for s in sizes], bounds=(0, None), method="highs")
    if not result.success:
        raise RuntimeError(result.message)
    return result.fun / 1000, sum(s * n for s, n in counts.items()) / 1000


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--traces", default="default,gpushare20,gpushare40,multigpu20")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    try:
        import scipy  # noqa: F401, PLC0415
    except ImportError:
        print("this bound needs scipy (pip install scipy)", file=sys.stderr)
        return 1
    header = ("trace", "shares (GPUs)", "least idle", "at 100%", "% of GPUs", "alloc@100% <=")
    print("{:12s} {:>13s} {:>10s} {:>8s} {:>9s}  {}".format(*header))
    for trace in args.traces.split(","):
        counts, demand = shares(args.data / f"openb_pod_list_{trace}.csv")
        idle, share_gpus = bound(counts)
        # At 100% arrived, GPUS worth of demand has arrived: the trace's multiset scaled
        # by GPUS / demand in expectation, and the LP bound scales with it.
        at_100 = idle * GPUS / demand
        percent = 100 * at_100 / GPUS
        row = f"{trace:12s} {share_gpus:13.1f} {idle:10.1f} {at_100:8.1f} {percent:8.2f}%"
        print(f"{row}  {100 - percent:6.2f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
