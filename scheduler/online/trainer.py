"""``rl-scheduler trainer``: the sidecar that keeps improving the policy.

Each round it reads what the scheduler logged since the last round, builds a digital
twin (the live cluster's nodes filled with the recently observed pod mix), fine-tunes
the current policy on the older part of the window, and puts the candidate through
the promotion gate on the newest part, which it did not train on. A candidate that
wins is published to the policy store, which the scheduler reloads without a
restart. Candidates dropped into ``<shared>/candidates/`` (``rl-scheduler policy
submit``) go through the same gate.

Each round it also refits the lifetime model on the pods it saw start and end, once
enough new pods have ended, gates the refit on the newest pods it did not fit on
(``lifetime_refit``) and publishes a winner as a version that keeps the incumbent
policy and adds ``lifetimes/``. A published policy keeps the current ``lifetimes/``.

After a promotion (of either) it watches the scheduler's own metrics; if the
failed-scheduling rate or the fragmentation turns worse than under the incumbent, it
rolls back.
"""

from __future__ import annotations

import collections
import logging
import shutil
import ssl
import time
import urllib.parse
import urllib.request
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from scheduler.errors import SchedulerInputError
from scheduler.objects.node import Node
from scheduler.online.experience import read_records
from scheduler.online.gate import Verdict, judge
from scheduler.online.lifetime_refit import (
    LifetimeVerdict,
    RefitConfig,
    carry_lifetimes,
    incumbent_lifetimes,
    judge_lifetimes,
    publish_lifetimes,
)
from scheduler.online.observed_lifetimes import DEFAULT_MAX_PODS, ObservedLifetimes
from scheduler.online.store import PolicyStore
from scheduler.online.trainer_metrics import TrainerMetrics
from scheduler.online.tuning import TuningArgs, fine_tune
from scheduler.online.twin import Shape, make_episode, shapes_from_records
from scheduler.policy.checkpoint import Manifest, load_checkpoint, save_checkpoint
from scheduler.policy.model import NodeScorer
from scheduler.policy.weights import load_weights

log = logging.getLogger("rl-scheduler.trainer")


@dataclass
class TrainerConfig:
    shared_dir: Path = Path("/var/lib/rl-scheduler")
    interval_s: float = 300.0
    min_new_arrivals: int = 200
    attempts_per_window: int = 3
    window: int = 3000
    holdout_fraction: float = 0.3
    train_episodes: int = 3
    holdout_episodes: int = 4
    margin: float = 0.2
    fallback_profile: str = "fgd"
    tuning: TuningArgs = field(default_factory=TuningArgs)
    # The scheduler's HTTPS port in the same pod: its self-signed certificate is not
    # verified on the loopback; the pod's service account token is sent (read at each
    # scrape: it rotates), and the scheduler lets it get /metrics (the chart's RBAC).
    scheduler_metrics_url: str = "https://127.0.0.1:10259/metrics"
    scheduler_metrics_token_file: Path | None = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
    rollback_after_s: float = 300.0
    rollback_failure_rate_margin: float = 0.05
    rollback_fragmentation_margin: float = 0.05
    # Lifetime refits: at most one per interval (0: never), once this many more of the
    # observed pods have ended since the last one.
    lifetime_refit_interval_s: float = 600.0
    lifetime_min_new_ended: int = 200
    lifetime_max_pods: int = DEFAULT_MAX_PODS
    lifetime_refit: RefitConfig = field(default_factory=RefitConfig)

    @property
    def experience_dir(self) -> Path:
        return self.shared_dir / "experience"

    @property
    def policies_dir(self) -> Path:
        return self.shared_dir / "policies"

    @property
    def candidates_dir(self) -> Path:
        return self.shared_dir / "candidates"


@dataclass(frozen=True)
class LiveCounters:
    """The scheduler's attempt counters and GPU fragmentation at one moment."""

    attempts: float
    failed: float
    fragmentation: float

    def failure_share_since(self, earlier: LiveCounters) -> float:
        attempts = self.attempts - earlier.attempts
        return (self.failed - earlier.failed) / attempts if attempts > 0 else 0.0


@dataclass
class Watch:
    """What the live metrics looked like under the incumbent, to compare after a promotion."""

    version: str
    since: float
    at_promotion: LiveCounters
    failure_share_before: float


class Trainer:
    def __init__(
        self,
        config: TrainerConfig,
        list_nodes: Any,
        metrics: TrainerMetrics | None = None,
        store: PolicyStore | None = None,
    ) -> None:
        self.config = config
        self.list_nodes = list_nodes  # () -> list[Node]
        self.metrics = metrics or TrainerMetrics()
        # The folder store on the shared volume, or policy versions as custom resources
        # (``store_crd.CrdPolicyStore``, a PolicyStore too: ``cli.policy_store``).
        self.store = store if store is not None else PolicyStore(config.policies_dir)
        self.window: deque[Shape] = deque(maxlen=config.window)
        self.last_seq = 0
        self.new_arrivals = 0
        self.attempts_left = 0
        self.watch: Watch | None = None
        self.previous_counters: LiveCounters | None = None
        self.lifetimes = ObservedLifetimes(config.lifetime_max_pods)
        self.skipped_counted: collections.Counter[str] = collections.Counter()
        self.ended_at_last_refit = 0
        self.last_refit = time.monotonic()

    # ---- inputs ---------------------------------------------------------------

    def read_experience(self) -> int:
        count = 0
        newest = 0.0
        for record in read_records(self.config.experience_dir, self.last_seq):
            self.last_seq = max(self.last_seq, int(record["seq"]))
            t = record.get("t")
            if isinstance(t, (int, float)) and not isinstance(t, bool):
                newest = max(newest, float(t))
            count += 1
            self.lifetimes.observe((record,))
            for shape in shapes_from_records([record]):
                self.window.append(shape)
                self.new_arrivals += 1
        if count:
            self.metrics.records.inc(count)
            self.metrics.experience_lag.set(max(0.0, time.time() - newest))
        for reason, skipped in self.lifetimes.skipped.items():
            self.metrics.lifetime_skipped.labels(reason).inc(skipped - self.skipped_counted[reason])
            self.skipped_counted[reason] = skipped
        ended = self.lifetimes.ended
        self.metrics.lifetime_pods.labels("ended").set(ended)
        self.metrics.lifetime_pods.labels("running").set(len(self.lifetimes) - ended)
        return count

    def incumbent(self) -> NodeScorer:
        return load_checkpoint(self.store.current_path()).model

    # ---- a round ----------------------------------------------------------------

    def episodes(self, nodes: list[Node], seed: int) -> tuple[list[Any], list[Any]]:
        shapes = list(self.window)
        cut = int(len(shapes) * (1 - self.config.holdout_fraction))
        train, holdout = shapes[:cut], shapes[cut:]
        train_episodes = [make_episode(nodes, train, seed + i) for i in range(self.config.train_episodes)]
        holdout_episodes = [
            make_episode(nodes, holdout, seed + 1000 + i) for i in range(self.config.holdout_episodes)
        ]
        return train_episodes, holdout_episodes

    def round(self, seed: int) -> Verdict | None:
        """One round: fine-tune and gate if enough is new; returns the verdict."""
        self.read_experience()
        self.check_rollback()
        for submitted in self.submitted():
            self.gate_submitted(submitted, seed)
        self.refit_lifetimes()
        if self.new_arrivals >= self.config.min_new_arrivals:
            self.new_arrivals = 0
            self.attempts_left = self.config.attempts_per_window
        if self.attempts_left <= 0 or len(self.window) < 20:
            return None
        nodes = self.list_nodes()
        if not nodes:
            return None
        # A rejected candidate earns another try on the same data (fresh episodes, new
        # noise), a few times; then the trainer waits for new arrivals.
        self.attempts_left -= 1
        train, holdout = self.episodes(nodes, seed)
        incumbent = self.incumbent()
        result = fine_tune(incumbent, train, self.config.tuning)
        self.metrics.updates.inc()
        verdict = judge(result.model, incumbent, holdout, self.config.fallback_profile, self.config.margin)
        self.record(verdict)
        if verdict.promote:
            self.attempts_left = 0
            self.publish(
                result.model,
                {
                    "stage": "online",
                    "history": result.history,
                    "seconds": result.seconds,
                    "gate": asdict(verdict),  # kubectl get policyversions shows it
                },
            )
        return verdict

    def record(self, verdict: Verdict) -> None:
        self.metrics.candidate_score.set(verdict.candidate)
        self.metrics.incumbent_score.set(verdict.incumbent)
        self.metrics.fallback_score.set(verdict.fallback)
        log.info("gate: %s", verdict.describe())
        if not verdict.promote:
            self.metrics.rejections.labels(verdict.reason.replace(" ", "_")).inc()

    def publish(self, model: NodeScorer, training: dict[str, Any]) -> str:
        replaced = self.store.current_path()

        def write(folder: Path) -> None:
            save_checkpoint(model, folder, Manifest(training=training))
            carry_lifetimes(replaced, folder)

        version = self.published(lambda: self.store.publish(write))
        self.metrics.promotions.inc()
        log.info("published policy %s", version)
        return version

    def published(self, publish: Callable[[], str]) -> str:
        """Publish a version and watch it for a rollback."""
        now = self.live_counters()
        version = publish()
        self.metrics.policy_version.set(int(version[1:]))
        if now is not None and self.previous_counters is not None:
            before = now.failure_share_since(self.previous_counters)
            self.watch = Watch(version, time.monotonic(), now, before)
        return version

    # ---- lifetimes ----------------------------------------------------------------

    def refit_lifetimes(self, now: float | None = None) -> LifetimeVerdict | None:
        """Refit, gate and maybe publish the lifetime model, when it is time and enough
        new pods have ended; returns the verdict."""
        config = self.config
        ended = self.lifetimes.ended
        if (
            config.lifetime_refit_interval_s <= 0
            or time.monotonic() - self.last_refit < config.lifetime_refit_interval_s
            or ended - self.ended_at_last_refit < config.lifetime_min_new_ended
        ):
            return None
        pods = self.lifetimes.lifetimes(time.time() if now is None else now)
        incumbent, source = incumbent_lifetimes(self.store)
        judged = judge_lifetimes(pods, incumbent, config.lifetime_refit)
        if judged is None:
            return None
        self.last_refit = time.monotonic()
        self.ended_at_last_refit = ended
        verdict, candidate = judged
        self.metrics.lifetime_refits.inc()
        for model, ll, p90 in (
            ("candidate", verdict.candidate_log_likelihood, verdict.candidate_p90_coverage),
            ("incumbent", verdict.incumbent_log_likelihood, verdict.incumbent_p90_coverage),
        ):
            self.metrics.lifetime_log_likelihood.labels(model).set(ll)
            self.metrics.lifetime_p90_coverage.labels(model).set(p90)
        log.info("lifetime gate: %s", verdict.describe())
        if not verdict.promote:
            self.metrics.lifetime_rejections.labels(verdict.reason.replace(" ", "_")).inc()
            return verdict
        training = {
            "stage": "online",
            "source": "experience log",
            "pods": verdict.train_pods,
            "ended": verdict.train_ended,
            "censored": verdict.train_pods - verdict.train_ended,
            "cut_s": round(verdict.cut_s, 3),
            "incumbent": source,
            "iterations": verdict.fit_iterations,
            "converged": verdict.fit_converged,
            "seconds": round(verdict.fit_seconds, 3),
        }
        version = self.published(
            lambda: publish_lifetimes(self.store, candidate, training, {"gate": verdict.record()})
        )
        self.metrics.lifetime_promotions.inc()
        log.info("published lifetimes %s", version)
        return verdict

    # ---- submitted candidates ---------------------------------------------------

    def submitted(self) -> list[Path]:
        inbox = self.config.candidates_dir
        if not inbox.is_dir():
            return []
        return sorted(p for p in inbox.iterdir() if p.is_dir() and not p.name.startswith("."))

    def gate_submitted(self, folder: Path, seed: int) -> Verdict | None:
        nodes = self.list_nodes()
        try:
            load_weights(folder)  # as the scheduler loads it: refuses the kinds it cannot serve
            candidate = load_checkpoint(folder).model
        except SchedulerInputError as error:
            log.warning("submitted candidate %s refused: %s", folder.name, error)
            self.metrics.rejections.labels("unloadable").inc()
            shutil.rmtree(folder, ignore_errors=True)
            return None
        if not nodes or len(self.window) < 20:
            return None  # keep it for a round with data
        _, holdout = self.episodes(nodes, seed)
        verdict = judge(
            candidate, self.incumbent(), holdout, self.config.fallback_profile, self.config.margin
        )
        self.record(verdict)
        if verdict.promote:
            self.publish(candidate, {"stage": "submitted", "source": folder.name})
        shutil.rmtree(folder, ignore_errors=True)
        return verdict

    # ---- automatic rollback -----------------------------------------------------

    def live_counters(self) -> LiveCounters | None:
        """The scheduler's attempts, failed attempts and GPU fragmentation, from its /metrics."""
        try:
            request, context = scheduler_request(
                self.config.scheduler_metrics_url, self.config.scheduler_metrics_token_file
            )
            with urllib.request.urlopen(request, timeout=5, context=context) as response:
                text = response.read().decode()
        except OSError:
            return None
        attempts = failed = fragmentation = 0.0
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "scheduler_schedule_attempts_total":
                    attempts += sample.value
                    if sample.labels.get("result") in ("unschedulable", "error"):
                        failed += sample.value
                elif sample.name == "rl_scheduler_cluster_gpu_fragmentation_ratio":
                    fragmentation = sample.value
        return LiveCounters(attempts, failed, fragmentation)

    def check_rollback(self) -> bool:
        """Roll a promotion back when, over ``rollback_after_s`` since, failed
        attempts or fragmentation are worse than before it by the margins."""
        now = self.live_counters()
        watch = self.watch
        try:
            if watch is None or now is None or time.monotonic() - watch.since < self.config.rollback_after_s:
                return False
            self.watch = None
            if self.store.current() != watch.version:
                return False  # rolled back or replaced by hand meanwhile
            failure_share = now.failure_share_since(watch.at_promotion)
            worse = (
                failure_share > watch.failure_share_before + self.config.rollback_failure_rate_margin
                or now.fragmentation
                > watch.at_promotion.fragmentation + self.config.rollback_fragmentation_margin
            )
            if worse:
                previous = self.store.rollback()
                self.metrics.rollbacks.inc()
                self.metrics.policy_version.set(int(previous[1:]))
                log.warning(
                    "rolled back %s to %s: failed share %.3f -> %.3f, fragmentation %.3f -> %.3f",
                    watch.version,
                    previous,
                    watch.failure_share_before,
                    failure_share,
                    watch.at_promotion.fragmentation,
                    now.fragmentation,
                )
            return worse
        finally:
            if now is not None:
                self.previous_counters = now

    def run_forever(self, serve_metrics: Callable[[CollectorRegistry], None]) -> None:
        """Rounds forever; ``serve_metrics`` starts serving the registry (the CLI's:
        HTTPS with delegated authentication, as the scheduler's port)."""
        serve_metrics(self.metrics.registry)
        seed = 0
        while True:
            try:
                self.round(seed)
            except Exception:  # a failed round must not end the sidecar
                log.exception("trainer round failed")
            seed += 1
            time.sleep(self.config.interval_s)


LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})


def scheduler_request(
    url: str, token_file: Path | None
) -> tuple[urllib.request.Request, ssl.SSLContext | None]:
    """A GET of the scheduler's metrics with the token in ``token_file`` (when it
    exists), and the TLS context: unverified on the loopback (the scheduler's
    self-signed certificate, in the same pod), the system's trust elsewhere."""
    request = urllib.request.Request(url)
    if token_file is not None and token_file.is_file():
        request.add_header("Authorization", f"Bearer {token_file.read_text().strip()}")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "https":
        return request, None
    if parts.hostname in LOOPBACK:
        return request, ssl._create_unverified_context()
    return request, ssl.create_default_context()
