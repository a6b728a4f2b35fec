"""Online learning end to end: the scheduler runs a policy suited to one workload
mix (no CPU reserve: CPU never ran short), the workload shifts to another (many more
fractional-GPU pods), the trainer sidecar fine-tunes on what the scheduler logged,
promotes a policy that does better on the new mix, and the scheduler uses it without a
restart; a deliberately worse candidate is refused by the gate. The versions are custom
resources (PolicyVersions and a PolicyChannel, ``scheduler.online.store_crd``), as the
chart deploys them with the trainer. A full volume for the experience log costs records,
never scheduling."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from kubernetes import client

from devcluster import binaries
from devcluster import nodes as devnodes
from scheduler.objects.node import Node
from scheduler.objects.node_manifest import node_from_manifest
from scheduler.online.experience import read_records
from scheduler.online.store_crd import CrdPolicyStore
from scheduler.online.tuning import fitness
from scheduler.online.twin import Shape, make_episode
from scheduler.policy.checkpoint import Manifest, load_checkpoint, save_checkpoint
from scheduler.policy.model import NodeScorer
from scheduler.sim.catalog import pod_list_path
from scheduler.sim.trace import load_pods
from tests.e2e.policy_crds import fresh_policy_objects, scheduler_env
from tests.e2e.support import (
    create_pods,
    delete_namespace_pods,
    ensure_namespace,
    replace_nodes,
    running_scheduler,
    running_trainer,
    submit_candidate,
    trainer_metric,
    wait_for,
)
from tests.e2e.workloads import pod
from tests.online.test_experience import full_volume
from tests.online.test_trainer import anti_fgd

pytestmark = pytest.mark.cluster
NAMESPACE = "online"
CHANNEL = "rl-online"


def trace_shapes(trace: str, count: int, seed: int) -> list[Shape]:
    pods = load_pods(pod_list_path(trace))
    rng = np.random.default_rng(seed)
    picked = (pods[i] for i in rng.choice(len(pods), count))
    return [Shape(p.cpu_milli, p.memory, p.gpu.count, p.gpu.milli_per_gpu, p.gpu.models) for p in picked]


def pod_of(shape: Shape, name: str, scheduler: str) -> dict[str, Any]:
    share = shape.gpu_count and shape.gpu_milli < 1000
    return pod(
        name,
        NAMESPACE,
        scheduler,
        cpu=f"{shape.cpu_milli}m",
        memory=str(shape.memory),
        gpus=shape.gpu_count if shape.gpu_milli else 0,
        gpu_percent=shape.gpu_milli // 10 if share else None,
    )


@pytest.fixture(scope="module")
def cluster_nodes(dev_cluster: Any) -> list[Node]:
    core = dev_cluster.core_v1()
    specs = devnodes.openb_node_specs(binaries.openb_file("openb_node_list_gpu_node"), 30)
    replace_nodes(core, specs)
    items = core.api_client.sanitize_for_serialization(core.list_node().items)
    return [node_from_manifest(item) for item in items]


WAVES = 3
WAVE_S = 240.0  # three attempts on one window take about 2 minutes


def promoted_within(trainer_port: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if trainer_metric(trainer_port, "rl_scheduler_trainer_promotions_total") >= 1:
            return True
        time.sleep(5)
    return False


def policy_without_cpu_reserve() -> NodeScorer:
    """The starting policy: the shipped one with its CPU reserve switched off, as it
    would be after training on a mix that never runs short of CPU. On the shifted mix
    the reserve is worth about 2 points of GPU allocation in the twin of this cluster,
    so a round of the trainer's fine-tuning finds a clear improvement. (A policy
    fine-tuned on openb cpu300 instead was already within noise of the best on the
    shifted mix: the trainer promoted in 2 of 6 windows, and the test was flaky.)"""
    model = load_checkpoint().model
    assert model.reserve is not None
    with torch.no_grad():
        model.reserve.weight.fill_(0.0)
    return model


def test_the_trainer_promotes_a_better_policy_for_a_shifted_mix_and_refuses_a_worse_one(
    dev_cluster: Any, cluster_nodes: list[Node], tmp_path: Path
) -> None:
    core: client.CoreV1Api = dev_cluster.core_v1()
    shared = tmp_path / "shared"
    objects = fresh_policy_objects(dev_cluster.api_client(), core, NAMESPACE)
    store = CrdPolicyStore(objects, CHANNEL, tmp_path / "test-cache")
    start = policy_without_cpu_reserve()
    store.publish(
        lambda folder: save_checkpoint(
            start, folder, Manifest(training={"stage": "shipped, CPU reserve off"})
        )
    )
    ensure_namespace(core, NAMESPACE)
    env = {
        "RL_SCHEDULER_EXPERIENCE_DIR": str(shared / "experience"),
        "RL_SCHEDULER_POLICY_RELOAD_S": "2",
        **scheduler_env(NAMESPACE, CHANNEL, shared / "policy-cache"),
    }
    name = "rl-online"
    with (
        running_scheduler(
            dev_cluster.kubeconfig,
            name,
            tmp_path,
            "--profile",
            "gnn",
            env=env,
        ) as scheduler,
        running_trainer(
            shared,
            dev_cluster.kubeconfig,
            scheduler,
            tmp_path / "trainer.log",
            "--interval",
            "5",
            "--min-new-arrivals",
            "250",
            "--window",
            "400",
            "--margin",
            "0.1",
            "--generations",
            "6",
            "--pairs",
            "3",
            "--rollback-after",
            "3600",
            "--lifetime-refit-interval",
            "0",  # policies only here: a lifetime refit would publish versions of its own
            "--policy-namespace",
            NAMESPACE,
            "--policy-channel",
            CHANNEL,
        ) as trainer,
    ):
        pid = scheduler.process.pid if scheduler.process else 0
        assert scheduler.metric("rl_scheduler_policy_version") == 1
        try:
            # The workload shifts to many fractional-GPU pods (openb gpushare40), in
            # waves that replace each other: a window the trainer cannot improve on
            # (it tries one three times) is followed by new arrivals, as in a live
            # cluster, instead of by silence.
            for wave in range(WAVES):
                mix_b = trace_shapes("gpushare40", 400, seed=wave)
                create_pods(core, [pod_of(s, f"b{wave}-{i:03d}", name) for i, s in enumerate(mix_b)])
                if promoted_within(trainer, WAVE_S):
                    break
                delete_namespace_pods(core, NAMESPACE)
            log_tail = (tmp_path / "trainer.log").read_text()[-3000:]
            assert trainer_metric(trainer, "rl_scheduler_trainer_promotions_total") >= 1, log_tail
            assert store.current() == "v000002"
            candidate = trainer_metric(trainer, "rl_scheduler_trainer_candidate_score")
            incumbent = trainer_metric(trainer, "rl_scheduler_trainer_incumbent_score")
            assert candidate > incumbent + 0.1
            # the PolicyVersion records the gate's verdict for kubectl get policyversions
            promoted_object = objects.get("policyversions", f"{CHANNEL}-v000002")
            assert promoted_object is not None
            assert promoted_object["spec"]["verdict"] == "promoted"
            assert promoted_object["spec"]["score"] == pytest.approx(candidate, abs=1e-4)
            # the scheduler took it without a restart
            wait_for(
                lambda: scheduler.metric("rl_scheduler_policy_version") == 2, 60, "the scheduler to reload"
            )
            assert scheduler.process is not None
            assert scheduler.process.pid == pid
            assert scheduler.process.poll() is None
            # better on the new mix than the starting policy, on episodes nobody trained on
            fresh = [
                make_episode(cluster_nodes, trace_shapes("gpushare40", 300, seed=99), s) for s in (7, 8, 9)
            ]
            promoted = load_checkpoint(store.current_path()).model
            assert fitness(promoted, fresh) > fitness(start, fresh)

            # a deliberately worse candidate goes through the gate and is refused
            worse = save_checkpoint(anti_fgd(promoted), tmp_path / "worse")
            rejected_before = trainer_metric(trainer, "rl_scheduler_trainer_rejections_total")
            submit_candidate(shared, worse)
            inbox = shared / "candidates"
            # judged (the trainer removes a submitted folder once its verdict is in) ...
            wait_for(
                lambda: (
                    not any(inbox.iterdir())
                    and trainer_metric(trainer, "rl_scheduler_trainer_rejections_total") > rejected_before
                ),
                600,
                "the gate to judge the worse candidate",
                interval_s=5,
            )
            # ... and refused: still the promoted version
            assert store.current() == "v000002"
            decisions = [r for r in read_records(shared / "experience") if r["kind"] == "decision"]
            assert {r["version"] for r in decisions} >= {"v000001"}
        finally:
            delete_namespace_pods(core, NAMESPACE)


def test_a_full_volume_costs_experience_records_not_scheduling(
    dev_cluster: Any, cluster_nodes: list[Node], tmp_path: Path
) -> None:
    core: client.CoreV1Api = dev_cluster.core_v1()
    ensure_namespace(core, NAMESPACE)
    with full_volume(tmp_path) as volume:
        env = {"RL_SCHEDULER_EXPERIENCE_DIR": str(volume)}
        with running_scheduler(
            dev_cluster.kubeconfig, "rl-full", tmp_path, "--profile", "fgd", env=env
        ) as scheduler:
            try:
                create_pods(core, [pod(f"p-{i}", NAMESPACE, "rl-full") for i in range(40)])
                wait_for(
                    lambda: (
                        sum(1 for p in core.list_namespaced_pod(NAMESPACE).items if p.spec.node_name) == 40
                    ),
                    120,
                    "40 pods to bind",
                )
                wait_for(
                    lambda: (
                        scheduler.metric("rl_scheduler_experience_dropped_total", {"reason": "disk_full"}) > 0
                    ),
                    30,
                    "the dropped-record metric",
                )
                assert scheduler.process is not None
                assert scheduler.process.poll() is None
            finally:
                delete_namespace_pods(core, NAMESPACE)
        assert "Traceback" not in scheduler.log()
