"""Replays the FGD paper's six policies on the openb traces (10 seeds each) and puts
our medians beside the published ones (../shared/data/fgd-reference by default).

    python benchmarks/fgd_reference.py [--traces default,gpushare40,gpuspec10,multigpu20]
        [--seeds 42-51] [--workers 2] [--reference DIR] [--out runs/fgd-reference]

Prints, per trace and policy, the median GPU allocation at 100% and 130% arrived,
ours and published, the difference in percentage points, and how many seeds match the
published per-seed value exactly; writes the same as JSON. Exits 1 if any difference
exceeds --tolerance (0.5 pp).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from scheduler.cli_values import parse_seeds
from scheduler.sim.cli import FGD_BASELINES
from scheduler.sim.report import format_table
from scheduler.sim.sweep import expand, run_sweep, run_trace

POLICY_IDS = {
    "random": "01-Random",
    "dot-prod": "02-DotProd",
    "gpu-clustering": "03-GpuClustering",
    "gpu-packing": "04-GpuPacking",
    "best-fit": "05-BestFit",
    "fgd": "06-FGD",
}
DEFAULT_REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "data" / "fgd-reference"


def load_reference(folder: Path) -> dict[tuple[str, str, int], dict[int, float]]:
    """(trace, policy, seed) -> {arrived %: allocation %}."""
    out: dict[tuple[str, str, int], dict[int, float]] = {}
    ids = {v: k for k, v in POLICY_IDS.items()}
    with (folder / "allocation_curves.csv").open() as handle:
        for row in csv.DictReader(handle):
            trace = row["workload"].removeprefix("openb_pod_list_")
            points = {int(k): float(v) for k, v in row.items() if k.isdigit() and v}
            out[(trace, ids[row["sc_policy"]], int(row["seed"]))] = points
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--traces", default="default,gpushare40,gpuspec10,multigpu20")
    parser.add_argument("--policies", default=",".join(FGD_BASELINES))
    parser.add_argument("--seeds", type=parse_seeds, default=parse_seeds("42-51"))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE)
    parser.add_argument("--tolerance", type=float, default=0.5)
    parser.add_argument("--out", type=Path, default=Path("runs/fgd-reference"))
    args = parser.parse_args()

    reference = load_reference(args.reference)
    traces, policies = args.traces.split(","), args.policies.split(",")
    rows: list[list[str]] = []
    report: dict[str, Any] = {}
    worst = 0.0
    for trace in traces:
        started = time.perf_counter()
        results = run_sweep(expand([trace], policies, args.seeds), run_trace, args.workers)
        sweep_seconds = time.perf_counter() - started
        by_policy = defaultdict(list)
        for result in results:
            by_policy[result.spec.policy].append(result)
        report[trace] = {"sweep_seconds": round(sweep_seconds, 1), "policies": {}}
        for policy in policies:
            runs = by_policy[policy]
            entry: dict[int, dict[str, Any]] = {}
            for percent in (100, 130):
                ours = [r.curves.at("allocation", percent) for r in runs]
                theirs = [reference[(trace, policy, r.spec.seed)][percent] for r in runs]
                exact = sum(abs(a - b) < 0.005 for a, b in zip(ours, theirs, strict=True))
                entry[percent] = {
                    "ours": round(statistics.median(ours), 2),
                    "published": round(statistics.median(theirs), 2),
                    "exact_seeds": exact,
                }
                entry[percent]["diff"] = round(entry[percent]["ours"] - entry[percent]["published"], 2)
                worst = max(worst, abs(entry[percent]["diff"]))
            report[trace]["policies"][policy] = entry
            rows.append(
                [trace, policy]
                + [
                    f"{entry[p][k]:.2f}" if k != "exact_seeds" else f"{entry[p][k]}/{len(runs)}"
                    for p in (100, 130)
                    for k in ("ours", "published", "diff", "exact_seeds")
                ]
            )
        print(
            f"{trace}: {len(results)} replays in {sweep_seconds:.0f} s with {args.workers} workers",
            flush=True,
        )
    header = ["trace", "policy"] + [
        f"{k}@{p}" for p in (100, 130) for k in ("ours", "paper", "diff", "exact")
    ]
    print(format_table(header, rows))
    print(f"largest difference: {worst:.2f} pp (tolerance {args.tolerance})")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "comparison.json").write_text(json.dumps(report, indent=2) + "\n")
    return 0 if worst <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
