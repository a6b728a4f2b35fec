"""Fit the lifetime model on an openb pod list and write it as a model folder:
``python -m scheduler.lifetimes.train --trace default --out scheduler/lifetimes/models/openb-default``.

The model is fitted on the whole list; the manifest records how (trace, pods, censored,
left-truncated, the fit's settings) and how a model fitted the same way on the pods
known at the time split calibrated on the pods after it (``evaluate``'s first table),
so a shipped file says what it is worth.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from scheduler.errors import SchedulerInputError
from scheduler.lifetimes.calibration import COVERAGE_QUANTILES, score_all
from scheduler.lifetimes.evaluate import DEFAULT_SPLIT, forecasters
from scheduler.lifetimes.fit import FitConfig, fit_lifetimes
from scheduler.lifetimes.model_file import default_model_path, save_lifetime_model
from scheduler.lifetimes.trace_lifetimes import load_pod_lifetimes


def time_split_record(trace: str, split: float, config: FitConfig) -> dict[str, Any]:
    """The calibration on the pods created after the split, of a fit on those before."""
    pods = load_pod_lifetimes(trace)
    cut = float(np.quantile(pods.creation_s, split))
    after = pods.created_from(cut)
    scores = score_all(forecasters(pods.before(cut), config), after)
    return {
        "trace": trace,
        "cut_s": cut,
        "test_pods": len(after),
        "scores": [
            {
                "forecaster": s.forecaster,
                "age_s": s.age_s,
                "pods": s.pods,
                "coverage": {f"p{int(q * 100)}": round(s.coverage[q], 4) for q in COVERAGE_QUANTILES},
                "concordance": round(s.concordance, 4),
                "log_likelihood_per_pod": round(s.log_likelihood, 4),
            }
            for s in scores
        ],
    }


def train(trace: str, out: Path, split: float = DEFAULT_SPLIT) -> Path:
    config = FitConfig()
    pods = load_pod_lifetimes(trace)
    model, report = fit_lifetimes(pods.features, pods.observed_s, pods.ended, config, pods.entry_s)
    training = {
        "trace": trace,
        "pods": len(pods),
        "censored": int(np.count_nonzero(~pods.ended)),
        "left_truncated": int(np.count_nonzero(pods.entry_s > 0)),
        "curves": config.curves,
        "l2": config.l2,
        "smoothness": config.smoothness,
        "iterations": report.iterations,
        "converged": report.converged,
        "log_likelihood_per_pod": round(report.log_likelihood_per_pod, 4),
        "command": f"python -m scheduler.lifetimes.train --trace {trace}"
        + ("" if out == default_model_path() else f" --out {out}"),
    }
    evaluation = {"time_split": time_split_record(trace, split, config)}
    return save_lifetime_model(model, out, training, evaluation)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scheduler.lifetimes.train", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--trace", default="default", help="the openb pod list to fit on")
    parser.add_argument("--out", type=Path, default=default_model_path(), help="the model folder to write")
    parser.add_argument("--split", type=float, default=DEFAULT_SPLIT, help="the time split recorded")
    args = parser.parse_args(argv)
    try:
        folder = train(args.trace, args.out, args.split)
    except SchedulerInputError as error:
        print(f"python -m scheduler.lifetimes.train: error: {error}")
        return 2
    print(f"wrote {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
