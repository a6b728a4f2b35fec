"""Prometheus metrics: kube-scheduler's names, types, labels and buckets (so its
dashboards work with ``profile="rl-scheduler"``), and ``rl_scheduler_*`` for what is
ours. Each Metrics object has its own registry, so tests can run several."""

# ruff: noqa: E501 - help strings are kube-scheduler's, word for word
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics

# kube-scheduler exposes no *_created series; neither do we.
disable_created_metrics()  # type: ignore[no-untyped-call]


def exponential_buckets(start: float, factor: float, count: int) -> list[float]:
    """client_golang's ExponentialBuckets."""
    return [start * factor**i for i in range(count)]


def attempts_label(attempts: int) -> str:
    """kube-scheduler caps the SLI's ``attempts`` label at ``15+``."""
    return str(attempts) if attempts < 15 else "15+"


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.schedule_attempts = Counter(
            "scheduler_schedule_attempts_total",
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be "
            "scheduled, while 'error' means an internal scheduler problem.",
            ["result", "profile"],
            registry=r,
        )
        self.attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ["result", "profile"],
            buckets=exponential_buckets(0.001, 2, 15),
            registry=r,
        )
        self.algorithm_duration = Histogram(
            "scheduler_scheduling_algorithm_duration_seconds",
            "Scheduling algorithm latency in seconds",
            buckets=exponential_buckets(0.001, 2, 15),
            registry=r,
        )
        self.pending_pods = Gauge(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; 'backoff' "
            "means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulablePods that "
            "the scheduler attempted to schedule and failed; 'gated' is the number of unschedulable pods that "
            "the scheduler never attempted to schedule because they are gated.",
            ["queue"],
            registry=r,
        )
        self.sli_duration = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue and might "
            "involve multiple scheduling attempts.",
            ["attempts"],
            buckets=exponential_buckets(0.01, 2, 20),
            registry=r,
        )
        self.preemption_attempts = Counter(
            "scheduler_preemption_attempts_total",
            "Total preemption attempts in the cluster till now",
            registry=r,
        )
        self.preemption_victims = Histogram(
            "scheduler_preemption_victims",
            "Number of selected preemption victims",
            buckets=exponential_buckets(1, 2, 7),
            registry=r,
        )
        self.pod_attempts = Histogram(
            "scheduler_pod_scheduling_attempts",
            "Number of attempts to successfully schedule a pod.",
            buckets=exponential_buckets(1, 2, 5),
            registry=r,
        )
        self.extension_point_duration = Histogram(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"],
            buckets=exponential_buckets(0.0001, 2, 12),
            registry=r,
        )
        self.incoming_pods = Counter(
            "scheduler_queue_incoming_pods_total",
            "Number of pods added to scheduling queues by event and queue type.",
            ["queue", "event"],
            registry=r,
        )
        self.unschedulable_pods = Gauge(
            "scheduler_unschedulable_pods",
            "The number of unschedulable pods broken down by plugin name. A pod will increment the gauge for "
            "all plugins that caused it to not schedule and so this metric have meaning only when broken down "
            "by plugin.",
            ["plugin", "profile"],
            registry=r,
        )
        # ---- ours ----
        self.policy_info = Gauge(
            "rl_scheduler_policy_info",
            "The score policy in use (1 for the active one): its profile, checkpoint version and source.",
            ["profile", "version", "source"],
            registry=r,
        )
        self.policy_version = Gauge(
            "rl_scheduler_policy_version",
            "Version N of the published policy vN in use; 0 for the shipped checkpoint or a heuristic.",
            registry=r,
        )
        self.policy_inference = Histogram(
            "rl_scheduler_policy_inference_duration_seconds",
            "Time the score policy takes to score the feasible nodes for one pod.",
            ["profile"],
            buckets=exponential_buckets(0.0001, 2, 14),
            registry=r,
        )
        self.decisions = Counter(
            "rl_scheduler_decisions_total",
            "Placement decisions by who made them: the learned policy or the heuristic fallback.",
            ["source"],
            registry=r,
        )
        self.policy_load_failures = Counter(
            "rl_scheduler_policy_load_failures_total",
            "Policy checkpoints that could not be loaded (the heuristic fallback schedules meanwhile).",
            ["reason"],
            registry=r,
        )
        self.cluster_allocation = Gauge(
            "rl_scheduler_cluster_allocation_ratio",
            "Requested over allocatable, summed over nodes, per resource (cpu, memory, gpu).",
            ["resource"],
            registry=r,
        )
        self.gpu_fragmentation = Gauge(
            "rl_scheduler_cluster_gpu_fragmentation_ratio",
            "Share of idle GPU capacity that the typical pods cannot use (FGD's fragmentation rate).",
            registry=r,
        )
        self.bind_failures = Counter(
            "rl_scheduler_bind_failures_total",
            "Binds that did not happen, by outcome (pod-gone, conflict, error; volume-binding: "
            "PreBind failed; node-locked: "
            "another pod held the HAMi node lock too long).",
            ["outcome"],
            registry=r,
        )
        self.invalid_pods = Counter(
            "rl_scheduler_invalid_pods_total",
            "Pods that opted in but whose spec cannot be scheduled as written (reported and skipped).",
            registry=r,
        )
        self.unreadable_objects = Counter(
            "rl_scheduler_unreadable_objects_total",
            "Objects from a listing or a watch that could not be read or accounted for, by kind: "
            "each is logged by name and skipped (a pod of ours is reported on the pod); the rest are applied.",
            ["kind"],
            registry=r,
        )
        self.node_rejections = Counter(
            "rl_scheduler_node_rejections_total",
            "Pods this scheduler placed that the node's kubelet refused at admission, by its reason "
            "(OutOfcpu, OutOfmemory, OutOf<extended resource>): another scheduler or a pod created with "
            "nodeName took the room first.",
            ["reason"],
            registry=r,
        )
        self.experience_records = Counter(
            "rl_scheduler_experience_records_total",
            "Decision and departure records written to the experience log (fsynced).",
            registry=r,
        )
        self.experience_dropped = Counter(
            "rl_scheduler_experience_dropped_total",
            "Experience records dropped instead of slowing scheduling: queue_full, disk_full, write_error.",
            ["reason"],
            registry=r,
        )
        self.lifetime_model_info = Gauge(
            "rl_scheduler_lifetime_model_info",
            "The lifetime model in use (1): source store (the policy store's current version's lifetimes/), "
            "shipped (the package's), or none (no model loaded), and its version.",
            ["source", "version"],
            registry=r,
        )
        self.lifetime_model_load_failures = Counter(
            "rl_scheduler_lifetime_model_load_failures_total",
            "Lifetime model files refused (missing, incompatible, corrupt, error); the shipped model, or "
            "none, is used meanwhile.",
            ["reason"],
            registry=r,
        )
        self.pending_start = Gauge(
            "rl_scheduler_pending_pod_predicted_start_seconds",
            "Seconds until a pending pod is likely to start (quantile 0.5 and 0.9), as forecast at its last "
            "failed attempt from the pods that must leave first; +Inf: no node would fit it.",
            ["namespace", "pod", "quantile"],
            registry=r,
        )
        self.start_forecast_duration = Histogram(
            "rl_scheduler_start_forecast_duration_seconds",
            "Time one pending pod's start forecast takes.",
            buckets=exponential_buckets(0.0005, 2, 14),
            registry=r,
        )
        self.is_leader = Gauge(
            "rl_scheduler_leader",
            "1 while this replica holds the scheduler's Lease and binds pods.",
            registry=r,
        )
