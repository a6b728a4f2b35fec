"""The trainer's own metrics (its /metrics port): rounds, the gates' numbers,
promotions, rejections and rollbacks, for the policy and for the lifetime model."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge


class TrainerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.updates = Counter("rl_scheduler_trainer_updates_total", "Fine-tuning rounds run.", registry=r)
        self.candidate_score = Gauge(
            "rl_scheduler_trainer_candidate_score",
            "The last candidate's fitness on the held-out replay.",
            registry=r,
        )
        self.incumbent_score = Gauge(
            "rl_scheduler_trainer_incumbent_score", "The incumbent's fitness on the same replay.", registry=r
        )
        self.fallback_score = Gauge(
            "rl_scheduler_trainer_fallback_score",
            "The heuristic fallback's fitness on the same replay.",
            registry=r,
        )
        self.promotions = Counter(
            "rl_scheduler_trainer_promotions_total", "Candidates published.", registry=r
        )
        self.rejections = Counter(
            "rl_scheduler_trainer_rejections_total",
            "Candidates the gate refused, by reason.",
            ["reason"],
            registry=r,
        )
        self.rollbacks = Counter(
            "rl_scheduler_trainer_rollbacks_total",
            "Promotions undone because live metrics worsened.",
            registry=r,
        )
        self.experience_lag = Gauge(
            "rl_scheduler_trainer_experience_lag_seconds",
            "Age of the newest experience record the trainer has read.",
            registry=r,
        )
        self.records = Counter(
            "rl_scheduler_trainer_records_read_total", "Experience records read.", registry=r
        )
        self.policy_version = Gauge(
            "rl_scheduler_trainer_policy_version", "Version N of the current published policy vN.", registry=r
        )
        self.lifetime_refits = Counter(
            "rl_scheduler_trainer_lifetime_refits_total", "Lifetime models fitted and gated.", registry=r
        )
        self.lifetime_promotions = Counter(
            "rl_scheduler_trainer_lifetime_promotions_total", "Lifetime models published.", registry=r
        )
        self.lifetime_rejections = Counter(
            "rl_scheduler_trainer_lifetime_rejections_total",
            "Lifetime models the gate refused, by reason.",
            ["reason"],
            registry=r,
        )
        self.lifetime_log_likelihood = Gauge(
            "rl_scheduler_trainer_lifetime_log_likelihood",
            "Log-likelihood per held-out pod of its lifetime at arrival (nats), of the last gate.",
            ["model"],
            registry=r,
        )
        self.lifetime_p90_coverage = Gauge(
            "rl_scheduler_trainer_lifetime_p90_coverage",
            "Share of held-out pods that ended within their predicted p90 (0.9 when calibrated).",
            ["model"],
            registry=r,
        )
        self.lifetime_pods = Gauge(
            "rl_scheduler_trainer_lifetime_pods",
            "Pods whose lifetimes the trainer holds, ended or still running (censored).",
            ["state"],
            registry=r,
        )
        self.lifetime_skipped = Counter(
            "rl_scheduler_trainer_lifetime_skipped_records_total",
            "Experience records a lifetime could not be read from, by reason.",
            ["reason"],
            registry=r,
        )
