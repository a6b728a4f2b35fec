"""The trainer learns the cluster's own lifetimes, end to end on the local control plane.

Pods whose lifetimes follow a mix unlike openb's stream in: small pods (0.1 CPU) are
deleted 2 s after they are created, large ones (4 CPUs) after 20 s (30 s and 5 minutes
scaled to test time; openb's median pod runs for minutes to hours). The scheduler logs
their binds and departures; the trainer refits the lifetime model, gates it on the
newest pods it did not fit on, and publishes it as a version with ``lifetimes/``; the
scheduler takes that version without a restart. Then, on pods started after the
publication (nobody fitted on them), the published model predicts lifetimes far
better than the shipped one.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from kubernetes import client

from scheduler.lifetimes.calibration import Forecaster, score
from scheduler.lifetimes.model_file import load_lifetime_model, read_lifetime_manifest
from scheduler.online.experience import read_records
from scheduler.online.lifetime_refit import LIFETIMES_DIR
from scheduler.online.observed_lifetimes import ObservedLifetimes
from scheduler.online.store import PolicyStore
from tests.e2e.support import (
    delete_namespace_pods,
    ensure_namespace,
    replace_nodes,
    running_scheduler,
    running_trainer,
    trainer_metric,
    wait_for,
)
from tests.e2e.workloads import mixed_nodes, pod

pytestmark = pytest.mark.cluster
NAMESPACE = "lifetimes"
SMALL_S, LARGE_S = 2.0, 20.0
EVERY_S = 0.4  # one pod created every 0.4 s
STREAM_LIMIT_S = 90.0  # the refit comes at about 40 s
FRESH_S = 20.0  # pods streamed after the publication, to judge the published model on


class Stream:
    """Creates a pod every ``EVERY_S`` (small and large alternately) and deletes each at
    its creation plus its lifetime."""

    def __init__(self, core: Any, scheduler: str) -> None:  # client.CoreV1Api (its stubs want V1Pod)
        self.core = core
        self.scheduler = scheduler
        self.created = 0
        self.next_at = time.monotonic()
        self.due: list[tuple[float, str]] = []

    def step(self) -> None:
        now = time.monotonic()
        if now >= self.next_at:
            large = self.created % 2 == 1
            name = f"{'large' if large else 'small'}-{self.created:04d}"
            manifest = pod(name, NAMESPACE, self.scheduler, cpu="4" if large else "100m")
            self.core.create_namespaced_pod(NAMESPACE, manifest)
            self.due.append((now + (LARGE_S if large else SMALL_S), name))
            self.created += 1
            self.next_at += EVERY_S
        for when, name in sorted(self.due):
            if when > now:
                break
            self.core.delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=0)
            self.due.remove((when, name))
        time.sleep(0.05)

    def run_for(self, seconds: float, until: Any = lambda: False) -> bool:
        """Stream for ``seconds`` or until ``until()``; whether ``until()`` came."""
        deadline = time.monotonic() + seconds
        checked = 0.0
        while time.monotonic() < deadline:
            self.step()
            if time.monotonic() - checked > 1.0:
                checked = time.monotonic()
                if until():
                    return True
        return False


def test_the_trainer_refits_lifetimes_from_the_cluster_and_the_scheduler_loads_them(
    dev_cluster: Any, tmp_path: Path
) -> None:
    core: client.CoreV1Api = dev_cluster.core_v1()
    replace_nodes(core, mixed_nodes(10))
    ensure_namespace(core, NAMESPACE)
    shared = tmp_path / "shared"
    store = PolicyStore(shared / "policies")
    env = {
        "RL_SCHEDULER_EXPERIENCE_DIR": str(shared / "experience"),
        "RL_SCHEDULER_POLICY_STORE": str(store.root),
        "RL_SCHEDULER_POLICY_RELOAD_S": "1",
    }
    name = "rl-lifetimes"
    with (
        running_scheduler(dev_cluster.kubeconfig, name, tmp_path, "--profile", "gnn", env=env) as scheduler,
        running_trainer(
            shared,
            dev_cluster.kubeconfig,
            scheduler,
            tmp_path / "trainer.log",
            "--interval",
            "2",
            "--min-new-arrivals",
            "1000000",  # no policy fine-tuning here: lifetimes only
            "--lifetime-refit-interval",
            "1",
            "--lifetime-min-ended",
            "60",
            "--rollback-after",
            "3600",
        ) as trainer,
    ):
        pid = scheduler.process.pid if scheduler.process else 0
        try:
            stream = Stream(core, name)
            promoted = stream.run_for(
                STREAM_LIMIT_S,
                lambda: trainer_metric(trainer, "rl_scheduler_trainer_lifetime_promotions_total") >= 1,
            )
            published_at = time.time()
            log_tail = (tmp_path / "trainer.log").read_text()[-3000:]
            assert promoted, log_tail
            version = store.current()
            assert version == "v000001"
            folder = store.root / version / LIFETIMES_DIR
            gate: Any = read_lifetime_manifest(folder)["evaluation"]["gate"]
            print(f"gate: {gate}")
            # The gate's numbers: the refit against the shipped model on the newest pods
            # it did not fit on. 1 nat a pod on 20 or more pods is a likelihood ratio
            # above e^20: not a draw.
            assert gate["holdout_pods"] >= 20
            assert gate["candidate_log_likelihood"] > gate["incumbent_log_likelihood"] + 1.0, gate

            # Pods started after the publication: judged on them, nobody fitted on them.
            stream.run_for(FRESH_S)
            records = list(read_records(shared / "experience"))
            # what the scheduler logs for lifetimes: the pods on nodes at its first listing,
            # and each bind with the pod's QoS class (none here)
            assert [r["pods"] for r in records if r["kind"] == "residents"] == [[]]
            assert {r.get("qos") for r in records if r["kind"] == "decision"} == {""}
            seen = ObservedLifetimes()
            seen.observe(records)
            everything = seen.lifetimes(time.time())
            fresh = everything.subset(everything.creation_s > published_at, "fresh")
            published, shipped = (
                score(Forecaster(label, model), fresh, 0.0)
                for label, model in (
                    ("published", load_lifetime_model(folder)),
                    ("shipped", load_lifetime_model()),
                )
            )
            assert published is not None
            assert shipped is not None
            ended = int(np.count_nonzero(fresh.ended))
            print(
                f"{len(fresh)} fresh pods ({ended} ended): log-likelihood per pod published "
                f"{published.log_likelihood:.3f}, shipped {shipped.log_likelihood:.3f}; p90 coverage "
                f"published {published.coverage[0.9]:.3f}, shipped {shipped.coverage[0.9]:.3f}"
            )
            assert len(fresh) >= 30
            assert published.log_likelihood > shipped.log_likelihood + 1.0
            assert abs(published.coverage[0.9] - 0.9) <= abs(shipped.coverage[0.9] - 0.9) + 0.1

            # The scheduler took the version without a restart: its policy, and its lifetimes.
            wait_for(lambda: scheduler.metric("rl_scheduler_policy_version") == 1, 30, "the policy reload")
            assert scheduler.process is not None
            assert scheduler.process.pid == pid
            assert scheduler.process.poll() is None
            wait_for(
                lambda: (
                    scheduler.metric(
                        "rl_scheduler_lifetime_model_info", {"source": "store", "version": "v000001"}
                    )
                    == 1
                ),
                30,
                "the scheduler to load the refitted lifetime model",
            )
        finally:
            delete_namespace_pods(core, NAMESPACE)
    assert "Traceback" not in scheduler.log()
