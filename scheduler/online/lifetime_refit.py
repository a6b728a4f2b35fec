"""Refitting the lifetime model on the cluster's own pods, gated on pods it did not see.

The pods the experience log saw start (``observed_lifetimes``) are split in time, as
``scheduler.lifetimes.evaluate`` splits a trace: the candidate is fitted on what was
known at the cut (the pods started before it, those still running then censored at
the cut), and judged against the incumbent on the pods started after it (the newest
``holdout_fraction``), ended or censored at the observation time. The fit is
``fit_lifetimes`` from scratch, with its penalties (a request seen on few pods stays
near no effect); not warm-started from the incumbent, whose scale of time may be the
very thing that is wrong (openb's median pod runs for minutes to hours).

The gate, at arrival (age 0, what a placement knows): the candidate's log-likelihood
per held-out pod must beat the incumbent's by ``margin`` nats, and its coverage of the
remaining lifetime's p90 must be no further from 0.9 than the incumbent's by more than
``coverage_tolerance`` (on a few dozen held-out pods the coverage itself is noisy by
about 0.05). Placement quality is not replayed: the twin (``twin``) places arrivals and
never ends a pod, so no lifetime model changes its outcome.

A promoted model is published as a new version of the policy store: the incumbent
policy checkpoint copied (the shipped one while the store holds none) and the model in
``lifetimes/`` (``scheduler.lifetimes.model_file``'s format), its manifest saying what
it was fitted on and the gate's numbers. numpy and scipy only: no torch.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from scheduler.errors import SchedulerInputError
from scheduler.lifetimes.calibration import Forecaster, score
from scheduler.lifetimes.fit import FitConfig, fit_lifetimes
from scheduler.lifetimes.model import LifetimeModel
from scheduler.lifetimes.model_file import load_lifetime_model, save_lifetime_model
from scheduler.lifetimes.trace_lifetimes import PodLifetimes
from scheduler.online.store import PolicyStore
from scheduler.policy.weights import default_checkpoint_path

LIFETIMES_DIR = "lifetimes"
P90 = 0.9


@dataclass(frozen=True)
class RefitConfig:
    holdout_fraction: float = 0.3
    min_train_ended: int = 30  # ended pods before the cut
    min_holdout: int = 20  # pods started after the cut
    margin: float = 0.05  # nats per held-out pod
    coverage_tolerance: float = 0.1
    fit: FitConfig = field(default_factory=FitConfig)


@dataclass(frozen=True)
class LifetimeVerdict:
    promote: bool
    reason: str
    cut_s: float
    train_pods: int
    train_ended: int
    holdout_pods: int
    holdout_ended: int
    candidate_log_likelihood: float
    incumbent_log_likelihood: float
    candidate_p90_coverage: float
    incumbent_p90_coverage: float
    fit_seconds: float
    fit_iterations: int
    fit_converged: bool

    def describe(self) -> str:
        return (
            f"{'promote' if self.promote else 'reject'} lifetimes ({self.reason}): "
            f"log-likelihood per held-out pod {self.candidate_log_likelihood:.3f} "
            f"vs incumbent {self.incumbent_log_likelihood:.3f}, "
            f"p90 coverage {self.candidate_p90_coverage:.3f} vs {self.incumbent_p90_coverage:.3f} "
            f"({self.holdout_pods} held-out pods, fitted on {self.train_pods})"
        )

    def record(self) -> dict[str, Any]:
        return {name: round(v, 4) if isinstance(v, float) else v for name, v in asdict(self).items()}


def split_in_time(pods: PodLifetimes, holdout_fraction: float) -> tuple[float, PodLifetimes, PodLifetimes]:
    """``(cut, known at the cut, started from it)``: the cut is the start of the pod
    that begins the newest ``holdout_fraction`` of them."""
    order = np.sort(pods.creation_s)
    cut = float(order[min(int(len(order) * (1 - holdout_fraction)), len(order) - 1)])
    return cut, pods.before(cut), pods.created_from(cut)


def _at_arrival(model: LifetimeModel, pods: PodLifetimes) -> tuple[float, float]:
    scored = score(Forecaster("model", model), pods, 0.0)
    if scored is None:  # no held-out pod seen past age 0
        return float("-inf"), float("nan")
    return scored.log_likelihood, scored.coverage[P90]


def judge_lifetimes(
    pods: PodLifetimes, incumbent: LifetimeModel, config: RefitConfig
) -> tuple[LifetimeVerdict, LifetimeModel] | None:
    """The candidate fitted before the cut and its verdict; None while the data are too
    few to fit or to judge."""
    if len(pods) < 2:
        return None
    cut, train, holdout = split_in_time(pods, config.holdout_fraction)
    train_ended = int(np.count_nonzero(train.ended))
    if train_ended < config.min_train_ended or len(holdout) < config.min_holdout:
        return None
    started = time.perf_counter()
    candidate, report = fit_lifetimes(
        train.features, train.observed_s, train.ended, config.fit, train.entry_s
    )
    seconds = time.perf_counter() - started
    candidate_ll, candidate_p90 = _at_arrival(candidate, holdout)
    incumbent_ll, incumbent_p90 = _at_arrival(incumbent, holdout)
    if not candidate_ll >= incumbent_ll + config.margin:
        reason = "likelihood not better than the incumbent's"
    elif not abs(candidate_p90 - P90) <= abs(incumbent_p90 - P90) + config.coverage_tolerance:
        reason = "p90 coverage worse than the incumbent's"
    else:
        reason = "better than the incumbent"
    verdict = LifetimeVerdict(
        promote=reason == "better than the incumbent",
        reason=reason,
        cut_s=cut,
        train_pods=len(train),
        train_ended=train_ended,
        holdout_pods=len(holdout),
        holdout_ended=int(np.count_nonzero(holdout.ended)),
        candidate_log_likelihood=candidate_ll,
        incumbent_log_likelihood=incumbent_ll,
        candidate_p90_coverage=candidate_p90,
        incumbent_p90_coverage=incumbent_p90,
        fit_seconds=seconds,
        fit_iterations=report.iterations,
        fit_converged=report.converged,
    )
    return verdict, candidate


def incumbent_lifetimes(store: PolicyStore) -> tuple[LifetimeModel, str]:
    """The model the scheduler reads: the current version's ``lifetimes/``, else (none,
    or one that does not load) the shipped one; and which it is."""
    current = store.current_path()
    if current is not None and (current / LIFETIMES_DIR).is_dir():
        try:
            return load_lifetime_model(current / LIFETIMES_DIR), current.name
        except SchedulerInputError:
            pass
    return load_lifetime_model(), "shipped"


def copy_policy(source: Path, folder: Path) -> None:
    """The policy checkpoint of ``source`` (a version or the shipped folder) into
    ``folder``, without any lifetime model it holds."""
    for item in source.iterdir():
        if item.name == LIFETIMES_DIR:
            continue
        if item.is_dir():
            shutil.copytree(item, folder / item.name)
        else:
            shutil.copy2(item, folder / item.name)


def carry_lifetimes(source: Path | None, folder: Path) -> None:
    """Keep the lifetime model of ``source`` (the version being replaced) in a new
    version, so publishing a policy does not drop a refitted lifetime model."""
    if source is not None and (source / LIFETIMES_DIR).is_dir():
        shutil.copytree(source / LIFETIMES_DIR, folder / LIFETIMES_DIR)


def publish_lifetimes(
    store: PolicyStore, model: LifetimeModel, training: dict[str, Any], evaluation: dict[str, Any]
) -> str:
    """A new version: the incumbent policy and ``model`` in ``lifetimes/``."""
    policy = store.current_path() or default_checkpoint_path()

    def write(folder: Path) -> None:
        copy_policy(policy, folder)
        save_lifetime_model(model, folder / LIFETIMES_DIR, training, evaluation)

    return store.publish(write)
