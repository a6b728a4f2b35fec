"""A KubeSchedulerConfiguration file read as settings: what maps onto ours, and the
refusal (with its path) of every field rl-scheduler does not implement."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.k8s.process.kube_config import parse_duration
from scheduler.k8s.process.settings import SettingsError, load_settings

HEADER = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def load(tmp_path: Path, document: dict[str, Any]) -> Any:
    path = tmp_path / "kube-scheduler.yaml"
    path.write_text(yaml.safe_dump(document))
    return load_settings(path)


@pytest.mark.parametrize(
    ("text", "seconds"), [("15s", 15.0), ("1m30s", 90.0), ("500ms", 0.5), ("1h", 3600.0), ("2.5s", 2.5)]
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text, "f", "x") == pytest.approx(seconds)


def test_the_implemented_fields_become_settings(tmp_path: Path) -> None:
    settings = load(
        tmp_path,
        {
            **HEADER,
            "clientConnection": {"kubeconfig": "/etc/k/scheduler.conf", "qps": 80, "burst": 160},
            "leaderElection": {
                "leaderElect": True,
                "leaseDuration": "30s",
                "renewDeadline": "20s",
                "retryPeriod": "4s",
                "resourceLock": "leases",
                "resourceName": "gpu-scheduler",
                "resourceNamespace": "scheduling",
            },
            "percentageOfNodesToScore": 100,
            "profiles": [{"schedulerName": "gpu-a", "plugins": {"score": {"enabled": [{"name": "FGD"}]}}}],
        },
    )
    assert (settings.client.kubeconfig, settings.client.qps, settings.client.burst) == (
        Path("/etc/k/scheduler.conf"),
        80,
        160,
    )
    election = settings.leader_election
    assert (election.lease_duration_s, election.renew_deadline_s, election.retry_period_s) == (30, 20, 4)
    assert (settings.lease_name, election.namespace) == ("gpu-scheduler", "scheduling")
    assert settings.scheduler_name == "gpu-a"
    assert [(p.scheduler_name, p.policy) for p in settings.scheduler_profiles()] == [("gpu-a", "FGD")]


def test_without_profiles_it_is_kubes_default_profile(tmp_path: Path) -> None:
    profiles = load(tmp_path, dict(HEADER)).scheduler_profiles()
    assert [(p.scheduler_name, p.policy) for p in profiles] == [("default-scheduler", None)]


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        ({"apiVersion": "kubescheduler.config.k8s.io/v1beta3"}, "apiVersion", "expected"),
        ({"parallelism": 16}, "parallelism", "not supported by rl-scheduler"),
        ({"extenders": []}, "extenders", "not supported by rl-scheduler"),
        ({"percentageOfNodesToScore": 0}, "percentageOfNodesToScore", "only 100"),
        ({"profile": "fgd"}, "profile", "unknown field"),
        (
            {"clientConnection": {"contentType": "application/json"}},
            "clientConnection.contentType",
            "not supported",
        ),
        ({"leaderElection": {"resourceLock": "endpoints"}}, "leaderElection.resourceLock", "takes a Lease"),
        ({"leaderElection": {"leaseDuration": "15"}}, "leaderElection.leaseDuration", "expected a duration"),
        (
            {
                "profiles": [
                    {"schedulerName": "a", "plugins": {"bind": {"enabled": [{"name": "DefaultBinder"}]}}}
                ]
            },
            "profiles[0].plugins.bind",
            "not supported by rl-scheduler",
        ),
    ],
)
def test_what_is_not_implemented_is_refused_with_its_path(
    tmp_path: Path, change: dict[str, Any], field: str, problem: str
) -> None:
    with pytest.raises(SettingsError) as caught:
        load(tmp_path, {**HEADER, **change})
    assert caught.value.field == field
    assert problem in caught.value.problem
