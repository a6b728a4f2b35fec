"""What the dashboard shows: one entry per panel, with its PromQL.

Every query filters on ``job=~"$job"`` (the scrape job of the scheduler's Service).
Gauges that every replica exports the same (cluster allocation) take the ``max`` over
replicas; gauges that only mean something on the replica that schedules (the queue)
keep the leader's series (``and on (instance) (rl_scheduler_leader == 1)``).

A panel with ``needs="trainer"`` reads metrics that only the trainer sidecar exports
(``trainer.enabled`` in the chart): until it runs they are empty, and the Prometheus
end-to-end test reports them as expected-empty instead of failing on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

JOB = 'job=~"$job"'
LEADER = f"and on (instance) (rl_scheduler_leader{{{JOB}}} == 1)"


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str


@dataclass(frozen=True)
class PanelSpec:
    title: str
    description: str
    queries: tuple[Query, ...]
    unit: str = "short"
    kind: Literal["timeseries", "stat"] = "timeseries"
    stacked: bool = False
    width: int = 12
    #: "trainer": empty until the trainer sidecar runs
    needs: Literal["trainer"] | None = None


@dataclass(frozen=True)
class RowSpec:
    title: str
    panels: tuple[PanelSpec, ...]


def quantiles(metric: str, by: str, name: str, selector: str = JOB) -> tuple[Query, ...]:
    """p50 and p99 of a histogram over the panel's rate window."""
    legend_prefix = f"{{{{{by}}}}} " if by else ""
    group = f"le, {by}" if by else "le"
    rate = f"rate({metric}_bucket{{{selector}}}[$__rate_interval])"
    return tuple(
        Query(
            f"histogram_quantile({q}, sum by ({group}) ({rate}))",
            f"{legend_prefix}{name} p{round(q * 100)}",
        )
        for q in (0.5, 0.99)
    )


OVERVIEW = RowSpec(
    "Overview",
    (
        PanelSpec(
            "Replicas up",
            "Scheduler replicas Prometheus can scrape.",
            (Query(f"sum(up{{{JOB}}})", "up"),),
            kind="stat",
            width=6,
        ),
        PanelSpec(
            "Leaders",
            "Replicas holding the scheduler's Lease: exactly 1 while pods are being scheduled.",
            (Query(f"sum(rl_scheduler_leader{{{JOB}}})", "leaders"),),
            kind="stat",
            width=6,
        ),
        PanelSpec(
            "Policy version",
            "Version of the learned policy in use; 0 while the heuristic fallback schedules.",
            (Query(f"max(rl_scheduler_policy_version{{{JOB}}})", "version"),),
            kind="stat",
            width=6,
        ),
        PanelSpec(
            "Fallback share",
            "Share of placements decided by the heuristic fallback instead of the learned policy.",
            (
                Query(
                    f'(sum(rate(rl_scheduler_decisions_total{{{JOB}, source="fallback"}}[$__rate_interval]))'
                    " or vector(0))"
                    f" / sum(rate(rl_scheduler_decisions_total{{{JOB}}}[$__rate_interval]))",
                    "fallback",
                ),
            ),
            unit="percentunit",
            kind="stat",
            width=6,
        ),
    ),
)

SCHEDULING = RowSpec(
    "Scheduling",
    (
        PanelSpec(
            "Scheduling throughput",
            "Pods bound per second.",
            (
                Query(
                    "sum(rate(scheduler_schedule_attempts_total"
                    f'{{{JOB}, result="scheduled"}}[$__rate_interval]))',
                    "scheduled",
                ),
            ),
            unit="suffix: pods/s",
        ),
        PanelSpec(
            "Attempts by result",
            "Scheduling attempts per second: scheduled, unschedulable (no node fits) and error.",
            (
                Query(
                    f"sum by (result) (rate(scheduler_schedule_attempts_total{{{JOB}}}[$__rate_interval]))",
                    "{{result}}",
                ),
            ),
            unit="suffix: /s",
            stacked=True,
        ),
        PanelSpec(
            "Scheduling latency",
            "One attempt (filter, score, bind) and the algorithm alone (filter and score).",
            (
                *quantiles(
                    "scheduler_scheduling_attempt_duration_seconds",
                    "",
                    "attempt",
                    f'{JOB}, result="scheduled"',
                ),
                *quantiles("scheduler_scheduling_algorithm_duration_seconds", "", "algorithm"),
            ),
            unit="s",
        ),
        PanelSpec(
            "Pod scheduling latency (queue to bound)",
            "From a pod entering the queue to its bind, over all its attempts (the scheduling SLI).",
            quantiles("scheduler_pod_scheduling_sli_duration_seconds", "", "sli"),
            unit="s",
        ),
        PanelSpec(
            "Pending pods by queue",
            "Pods waiting in the leader's queues: active, backoff, unschedulable and gated.",
            (Query(f"sum by (queue) (scheduler_pending_pods{{{JOB}}} {LEADER})", "{{queue}}"),),
            stacked=True,
        ),
        PanelSpec(
            "Unschedulable pods by plugin",
            "Pods the leader could not place, by the filter that rejected them.",
            (Query(f"sum by (plugin) (scheduler_unschedulable_pods{{{JOB}}} {LEADER})", "{{plugin}}"),),
        ),
    ),
)

POLICY = RowSpec(
    "Policy",
    (
        PanelSpec(
            "Policy in use",
            "The active score profile, its checkpoint version and whether it is the policy or the fallback.",
            (
                Query(
                    f"max by (profile, version, source) (rl_scheduler_policy_info{{{JOB}}} == 1)",
                    "{{profile}} {{version}} ({{source}})",
                ),
            ),
            kind="stat",
            width=8,
        ),
        PanelSpec(
            "Inference latency",
            "Time the score profile takes to score the feasible nodes of one pod.",
            quantiles("rl_scheduler_policy_inference_duration_seconds", "profile", "score"),
            unit="s",
            width=16,
        ),
        PanelSpec(
            "Decisions by source",
            "Placements per second decided by the learned policy and by the heuristic fallback.",
            (
                Query(
                    f"sum by (source) (rate(rl_scheduler_decisions_total{{{JOB}}}[$__rate_interval]))",
                    "{{source}}",
                ),
            ),
            unit="suffix: /s",
            stacked=True,
        ),
        PanelSpec(
            "Policy load failures",
            "Checkpoints that could not be loaded since the replicas started, by reason.",
            (
                Query(
                    f"sum by (reason) (rl_scheduler_policy_load_failures_total{{{JOB}}})",
                    "{{reason}}",
                ),
            ),
        ),
    ),
)

CLUSTER = RowSpec(
    "Cluster",
    (
        PanelSpec(
            "Allocation by resource",
            "Requested over allocatable, summed over the nodes the scheduler sees (cpu, memory, gpu).",
            (
                Query(
                    f"max by (resource) (rl_scheduler_cluster_allocation_ratio{{{JOB}}})",
                    "{{resource}}",
                ),
            ),
            unit="percentunit",
        ),
        PanelSpec(
            "GPU fragmentation",
            "Share of idle GPU capacity that typical pods cannot use (the FGD paper's measure).",
            (Query(f"max(rl_scheduler_cluster_gpu_fragmentation_ratio{{{JOB}}})", "fragmentation"),),
            unit="percentunit",
        ),
    ),
)

TRAINER = RowSpec(
    "Trainer",
    (
        PanelSpec(
            "Experience log",
            "Decision records the scheduler writes for the trainer (settings.experience_dir), and "
            "those it dropped rather than slow scheduling down.",
            (
                Query(
                    f"sum(rate(rl_scheduler_experience_records_total{{{JOB}}}[$__rate_interval]))",
                    "written",
                ),
                # Dropped records carry a reason label and appear only once one is dropped.
                Query(
                    f"sum(rate(rl_scheduler_experience_dropped_total{{{JOB}}}[$__rate_interval]))"
                    " or vector(0)",
                    "dropped",
                ),
            ),
            unit="suffix: /s",
        ),
        PanelSpec(
            "Policy promotions and rejections",
            "Candidate policies the trainer promoted, and those it rejected by reason "
            "(empty until the trainer sidecar runs: trainer.enabled).",
            (
                Query(
                    f"sum(increase(rl_scheduler_trainer_promotions_total{{{JOB}}}[$__rate_interval]))",
                    "promoted",
                ),
                Query(
                    "sum by (reason) (increase("
                    f"rl_scheduler_trainer_rejections_total{{{JOB}}}[$__rate_interval]))",
                    "rejected: {{reason}}",
                ),
            ),
            needs="trainer",
        ),
    ),
)

ROWS = (OVERVIEW, SCHEDULING, POLICY, CLUSTER, TRAINER)
