"""scheduler_perf on the local control plane at kube's smallest sizes (its 5Nodes
workloads): every measured pod bound by kube-scheduler and by rl-scheduler, and no hard
constraint broken, for a required anti-affinity, a required affinity and a preferred
anti-affinity case."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from devcluster.testing import DevCluster

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import scheduler_perf

pytestmark = [pytest.mark.cluster, pytest.mark.binaries]

CASES = "SchedulingPodAntiAffinity,SchedulingPodAffinity,SchedulingPreferredPodAntiAffinity"


def test_scheduler_perf_smallest_workloads(dev_cluster: DevCluster, tmp_path: Path) -> None:
    args = scheduler_perf.parse_args(
        ["--nodes", "5", "--cases", CASES, "--schedulers", "kube-scheduler,fgd-reserve", "--rounds", "1"]
    )
    args.run_timeout = 120
    plans, _ = scheduler_perf.plans(args)
    assert sorted(p.case for p in plans) == sorted(CASES.split(","))
    core = dev_cluster.core_v1()
    results = []
    for plan in plans:
        results += scheduler_perf.run_case(core, dev_cluster.kubeconfig, plan, args, tmp_path)
    assert len(results) == 2 * len(plans)
    for result in results:
        where = f"{result.case} {result.scheduler}"
        assert not result.error, where
        assert result.bound == result.measured, (where, result.pending)
        assert not result.broken, (where, result.broken)
