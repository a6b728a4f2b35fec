"""The comparison a sweep prints and writes: a table, ``summary.json`` and a PNG.

Per trace and policy, medians over seeds of: GPU allocation (% of capacity) at 100%
and 130% arrived, fragmentation rate (% of idle GPU) at 80% arrived, pods failed.
"""

from __future__ import annotations

import json
import math
import statistics
import warnings
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from scheduler.sim.sweep import RunResult
from scheduler.sim.synthetic import SyntheticResult

METRICS = (
    ("gpu_alloc_100", "allocation", 100),
    ("gpu_alloc_130", "allocation", 130),
    ("frag_rate_80", "frag_rate", 80),
)


def _median(values: Sequence[float]) -> float | None:
    finite = [v for v in values if not math.isnan(v)]
    return round(statistics.median(finite), 2) if finite else None


def summarise(results: Sequence[RunResult]) -> dict[str, Any]:
    grouped: dict[str, dict[str, list[RunResult]]] = defaultdict(lambda: defaultdict(list))
    for result in results:
        grouped[result.spec.trace][result.spec.policy].append(result)
    traces: dict[str, Any] = {}
    for trace, policies in grouped.items():
        traces[trace] = {}
        for policy, unordered in policies.items():
            runs = sorted(unordered, key=lambda r: r.spec.seed)
            entry: dict[str, Any] = {"seeds": [r.spec.seed for r in runs]}
            for key, curve, percent in METRICS:
                entry[key] = _median([r.curves.at(curve, percent) for r in runs])
            entry["pods_failed"] = _median([float(r.pods_failed) for r in runs])
            entry["pods"] = _median([float(r.pods) for r in runs])
            entry["seconds_per_replay"] = _median([r.seconds for r in runs])
            entry["per_seed"] = {
                str(r.spec.seed): {key: r.curves.at(curve, p) for key, curve, p in METRICS}
                | {"pods_failed": r.pods_failed}
                for r in runs
            }
            traces[trace][policy] = entry
    return {"metric_definitions": _DEFINITIONS, "traces": traces}


_DEFINITIONS = {
    "gpu_alloc_100": "median over seeds of allocated GPU share (% of capacity) at 100% arrived",
    "gpu_alloc_130": "same at 130% arrived",
    "frag_rate_80": "median fragmentation rate (% of idle GPU share typical pods cannot use) at 80% arrived",
    "pods_failed": "median number of pods that fit nowhere and were dropped",
}


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned first columns of text, right-aligned numbers."""
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i < 2 and not c[:1].isdigit() else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    return "\n".join([line(header), "-" * (sum(widths) + 2 * (len(widths) - 1)), *map(line, rows)])


def table(summary: dict[str, Any]) -> str:
    rows = []
    for trace, policies in summary["traces"].items():
        for policy, entry in sorted(policies.items(), key=lambda kv: -(kv[1]["gpu_alloc_130"] or 0)):
            rows.append(
                [
                    trace,
                    policy,
                    _cell(entry["gpu_alloc_100"]),
                    _cell(entry["gpu_alloc_130"]),
                    _cell(entry["frag_rate_80"]),
                    f"{entry['pods_failed'] or 0:.0f}",
                    f"{entry['seconds_per_replay'] or 0:.1f}",
                ]
            )
    header = ["trace", "policy", "alloc@100%", "alloc@130%", "frag@80%", "failed", "s/replay"]
    return format_table(header, rows)


def write_summary(summary: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=2) + "\n")


def plot(results: Sequence[RunResult], path: Path) -> None:
    """Median curves per policy: allocation (top) and fragmentation rate (bottom)."""
    import matplotlib  # noqa: PLC0415 - plotting is optional and slow to import

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    traces = sorted({r.spec.trace for r in results})
    figure, axes = plt.subplots(2, len(traces), figsize=(5 * len(traces), 7), squeeze=False)
    for column, trace in enumerate(traces):
        runs = [r for r in results if r.spec.trace == trace]
        for policy in sorted({r.spec.policy for r in runs}):
            chosen = [r for r in runs if r.spec.policy == policy]
            for row, curve in enumerate(("allocation", "frag_rate")):
                stacked = np.vstack([getattr(r.curves, curve) for r in chosen])
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN points past the end
                    median = np.nanmedian(stacked, axis=0)
                axes[row][column].plot(np.arange(median.size), median, label=policy)
        axes[0][column].set_title(trace)
        axes[0][column].set_ylabel("GPU allocated (% of capacity)")
        axes[1][column].set_ylabel("fragmentation rate (% of idle GPU)")
        for row in (0, 1):
            axes[row][column].set_xlabel("GPU requested by arrived pods (% of capacity)")
            axes[row][column].grid(alpha=0.3)
        axes[0][column].legend(fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def summarise_synthetic(results: Sequence[SyntheticResult]) -> dict[str, Any]:
    grouped: dict[str, list[SyntheticResult]] = defaultdict(list)
    for result in results:
        grouped[result.spec.policy].append(result)
    policies = {}
    for policy, runs in grouped.items():
        policies[policy] = {
            "seeds": sorted(r.spec.seed for r in runs),
            "placed_before_first_failure": _median([float(r.placed_before_first_failure) for r in runs]),
            # Per seed, for paired comparisons (every policy of a seed sees the same pods).
            "placed_before_first_failure_by_seed": {
                str(run.spec.seed): run.placed_before_first_failure
                for run in sorted(runs, key=lambda run: run.spec.seed)
            },
            # The same for every policy of a seed (the workload does not depend on it).
            "demand_bound": _median([float(r.demand_bound) for r in runs]),
            "share_of_bound": _median(
                [100.0 * r.placed_before_first_failure / max(r.demand_bound, 1) for r in runs]
            ),
            "failed": _median([float(r.failed) for r in runs]),
            "placed": _median([float(r.placed) for r in runs]),
            "cpu_allocated_at_failures": _median([r.cpu_allocated_at_failures for r in runs]),
            "memory_allocated_at_failures": _median([r.memory_allocated_at_failures for r in runs]),
        }
    spec = results[0].spec if results else None
    workload = (
        {}
        if spec is None
        else {
            "nodes": spec.nodes,
            "pods": spec.pods,
            "target_load": spec.target_load,
            "mean_lifetime_s": spec.mean_lifetime_s,
        }
    )
    return {"workload": workload, "policies": policies}


def synthetic_table(summary: dict[str, Any]) -> str:
    policies = summary["policies"].items()
    rows = [
        [
            policy,
            f"{entry['placed_before_first_failure'] or 0:.0f}",
            f"{entry['demand_bound'] or 0:.0f}",
            _cell(entry["share_of_bound"]),
            f"{entry['failed'] or 0:.0f}",
            _cell(entry["cpu_allocated_at_failures"]),
            _cell(entry["memory_allocated_at_failures"]),
        ]
        for policy, entry in sorted(policies, key=lambda kv: -(kv[1]["placed_before_first_failure"] or 0))
    ]
    header = [
        "policy",
        "placed before 1st failure",
        "bound",
        "% of bound",
        "failed",
        "cpu% at failures",
        "mem% at failures",
    ]
    return format_table(header, rows)
