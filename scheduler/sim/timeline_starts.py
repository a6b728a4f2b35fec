"""How well predicted starts cover actual ones in the timeline replay
(``rl-scheduler timeline --predict-starts model,oracle``).

Each pod that fits nowhere when it arrives (its first failed attempt: every arriving pod
gets a cycle at once) gets a start forecast (``scheduler.lifetimes.start_forecast``) over
the state at that moment, under each variant asked for:

- ``model``: residents' remaining lifetimes from the lifetime model at their ages,
  cross-fitted as ``--lifetimes model`` is (``timeline_model``: no pod forecast by a model
  fitted on it); ``oracle``: their true remaining lifetimes (the replay's own; a pod
  censored in the trace never leaves). The oracle leaves only what the start model
  itself gets wrong (arrivals that take freed room, the queue, GPU choices), so the two
  together separate lifetime error from queue-model error.
- ``+queue``: the pods ahead of it in the FIFO pending queue are placed first
  (``forecast_start``'s ``ahead``); without it they are ignored.

Forecasts never change what the replay does. Each is then held against what happened:

- a pod that started waited ``wait`` (placement minus arrival); quantile ``q`` covers
  it when ``wait <= p_q``;
- a pod that never started (it failed at the max wait, or the replay ended) is
  censored at ``censor`` (how long it was seen waiting). Quantile ``q`` missed it for
  sure when ``p_q < censor``, covered it when ``p_q`` is ``inf`` (never, and it never
  did), and is unknown otherwise: ``coverage_low`` counts those as misses,
  ``coverage_high`` as covered. ``coverage_km``: a Kaplan-Meier estimate over each pod's
  level ``F(wait-)`` (the forecast's share of samples before the actual start, below
  ``q`` exactly when ``p_q`` covers it), a censored pod's ``F(censor)`` a lower bound,
  as ``scheduler.lifetimes.calibration`` scores lifetimes.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from scheduler.framework.plugin import FilterPlugin
from scheduler.lifetimes.calibration import km_share_at_most
from scheduler.lifetimes.start_forecast import DEFAULT_SAMPLES, RemainingSampler, forecast_start
from scheduler.objects.pod import Pod
from scheduler.plugins.remaining_lifetimes import ResidentClock
from scheduler.state.cluster_state import ClusterState

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
START_SOURCES = ("model", "oracle")
COVERED = (0.5, 0.9)
# Pods by what they ask, for the breakdown: (name, lowest GPU milli, highest).
CLASSES = (
    ("CPU only", 0, 0),
    ("GPU share", 1, 999),
    ("1 GPU", 1000, 1000),
    ("2-3 GPUs", 1001, 3999),
    ("4+ GPUs", 4000, 1 << 40),
)


def variant_names(sources: Iterable[str], queue: Iterable[bool]) -> tuple[str, ...]:
    return tuple(f"{s}+queue" if q else s for s in sources for q in queue)


def oracle_sampler(lifetimes_s: Mapping[str, float], clock: ResidentClock) -> RemainingSampler:
    """True remaining lifetimes, the same at every level."""

    def sample(pods: Sequence[Pod], levels: FloatArray) -> FloatArray:
        keys = [p.key for p in pods]
        total = np.array([lifetimes_s[k] for k in keys], np.float64)
        left = np.maximum(total - clock.ages_s(keys), 0.0)
        return np.repeat(left[:, None], levels.size, axis=1)

    return sample


def model_sampler(trace: str, clock: ResidentClock) -> RemainingSampler:
    """The cross-fitted model's quantiles at each pod's age (``timeline_model``)."""
    from scheduler.sim.timeline_model import cross_fitted  # noqa: PLC0415 - scipy, only when asked

    fitted = cross_fitted(trace)

    def sample(pods: Sequence[Pod], levels: FloatArray) -> FloatArray:
        return fitted.quantiles(pods, clock.ages_s([p.key for p in pods]), levels)

    return sample


@dataclass
class StartRecords:
    """One variant's forecasts, per pod forecast (in the order of their arrival)."""

    pod: list[int] = field(default_factory=list)  # the pod's index in the replay
    p50_s: list[float] = field(default_factory=list)
    p90_s: list[float] = field(default_factory=list)
    samples: list[FloatArray] = field(default_factory=list)  # sorted, dropped once scored
    # Filled by ``score``: how long it waited (NaN: never started) or was seen waiting.
    wait_s: FloatArray = field(default_factory=lambda: np.zeros(0))
    censor_s: FloatArray = field(default_factory=lambda: np.zeros(0))
    level: FloatArray = field(default_factory=lambda: np.zeros(0))
    gpu_milli: IntArray = field(default_factory=lambda: np.zeros(0, np.int64))
    seconds: float = 0.0  # CPU time of its forecasts


class StartRecorder:
    """Forecasts the start of each pod that fails its first cycle, per variant."""

    def __init__(
        self,
        variants: Sequence[str],
        samplers: Mapping[str, RemainingSampler],
        samples: int = DEFAULT_SAMPLES,
    ) -> None:
        self.variants = tuple(variants)
        self.samplers = samplers
        self.samples = samples
        self.records = {v: StartRecords() for v in self.variants}

    def record(
        self,
        i: int,
        state: ClusterState,
        pod: Pod,
        filters: Sequence[FilterPlugin],
        ahead: Sequence[Pod],
        ahead_deadlines_s: Sequence[float] | None = None,
    ) -> None:
        """Pod ``i`` fits nowhere: its forecasts; ``ahead``: the pending pods before it,
        each giving up after ``ahead_deadlines_s`` (their max wait left)."""
        for variant in self.variants:
            source, _, queue = variant.partition("+")
            started = time.process_time()
            forecast = forecast_start(
                state,
                pod,
                filters,
                self.samplers[source],
                ahead=ahead if queue else (),
                ahead_deadlines_s=ahead_deadlines_s if queue else None,
                samples=self.samples,
                seed=i,
            )
            records = self.records[variant]
            records.seconds += time.process_time() - started
            records.pod.append(i)
            records.p50_s.append(forecast.p50_s)
            records.p90_s.append(forecast.p90_s)
            records.samples.append(forecast.samples_s)

    def score(self, wait_s: FloatArray, censor_s: FloatArray, gpu_milli: IntArray) -> dict[str, StartRecords]:
        """Each forecast against what happened (per replay pod: its wait, NaN when it
        never started, and how long it was seen waiting); drops the samples."""
        for records in self.records.values():
            pods = np.array(records.pod, np.int64)
            records.wait_s = wait_s[pods]
            records.censor_s = censor_s[pods]
            records.gpu_milli = gpu_milli[pods]
            levels = np.empty(pods.size)
            for j, samples in enumerate(records.samples):
                if np.isnan(records.wait_s[j]):  # F(censor): a lower bound
                    before = np.searchsorted(samples, records.censor_s[j], side="right")
                else:  # F(wait-)
                    before = np.searchsorted(samples, records.wait_s[j], side="left")
                levels[j] = before / max(samples.size, 1)
            records.level = levels
            records.samples = []
        return self.records


@dataclass(frozen=True)
class Coverage:
    """A variant's forecasts held against actual starts (``docs/lifetimes.md``)."""

    pods: int  # forecast (pending at arrival)
    started: int
    never_started: int
    covered_started: dict[float, float | None]  # share of started pods with wait <= p_q
    never_covered: dict[float, int]  # never started, p_q infinite
    never_missed: dict[float, int]  # never started, p_q below how long they were seen
    never_unknown: dict[float, int]
    coverage_low: dict[float, float | None]
    coverage_high: dict[float, float | None]
    coverage_km: dict[float, float | None]
    p50_median_s: float | None
    p90_median_s: float | None
    wait_median_s: float | None  # of the started pods
    forecast_ms: float | None  # mean CPU milliseconds per forecast

    def as_dict(self) -> dict[str, Any]:
        def keyed(values: Mapping[float, Any]) -> dict[str, Any]:
            return {f"p{round(q * 100)}": v for q, v in values.items()}

        out: dict[str, Any] = {}
        for name, value in self.__dict__.items():
            out[name] = keyed(value) if isinstance(value, dict) else value
        return out


def _share(mask: npt.NDArray[np.bool_]) -> float | None:
    return float(mask.mean()) if mask.size else None


def _median(values: FloatArray) -> float | None:
    finite = values[np.isfinite(values)]
    if not values.size:
        return None
    # The median with infinities counted (more than half never: inf).
    if finite.size * 2 < values.size:
        return float("inf")
    return float(np.quantile(values, 0.5, method="inverted_cdf"))


def coverage(records: Sequence[StartRecords], gpu_class: tuple[int, int] | None = None) -> Coverage:
    """Coverage over the records of several replays (one variant), of the pods whose GPU
    milli is within ``gpu_class`` when given."""

    def join(name: str) -> FloatArray:
        parts = [np.asarray(getattr(r, name), np.float64) for r in records]
        return np.concatenate(parts) if parts else np.zeros(0)

    wait, censor, level, milli = join("wait_s"), join("censor_s"), join("level"), join("gpu_milli")
    p = {0.5: join("p50_s"), 0.9: join("p90_s")}
    keep = np.ones(wait.size, np.bool_)
    if gpu_class is not None:
        keep = (milli >= gpu_class[0]) & (milli <= gpu_class[1])
    wait, censor, level = wait[keep], censor[keep], level[keep]
    p = {q: v[keep] for q, v in p.items()}
    started = ~np.isnan(wait)
    n = int(wait.size)
    covered_started, never_covered, never_missed, never_unknown = {}, {}, {}, {}
    low, high, km = {}, {}, {}
    for q in COVERED:
        hit = started & (wait <= p[q])
        inf = ~started & np.isinf(p[q])
        missed = ~started & (p[q] < censor)
        unknown = ~started & ~inf & ~missed
        covered_started[q] = _share(hit[started])
        never_covered[q], never_missed[q], never_unknown[q] = (int(m.sum()) for m in (inf, missed, unknown))
        low[q] = (int(hit.sum()) + int(inf.sum())) / n if n else None
        high[q] = (int(hit.sum()) + int(inf.sum()) + int(unknown.sum())) / n if n else None
        km[q] = km_share_at_most(level, started, (q - 1e-9,))[q - 1e-9] if n else None
    seconds = sum(r.seconds for r in records)
    forecasts = sum(len(r.pod) for r in records)
    return Coverage(
        pods=n,
        started=int(started.sum()),
        never_started=int((~started).sum()),
        covered_started=covered_started,
        never_covered=never_covered,
        never_missed=never_missed,
        never_unknown=never_unknown,
        coverage_low=low,
        coverage_high=high,
        coverage_km=km,
        p50_median_s=_median(p[0.5]),
        p90_median_s=_median(p[0.9]),
        wait_median_s=_median(wait[started]),
        forecast_ms=1000 * seconds / forecasts if forecasts else None,
    )


def coverage_by_class(records: Sequence[StartRecords]) -> dict[str, Coverage]:
    out = {"all": coverage(records)}
    for name, low, high in CLASSES:
        found = coverage(records, (low, high))
        if found.pods:
            out[name] = found
    return out


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if not np.isfinite(value):
        return "never"
    return f"{value:.0f}"


def coverage_rows(by_variant: Mapping[str, Mapping[str, Coverage]]) -> tuple[list[str], list[list[str]]]:
    """The table ``rl-scheduler timeline --predict-starts`` prints."""
    headers = [
        "forecast",
        "pods",
        "pending",
        "started",
        "never",
        "p50 cov % (started)",
        "p90 cov % (started)",
        "p90 cov % all: low-high (KM)",
        "p50 / p90 / wait median s",
        "ms/forecast",
    ]
    rows = []
    for variant, classes in by_variant.items():
        for name, c in classes.items():
            rows.append(
                [
                    variant,
                    name,
                    str(c.pods),
                    str(c.started),
                    str(c.never_started),
                    _pct(c.covered_started[0.5]),
                    _pct(c.covered_started[0.9]),
                    f"{_pct(c.coverage_low[0.9])}-{_pct(c.coverage_high[0.9])} ({_pct(c.coverage_km[0.9])})",
                    f"{_seconds(c.p50_median_s)} / {_seconds(c.p90_median_s)} / {_seconds(c.wait_median_s)}",
                    "-" if c.forecast_ms is None else f"{c.forecast_ms:.1f}",
                ]
            )
    return headers, rows


def start_recorder(
    variants: Sequence[str],
    trace: str,
    pod_keys: Sequence[str],
    lifetimes_s: Iterable[float],
    clock: ResidentClock,
) -> StartRecorder:
    """A recorder of ``variants`` for a replay of ``trace`` (its pods' keys and the
    lifetimes it runs, on its clock)."""
    sources = {v.partition("+")[0] for v in variants}
    unknown = sources - set(START_SOURCES)
    if unknown:
        raise ValueError(
            f"unknown start forecast source {sorted(unknown)[0]!r}; known: {', '.join(START_SOURCES)}"
        )
    samplers: dict[str, RemainingSampler] = {}
    if "oracle" in sources:
        samplers["oracle"] = oracle_sampler(
            dict(zip(pod_keys, (float(t) for t in lifetimes_s), strict=True)), clock
        )
    if "model" in sources:
        samplers["model"] = model_sampler(trace, clock)
    return StartRecorder(variants, samplers)


START_QUEUE = ("ahead", "ignore", "both")
TABLE_NOTE = (
    "per policy and forecast, all seeds pooled; cov: share with wait <= the quantile; 'all' counts "
    "the pods never started: low as misses where unknown, high as covered, KM the Kaplan-Meier estimate"
)


def start_sources(text: str) -> tuple[str, ...]:
    """``--predict-starts``: comma-separated sources, each once."""
    import argparse  # noqa: PLC0415

    sources = tuple(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
    unknown = [s for s in sources if s not in START_SOURCES]
    if not sources or unknown:
        raise argparse.ArgumentTypeError(
            f"expected a comma-separated list of {', '.join(START_SOURCES)}, got {text!r}"
        )
    return sources


def start_variants(sources: Sequence[str], queue: str) -> tuple[str, ...]:
    """The recorder's variants for ``--predict-starts`` and ``--start-queue``."""
    ahead = {"ahead": (True,), "ignore": (False,), "both": (False, True)}[queue]
    return variant_names(sources, ahead)


def _pooled(results: Sequence[Any]) -> dict[str, dict[str, dict[str, Coverage]]]:
    """Per policy label and variant, the coverage by class over the results' seeds."""
    grouped: dict[str, dict[str, list[StartRecords]]] = {}
    for result in results:
        for variant, records in result.starts.items():
            grouped.setdefault(result.spec.label, {}).setdefault(variant, []).append(records)
    return {
        policy: {variant: coverage_by_class(records) for variant, records in variants.items()}
        for policy, variants in grouped.items()
    }


def summarise(results: Sequence[Any]) -> dict[str, Any]:
    """``summary.json``'s ``start_coverage``: per policy, variant and class, pooled over
    seeds, and per seed the whole's."""
    pooled = _pooled(results)
    per_seed: dict[str, dict[str, dict[str, Any]]] = {}
    for result in results:
        for variant, records in result.starts.items():
            per_seed.setdefault(result.spec.label, {}).setdefault(variant, {})[str(result.spec.seed)] = (
                coverage([records]).as_dict()
            )
    return {
        "definitions": __doc__,
        "policies": {
            policy: {
                variant: {
                    "pooled": {name: c.as_dict() for name, c in classes.items()},
                    "per_seed": per_seed[policy][variant],
                }
                for variant, classes in variants.items()
            }
            for policy, variants in pooled.items()
        },
    }


def table(results: Sequence[Any]) -> str:
    from scheduler.sim.report import format_table  # noqa: PLC0415

    out = []
    for policy, variants in _pooled(results).items():
        headers, rows = coverage_rows(variants)
        out.append(f"{policy}:\n{format_table(headers, rows)}")
    return "\n".join(out)
