"""Calibration of the lifetime model on pods it did not see:
``python -m scheduler.lifetimes.evaluate --fit default --test gpushare40,gpushare20``.

Every openb list but ``default`` is resampled from ``default``'s pods (same requests,
same creation and deletion times; ``gpushare20``'s clock is shifted by 427,061 s), so
a model fitted on all of ``default`` has seen nearly every pod of the others. The
honest test is in time: fit on what was known at a cut (the pods of the ``--fit`` list
created before it, those still running then censored at the cut), test on the pods of
each list created after it. The cut is the creation time of the ``--split`` share of
the fit list's pods. ``multigpu20`` has no time columns: reported and skipped.

Then, for the record, the model fitted on the whole ``--fit`` list is scored on each
``--test`` list whole, with the share of its pods that the fit saw.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import numpy as np

from scheduler.errors import SchedulerInputError
from scheduler.lifetimes.calibration import COVERAGE_QUANTILES, Forecaster, Score, score_all
from scheduler.lifetimes.fit import FitConfig, fit_lifetimes
from scheduler.lifetimes.model import LifetimeModel
from scheduler.lifetimes.trace_lifetimes import PodLifetimes, load_pod_lifetimes

DEFAULT_SPLIT = 0.7
TIMING_PODS = 1000


def forecasters(pods: PodLifetimes, config: FitConfig) -> list[Forecaster]:
    """The model and its baselines, fitted on ``pods``."""
    model, _ = fit_lifetimes(pods.features, pods.observed_s, pods.ended, config, pods.entry_s)
    marginal, _ = fit_lifetimes(pods.features[:, :0], pods.observed_s, pods.ended, config, pods.entry_s)
    return [
        Forecaster("lifetimes", model),
        Forecaster("marginal", marginal, use_features=False),
        Forecaster("no age", model, use_age=False),
    ]


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:g} {unit}"
    return f"{seconds:g} s"


def format_scores(title: str, pods: PodLifetimes, scores: Sequence[Score]) -> list[str]:
    censored = len(pods) - int(np.count_nonzero(pods.ended))
    lines = [f"{title}: {len(pods):,} pods, {censored:,} censored"]
    head = " ".join(f"p{int(q * 100):<4}" for q in COVERAGE_QUANTILES)
    lines.append(f"  {'age':>6} {'running':>7}  {'forecaster':<10} coverage {head}  C-index  loglik/pod")
    for s in scores:
        cover = " ".join(f"{s.coverage[q]:.3f}" for q in COVERAGE_QUANTILES)
        lines.append(
            f"  {_age(s.age_s):>6} {s.pods:>7,}  {s.forecaster:<10}          {cover}  {s.concordance:7.3f}"
            f"  {s.log_likelihood:10.3f}"
        )
    return lines


def seen_share(test: PodLifetimes, fitted: PodLifetimes) -> float:
    """The share of ``test``'s pods whose requests and lifetime are a pod's of ``fitted``
    (the lists resample one another, ``gpushare20`` on a shifted clock, so times of
    creation are not compared)."""

    def keys(pods: PodLifetimes) -> list[tuple[float, ...]]:
        rows = np.round(np.column_stack([pods.features, pods.observed_s]), 6)
        return [tuple(row) for row in rows]

    known = set(keys(fitted))
    return float(np.mean([key in known for key in keys(test)])) if len(test) else 0.0


def timing(model: LifetimeModel, pods: PodLifetimes, repeats: int = 20) -> float:
    """Microseconds per pod for p10/p50/p90 and the mean of ``TIMING_PODS`` pods."""
    rng = np.random.default_rng(0)
    pick = rng.integers(0, len(pods), TIMING_PODS)
    x, age = pods.features[pick], rng.uniform(0, 1, TIMING_PODS) * pods.observed_s[pick]
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        model.remaining_quantiles(x, age)
        model.remaining_mean(x, age)
        best = min(best, time.perf_counter() - start)
    return best / TIMING_PODS * 1e6


def run(fit: str, tests: Sequence[str], split: float, config: FitConfig) -> list[str]:
    whole = load_pod_lifetimes(fit)
    cut = float(np.quantile(whole.creation_s, split))
    known = whole.before(cut)
    lines = [
        f"fit: {fit}, {len(whole):,} pods; time split at {cut:,.0f} s (creation of the {split:.0%} pod): "
        f"{len(known):,} pods known then, {int(np.count_nonzero(~known.ended)):,} censored at the cut",
    ]
    started = time.perf_counter()
    at_cut = forecasters(known, config)
    lines.append(f"  fitted in {time.perf_counter() - started:.1f} s (model and marginal)")
    lists: dict[str, PodLifetimes] = {fit: whole}
    for name in tests:
        try:
            lists[name] = load_pod_lifetimes(name)
        except SchedulerInputError as error:
            lines.append(f"{name}: skipped: {error}")
    lines.append("")
    lines.append(f"== time split: fitted on {fit} before the cut, tested on pods created after it")
    for name, pods in lists.items():
        after = pods.created_from(cut)
        lines.extend(format_scores(f"{name} after the cut", after, score_all(at_cut, after)))
    lines.append("")
    lines.append(
        f"== fitted on all of {fit} (the shipped model), tested on whole lists (pods seen in the fit)"
    )
    full = forecasters(whole, config)
    for name, pods in lists.items():
        if name == fit:
            continue
        title = f"{name} whole ({seen_share(pods, whole):.0%} of its pods are {fit}'s)"
        lines.extend(format_scores(title, pods, score_all(full, pods)))
    micro = timing(full[0].model, whole)
    lines.append("")
    lines.append(
        f"speed: {micro:.2f} us per pod (p10/p50/p90 and mean, batch of {TIMING_PODS:,}, best of 20)"
    )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scheduler.lifetimes.evaluate", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--fit", default="default", help="the pod list to fit on")
    parser.add_argument(
        "--test", default="gpushare40,gpushare20,multigpu20", help="pod lists to test on, comma-separated"
    )
    parser.add_argument(
        "--split", type=float, default=DEFAULT_SPLIT, help="share of the fit list's pods before the cut"
    )
    args = parser.parse_args(argv)
    if not 0.0 < args.split < 1.0:
        parser.error(f"argument --split: must be between 0 and 1, got {args.split}")
    tests = [t for t in args.test.split(",") if t]
    try:
        print("\n".join(run(args.fit, tests, args.split, FitConfig())))
    except SchedulerInputError as error:
        print(f"python -m scheduler.lifetimes.evaluate: error: {error}")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
