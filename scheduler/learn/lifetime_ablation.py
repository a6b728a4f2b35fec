"""The lifetime ablation of ``gnn-lifetime`` on the one-clock replay, paired per seed
with ``fgd-reserve``: today's ``gnn``, the hand rule ``fgd-reserve-lifetime`` (oracle,
model) and ``gnn-lifetime`` with lifetimes hidden, the trace's true ones (oracle) and
the cross-fitted model's median.

Per policy and load: GPU allocated, time-average whole free GPU nodes (all of them, and
those of the largest GPU count, the nodes 8-GPU pods need) as mean paired differences
in points with 95% Student-t intervals (``scheduler.sim.paired``),
and GPU-hours waited by pods of 4+ GPUs and GPU-hours failed as ratios of their sums
over the seeds to fgd-reserve's. Run:
``python -m scheduler.learn.lifetime_ablation --head <folder> --out runs/lifetime-ablation``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from scheduler.sim.paired import paired_difference
from scheduler.sim.timeline import TimelineSpec
from scheduler.sim.timeline_lifetimes import LifetimeSource
from scheduler.sim.timeline_metrics import TimelineMetrics, run_timeline

BASELINE = "fgd-reserve"


Arm = tuple[str, str, LifetimeSource, tuple[tuple[str, str], ...]]


def arms(head: str, only: list[str] | None = None) -> list[Arm]:
    """(label, policy, lifetimes, lifetime args) of each arm; with ``only``, the
    baseline and the arms of those labels (raises ``ValueError`` for a label no arm has)."""
    told = (("head", head),) if head else ()
    every: list[Arm] = [
        (BASELINE, BASELINE, "hidden", ()),
        ("gnn", "gnn", "hidden", ()),
        ("fgd-reserve-lifetime[oracle]", "fgd-reserve-lifetime", "oracle", ()),
        ("fgd-reserve-lifetime[model]", "fgd-reserve-lifetime", "model", ()),
        ("gnn-lifetime[hidden]", "gnn-lifetime", "hidden", told),
        ("gnn-lifetime[oracle]", "gnn-lifetime", "oracle", told),
        ("gnn-lifetime[model]", "gnn-lifetime", "model", told),
    ]
    if only is None:
        return every
    unknown = sorted(set(only) - {label for label, *_ in every})
    if unknown:
        raise ValueError(f"no arm {', '.join(unknown)}; the arms: {', '.join(label for label, *_ in every)}")
    return [arm for arm in every if arm[0] == BASELINE or arm[0] in only]


def paired_metrics(largest: int) -> dict[str, Callable[[TimelineMetrics], float]]:
    """The metrics compared as paired differences; ``largest``: the most GPUs a node has."""
    return {
        "gpu_alloc_mean": lambda m: m.gpu_alloc_mean,
        "whole_free_nodes_pct": lambda m: m.whole_free_pct(),
        "whole_free_largest_pct": lambda m: m.whole_free_pct(largest),
        "multi_gpu_failed": lambda m: float(m.multi_gpu_failed),
    }


def _metrics(spec: TimelineSpec) -> TimelineMetrics:
    return run_timeline(spec).metrics


def ablation(
    trace: str, loads: list[float], seeds: list[int], head: str, workers: int, only: list[str] | None = None
) -> list[dict[str, object]]:
    chosen = arms(head, only)
    keys = [(load, label, seed) for load in loads for label, *_ in chosen for seed in seeds]
    specs = [
        TimelineSpec(trace, policy, seed, load=load, lifetimes=lifetimes, lifetime_args=args)
        for load in loads
        for _, policy, lifetimes, args in chosen
        for seed in seeds
    ]
    with ProcessPoolExecutor(workers) as pool:
        results = dict(zip(keys, pool.map(_metrics, specs), strict=True))
    rows: list[dict[str, object]] = []
    for load in loads:
        base = {s: results[(load, BASELINE, s)] for s in seeds}
        largest = max((g for m in base.values() for g in m.whole_free_pct_by_gpus), default=0)
        values = paired_metrics(largest)
        for label, *_ in chosen:
            ours = {s: results[(load, label, s)] for s in seeds}
            row: dict[str, object] = {"load": load, "policy": label, "largest_gpus": largest}
            for metric, value in values.items():
                d = paired_difference(
                    label,
                    BASELINE,
                    metric,
                    {s: value(m) for s, m in ours.items()},
                    {s: value(m) for s, m in base.items()},
                )
                row[metric] = [None, None, None] if d is None else [d.mean, d.low, d.high]
            for metric in ("multi_gpu_wait_gpu_hours", "gpu_hours_failed"):
                total = sum(float(getattr(m, metric)) for m in base.values())
                row[f"{metric}_ratio"] = sum(float(getattr(m, metric)) for m in ours.values()) / max(
                    total, 1e-9
                )
            row["per_seed"] = {s: m.as_dict() for s, m in ours.items()}
            rows.append(row)
    return rows


def _interval(values: object) -> str:
    assert isinstance(values, list)
    mean, low, high = (None if v is None else float(v) for v in values)
    if mean is None:
        return "-"
    return f"{mean:+.2f}" if low is None or high is None else f"{mean:+.2f} [{low:+.2f}, {high:+.2f}]"


def table(rows: list[dict[str, object]]) -> str:
    lines = [
        "| load | policy | GPU alloc | whole free nodes | of the most GPUs (G) | 4+ GPU failed "
        "| wait GPU-h | failed GPU-h |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["policy"] == BASELINE:
            continue
        lines.append(
            f"| {r['load']:g} | {r['policy']} | {_interval(r['gpu_alloc_mean'])} | "
            f"{_interval(r['whole_free_nodes_pct'])} | "
            f"{_interval(r['whole_free_largest_pct'])} ({r['largest_gpus']}) | "
            f"{_interval(r['multi_gpu_failed'])} | "
            f"{r['multi_gpu_wait_gpu_hours_ratio']:.2f}x | {r['gpu_hours_failed_ratio']:.2f}x |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", default="default")
    parser.add_argument("--loads", type=float, nargs="+", default=[0.8, 1.0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(42, 52)))
    parser.add_argument("--head", default="", help="the head's folder (empty: the shipped one)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("runs/lifetime-ablation"))
    parser.add_argument(
        "--arms", nargs="+", default=None, help="only these arms, by label, beside the baseline [all]"
    )
    ns = parser.parse_args(argv)
    try:
        arms(ns.head, ns.arms)
    except ValueError as error:
        parser.error(str(error))
    rows = ablation(ns.trace, ns.loads, ns.seeds, ns.head, ns.workers, ns.arms)
    ns.out.mkdir(parents=True, exist_ok=True)
    (ns.out / "ablation.json").write_text(json.dumps(rows, indent=2, default=str) + "\n")
    text = table(rows)
    (ns.out / "ablation.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
