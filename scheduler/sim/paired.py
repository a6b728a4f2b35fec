"""Paired comparisons over seeds: one policy minus another on the same trace and seed.

Every policy of a seed replays the same pods in the same order on the same nodes (the
shuffle and the node order come from the seed alone), so per-seed differences are
paired and most of the seed-to-seed variation cancels. For each pair of policies and
each metric: the mean difference over the seeds the two share, a two-sided 95%
Student-t interval on that mean (``mean +- t(0.975, n - 1) * sd / sqrt(n)``; it
assumes the differences are roughly normal, which 10 seeds cannot check), and how
many seeds are ahead, tied and behind. With all differences equal the interval is
that value; with one seed there is none.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

CONFIDENCE = 0.95
TRACE_METRICS = (("gpu_alloc_100", "alloc@100%"), ("gpu_alloc_130", "alloc@130%"))
SYNTHETIC_METRIC = ("placed_before_first_failure", "placed before 1st failure")


@dataclass(frozen=True)
class PairedDifference:
    """``policy`` minus ``baseline`` on ``metric``, seed by seed."""

    policy: str
    baseline: str
    metric: str
    seeds: tuple[int, ...]
    differences: tuple[float, ...]
    mean: float
    low: float | None  # the interval's ends; None with fewer than two seeds
    high: float | None
    ahead: int
    tied: int
    behind: int


def t_quantile(probability: float, freedom: int) -> float:
    from scipy.stats import t  # noqa: PLC0415 - only evaluations need it

    return float(t.ppf(probability, freedom))


def paired_difference(
    policy: str,
    baseline: str,
    metric: str,
    ours: Mapping[int, float],
    theirs: Mapping[int, float],
    confidence: float = CONFIDENCE,
) -> PairedDifference | None:
    """The paired difference over the seeds both have a finite value for; None if none."""
    seeds = tuple(
        sorted(s for s in ours.keys() & theirs.keys() if math.isfinite(ours[s]) and math.isfinite(theirs[s]))
    )
    if not seeds:
        return None
    differences = tuple(ours[s] - theirs[s] for s in seeds)
    mean = statistics.fmean(differences)
    low = high = None
    if len(seeds) > 1:
        half = t_quantile(0.5 + confidence / 2, len(seeds) - 1) * statistics.stdev(differences)
        half /= math.sqrt(len(seeds))
        low, high = mean - half, mean + half
    return PairedDifference(
        policy,
        baseline,
        metric,
        seeds,
        differences,
        mean,
        low,
        high,
        ahead=sum(d > 0 for d in differences),
        tied=sum(d == 0 for d in differences),
        behind=sum(d < 0 for d in differences),
    )


def _per_seed(entry: Mapping[str, Any], metric: str) -> dict[int, float]:
    values = {}
    for seed, row in entry.get("per_seed", {}).items():
        value = row.get(metric)
        values[int(seed)] = math.nan if value is None else float(value)
    return values


def paired_traces(
    summary: Mapping[str, Any], policy: str, baselines: Sequence[str]
) -> dict[str, list[PairedDifference]]:
    """Per trace of a ``report.summarise`` summary: ``policy`` against each baseline it
    was replayed beside, on allocation at 100% and 130% arrived."""
    out: dict[str, list[PairedDifference]] = {}
    for trace, policies in summary.get("traces", {}).items():
        if policy not in policies:
            continue
        rows = []
        for baseline in baselines:
            if baseline == policy or baseline not in policies:
                continue
            for metric, _ in TRACE_METRICS:
                found = paired_difference(
                    policy,
                    baseline,
                    metric,
                    _per_seed(policies[policy], metric),
                    _per_seed(policies[baseline], metric),
                )
                if found is not None:
                    rows.append(found)
        out[trace] = rows
    return out


def paired_synthetic(
    summary: Mapping[str, Any], policy: str, baselines: Sequence[str]
) -> list[PairedDifference]:
    """The same on a ``report.summarise_synthetic`` summary (pods placed before the
    first failure)."""
    metric = SYNTHETIC_METRIC[0]
    policies = summary.get("policies", {})
    if policy not in policies:
        return []

    def values(name: str) -> dict[int, float]:
        by_seed = policies[name].get(f"{metric}_by_seed", {})
        return {int(seed): float(value) for seed, value in by_seed.items()}

    rows = []
    for baseline in baselines:
        if baseline != policy and baseline in policies:
            found = paired_difference(policy, baseline, metric, values(policy), values(baseline))
            if found is not None:
                rows.append(found)
    return rows


def _signed(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:+.{digits}f}"


def _row(difference: PairedDifference, digits: int) -> list[str]:
    interval = (
        "-"
        if difference.low is None
        else f"[{_signed(difference.low, digits)}, {_signed(difference.high, digits)}]"
    )
    return [
        f"{difference.policy} - {difference.baseline}",
        dict((*TRACE_METRICS, SYNTHETIC_METRIC)).get(difference.metric, difference.metric),
        _signed(difference.mean, digits),
        interval,
        f"{difference.ahead}/{difference.tied}/{difference.behind}",
        str(len(difference.seeds)),
    ]


HEADER = ["comparison", "metric", "mean diff", "95% t-interval", "ahead/tied/behind", "seeds"]


def paired_rows(by_trace: Mapping[str, Sequence[PairedDifference]]) -> tuple[list[str], list[list[str]]]:
    """Header and rows for ``report.format_table``; differences in points of allocation."""
    rows = [[trace, *_row(d, 2)] for trace, differences in by_trace.items() for d in differences]
    return ["trace", *HEADER], rows


def across_traces(by_trace: Mapping[str, Sequence[PairedDifference]]) -> tuple[list[str], list[list[str]]]:
    """Per comparison and metric over several traces: the median of the traces' mean
    differences, and how many traces' means are ahead, tied and behind (no interval:
    the traces are not a sample of anything)."""
    grouped: dict[tuple[str, str, str], list[float]] = {}
    for differences in by_trace.values():
        for d in differences:
            grouped.setdefault((d.policy, d.baseline, d.metric), []).append(d.mean)
    names = dict((*TRACE_METRICS, SYNTHETIC_METRIC))
    rows = [
        [
            f"{policy} - {baseline}",
            names.get(metric, metric),
            _signed(statistics.median(means), 2),
            f"{sum(m > 0 for m in means)}/{sum(m == 0 for m in means)}/{sum(m < 0 for m in means)}",
            str(len(means)),
        ]
        for (policy, baseline, metric), means in grouped.items()
    ]
    return ["comparison", "metric", "median of trace means", "traces ahead/tied/behind", "traces"], rows


def synthetic_rows(differences: Sequence[PairedDifference]) -> tuple[list[str], list[list[str]]]:
    return HEADER, [_row(d, 1) for d in differences]


def as_json(difference: PairedDifference) -> dict[str, Any]:
    out = asdict(difference)
    out["seeds"] = list(difference.seeds)
    out["differences"] = [round(d, 4) for d in difference.differences]
    for key in ("mean", "low", "high"):
        if out[key] is not None:
            out[key] = round(out[key], 4)
    out["interval"] = f"two-sided {CONFIDENCE:.0%} Student-t on the mean paired difference"
    return out
