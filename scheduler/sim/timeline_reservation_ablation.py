"""Reservations with lifetime-aware backfill, measured: arms paired per seed with
``fgd-reserve`` on the one-clock replay (docs/timeline.md, "Reservations").

An arm is ``POLICY[@LIFETIMES][+reserve:SOURCE]``: the profile, what its lifetime-aware
plugins are told (``gnn-lifetime@model``), and the reservations with what they are told
(``+reserve:hidden|oracle|model``); ``--min-gpus``, ``--max-reservations`` and
``--backfill-quantile`` set K, R and q for every arm that reserves.

Per arm and load: GPU allocated, whole free GPU nodes, pods failed and the mean wait of
the pods asking fewer than 4 GPUs (a failed pod waited the max wait) as mean paired
differences with 95% Student-t intervals; GPU-hours waited and failed by pods of 4+
GPUs, and failed GPU-hours of all pods, as ratios of their sums over the seeds to
the baseline's. Run:
``python -m scheduler.sim.timeline_reservation_ablation --trace default --loads 1 0.8
--seeds 42-51 --arms fgd-reserve+reserve:hidden fgd-reserve+reserve:model``.
"""

from __future__ import annotations

import argparse
import json
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from scheduler.cli_values import parse_seeds
from scheduler.sim.paired import paired_difference
from scheduler.sim.reservations import ReservationConfig
from scheduler.sim.timeline import TimelineSpec, replay_timeline
from scheduler.sim.timeline_lifetimes import LIFETIME_SOURCES, LifetimeSource
from scheduler.sim.timeline_metrics import MULTI_GPU, SECONDS_PER_HOUR, timeline_metrics

BASELINE = "fgd-reserve"
DIFFERENCES = (
    "gpu_alloc_mean",
    "whole_free_nodes_pct",
    "multi_gpu_failed",
    "pods_failed",
    "small_wait_mean_s",
)
RATIOS = ("multi_gpu_wait_gpu_hours", "multi_gpu_failed_gpu_hours", "gpu_hours_failed")


def _source(text: str) -> LifetimeSource:
    for source in LIFETIME_SOURCES:
        if source == text:
            return source
    raise ValueError(f"unknown lifetime source {text!r}; known: {', '.join(LIFETIME_SOURCES)}")


def arm_spec(
    arm: str, trace: str, seed: int, load: float, config: ReservationConfig, max_wait_s: float
) -> TimelineSpec:
    """The replay of ``arm`` (``POLICY[@LIFETIMES][+reserve:SOURCE]``)."""
    head, _, reserve = arm.partition("+reserve")
    policy, _, told = head.partition("@")
    reservations = None
    source: LifetimeSource = "hidden"
    if reserve:
        source = _source(reserve.removeprefix(":") or "hidden")
        reservations = config
    return TimelineSpec(
        trace,
        policy,
        seed,
        load=load,
        max_wait_s=max_wait_s,
        lifetimes=_source(told) if told else "hidden",
        reservations=reservations,
        reservation_lifetimes=source,
    )


def measure(spec: TimelineSpec) -> dict[str, float]:
    """The replay's metrics, with those of the pods asking fewer than ``MULTI_GPU`` GPUs."""
    log = replay_timeline(spec)
    metrics = timeline_metrics(log)
    out = {k: float(v) for k, v in metrics.as_dict().items() if isinstance(v, int | float)}
    failed = log.failed
    small = log.gpu_milli < MULTI_GPU * 1000
    waited = np.where(failed, log.spec.max_wait_s, log.wait_s * log.time_scale)
    out["small_wait_mean_s"] = float(waited[small].mean()) if small.any() else 0.0
    out["small_wait_p90_s"] = float(np.percentile(waited[small], 90)) if small.any() else 0.0
    out["small_failed"] = float((failed & small).sum())
    multi = ~small
    hours = log.time_scale / SECONDS_PER_HOUR
    out["multi_gpu_failed_gpu_hours"] = (
        float((log.gpu_milli / 1000.0 * log.lifetime_s)[failed & multi].sum()) * hours
    )
    return out


def ablation(
    trace: str,
    loads: list[float],
    seeds: list[int],
    arms: list[str],
    config: ReservationConfig,
    workers: int,
    max_wait_s: float,
) -> list[dict[str, object]]:
    every = [BASELINE, *[a for a in arms if a != BASELINE]]
    keys = [(load, arm, seed) for load in loads for arm in every for seed in seeds]
    specs = [arm_spec(arm, trace, seed, load, config, max_wait_s) for load, arm, seed in keys]
    with ProcessPoolExecutor(workers) as pool:
        results = dict(zip(keys, pool.map(measure, specs), strict=True))
    return rows_of(results, loads, seeds, every)


Results = dict[tuple[float, str, int], dict[str, float]]


def rows_of(
    results: Results, loads: list[float], seeds: list[int], every: list[str]
) -> list[dict[str, object]]:
    """Per load and arm, the paired differences and ratios over ``seeds``."""
    rows: list[dict[str, object]] = []
    for load in loads:
        base = {s: results[(load, BASELINE, s)] for s in seeds}
        for arm in every:
            ours = {s: results[(load, arm, s)] for s in seeds}
            row: dict[str, object] = {"load": load, "arm": arm}
            for metric in DIFFERENCES:
                d = paired_difference(
                    arm,
                    BASELINE,
                    metric,
                    {s: m[metric] for s, m in ours.items()},
                    {s: m[metric] for s, m in base.items()},
                )
                row[metric] = [None, None, None] if d is None else [d.mean, d.low, d.high]
            for metric in RATIOS:
                total = sum(m[metric] for m in base.values())
                row[f"{metric}_ratio"] = sum(m[metric] for m in ours.values()) / max(total, 1e-9)
            row["means"] = {
                k: float(np.mean([m[k] for m in ours.values()])) for k in next(iter(ours.values()))
            }
            row["per_seed"] = ours
            rows.append(row)
    return rows


def _interval(values: object, digits: int = 2) -> str:
    assert isinstance(values, list)
    mean, low, high = values
    if mean is None:
        return "-"
    if low is None or high is None:
        return f"{mean:+.{digits}f}"
    return f"{mean:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}]"


def table(rows: list[dict[str, object]]) -> str:
    lines = [
        "| load | arm | GPU alloc | whole free nodes | 4+ GPU wait GPU-h | 4+ GPU failed GPU-h "
        "| failed GPU-h | 4+ GPU failed | pods failed | <4 GPU mean wait s (mean) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["arm"] == BASELINE:
            continue
        means = r["means"]
        assert isinstance(means, dict)
        lines.append(
            f"| {r['load']:g} | {r['arm']} | {_interval(r['gpu_alloc_mean'])} | "
            f"{_interval(r['whole_free_nodes_pct'])} | {r['multi_gpu_wait_gpu_hours_ratio']:.2f}x | "
            f"{r['multi_gpu_failed_gpu_hours_ratio']:.2f}x | {r['gpu_hours_failed_ratio']:.2f}x | "
            f"{_interval(r['multi_gpu_failed'], 1)} | {_interval(r['pods_failed'], 1)} | "
            f"{_interval(r['small_wait_mean_s'], 0)} ({means['small_wait_mean_s']:.0f}) |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--trace", default="default")
    parser.add_argument("--loads", type=float, nargs="+", default=[1.0, 0.8])
    parser.add_argument("--seeds", type=parse_seeds, default=parse_seeds("42-51"))
    parser.add_argument("--arms", nargs="+", required=True)
    parser.add_argument("--min-gpus", type=int, default=4)
    parser.add_argument("--max-reservations", type=int, default=1)
    parser.add_argument("--backfill-quantile", type=float, default=0.9)
    parser.add_argument("--max-wait", type=float, default=3600.0)
    parser.add_argument("--held-out", type=parse_seeds, default=None, help="also a table over these seeds")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("runs/reservation-ablation"))
    ns = parser.parse_args(argv)
    config = ReservationConfig(ns.min_gpus, ns.max_reservations, ns.backfill_quantile)
    rows = ablation(ns.trace, ns.loads, ns.seeds, ns.arms, config, ns.workers, ns.max_wait)
    ns.out.mkdir(parents=True, exist_ok=True)
    (ns.out / "ablation.json").write_text(json.dumps(rows, indent=2) + "\n")
    text = table(rows)
    if ns.held_out:
        results: Results = {
            (float(str(r["load"])), str(r["arm"]), int(seed)): values
            for r in rows
            for seed, values in dict(r["per_seed"]).items()  # type: ignore[call-overload]
        }
        arms = list(dict.fromkeys(str(r["arm"]) for r in rows))
        held = rows_of(results, ns.loads, ns.held_out, arms)
        (ns.out / "held_out.json").write_text(json.dumps(held, indent=2) + "\n")
        text += f"\n\nheld-out seeds {ns.held_out[0]}-{ns.held_out[-1]}:\n" + table(held)
    (ns.out / "ablation.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
