"""The chart as a user installs it, on a real kubelet: what only a node decides
(admission, containers running, signals, probes, images)."""

from __future__ import annotations

import re
import subprocess
import threading
import time
from datetime import datetime
from typing import Any

import pytest
from kubernetes import client, watch

from tests.deploy.chart import CHART, set_flags
from tests.realnode.conftest import LEARNED_SCHEDULER, RELEASE, WITH_TRAINER
from tests.realnode.support import (
    RealCluster,
    is_ready,
    lease_holder,
    metric_value,
    pod_metrics,
    scheduler_pods,
    uninstall_chart,
    wait_for,
)

pytestmark = pytest.mark.realnode
SHARED = "/var/lib/rl-scheduler"
SCHEDULER_NAME = "rl-scheduler"  # the chart's default schedulerName


def the_scheduler(core: client.CoreV1Api, namespace: str) -> Any:
    pods = wait_for(
        lambda: [p for p in scheduler_pods(core, namespace, RELEASE) if is_ready(p)], 120, "a Ready scheduler"
    )
    return pods[0]


def test_the_default_profile_and_the_shipped_learned_policy_schedule_from_the_first_decision(
    real_cluster: RealCluster, core: client.CoreV1Api, release: str
) -> None:
    pod = the_scheduler(core, release)
    metrics = pod_metrics(pod, real_cluster.kubeconfig)
    heuristic = {"profile": "fgd-reserve", "source": "policy", "version": "heuristic"}
    assert metric_value(metrics, "rl_scheduler_policy_info", heuristic) == 1.0
    learned = {"profile": "gnn", "source": "policy", "version": "shipped"}
    assert metric_value(metrics, "rl_scheduler_policy_info", learned) == 1.0
    log = real_cluster.kubectl("logs", "-n", release, pod.metadata.name, "-c", "scheduler")
    assert f"scheduling {SCHEDULER_NAME} with the fgd-reserve profile (a heuristic)" in log, log
    assert f"scheduling {LEARNED_SCHEDULER} with gnn policy shipped" in log, log
    assert "fgd schedules instead" not in log, log
    # The store on the shared volume is empty (nothing published yet) and says so.
    assert f"policy store {SHARED}/policies has no version yet" in log, log
    containers = [c.name for c in pod.spec.containers]
    assert containers == (["scheduler", "trainer"] if WITH_TRAINER else ["scheduler"])


def test_the_scheduler_image_has_no_torch_and_refuses_to_train_in_one_line(
    real_cluster: RealCluster, core: client.CoreV1Api, release: str
) -> None:
    pod = the_scheduler(core, release).metadata.name
    probe = "import importlib.util, sys; print(importlib.util.find_spec('torch'), 'torch' in sys.modules)"
    out = real_cluster.kubectl("exec", "-n", release, pod, "-c", "scheduler", "--", "python3", "-c", probe)
    assert out.strip() == "None False"
    # The running scheduler (pid 1) has no torch library mapped either.
    maps = real_cluster.kubectl("exec", "-n", release, pod, "-c", "scheduler", "--", "cat", "/proc/1/maps")
    assert "libtorch" not in maps
    said = real_cluster.kubectl(
        "exec", "-n", release, pod, "-c", "scheduler", "--",
        "rl-scheduler", "trainer", "--shared-dir", "/tmp/shared", check=False,
    )  # fmt: skip
    lines = [line for line in said.splitlines() if line.strip() and "command terminated" not in line]
    assert len(lines) == 1, said
    assert "Traceback" not in said
    assert "trainer image" in lines[0] or "rl-scheduler[learn]" in lines[0], lines[0]
    assert "exit code 2" in said


def test_a_deployment_that_opts_in_is_bound_and_its_containers_run(
    real_cluster: RealCluster, core: client.CoreV1Api, release: str, scratch: str, images: dict[str, str]
) -> None:
    del release  # the scheduler must be installed
    replicas = 3
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": scratch},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "schedulerName": "rl-scheduler",
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {
                            "name": "web",
                            "image": images["scheduler"],
                            "imagePullPolicy": "Never",
                            "command": ["python3", "-m", "http.server", "8080"],
                            "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1},
                            "resources": {"requests": {"cpu": "50m", "memory": "32Mi"}},
                        }
                    ],
                },
            },
        },
    }
    client.AppsV1Api(real_cluster.api_client()).create_namespaced_deployment(scratch, deployment)

    def running() -> list[Any]:
        pods = core.list_namespaced_pod(scratch, label_selector="app=web").items
        ready = [p for p in pods if is_ready(p)]
        return ready if len(ready) == replicas else []

    pods = wait_for(running, 120, f"{replicas} web pods Ready")
    for pod in pods:
        assert pod.spec.node_name == real_cluster.node_name
        assert pod.status.container_statuses[0].state.running is not None
    events = core.list_namespaced_event(scratch).items
    scheduled = {
        e.involved_object.name
        for e in events
        if e.reason == "Scheduled" and e.reporting_component == "rl-scheduler"
    }
    assert {p.metadata.name for p in pods} <= scheduled


def test_sigterm_ends_the_leader_within_2s_and_the_standby_leads_within_5s(
    real_cluster: RealCluster, core: client.CoreV1Api, release: str, scratch: str, images: dict[str, str]
) -> None:
    apps = client.AppsV1Api(real_cluster.api_client())
    name = apps.list_namespaced_deployment(release).items[0].metadata.name
    apps.patch_namespaced_deployment_scale(name, release, {"spec": {"replicas": 2}})
    try:

        def two_ready() -> list[Any]:
            ready = [p for p in scheduler_pods(core, release, RELEASE) if is_ready(p)]
            return ready if len(ready) == 2 else []

        both = wait_for(two_ready, 180, "two Ready replicas")
        holder = wait_for(lambda: lease_holder(real_cluster, release, "rl-scheduler"), 30, "a leader")
        leader = next(p for p in both if holder.startswith(p.metadata.name + "_"))
        standby = next(p for p in both if p is not leader)
        exit_watch = ExitWatch(real_cluster, release, leader.metadata.name)
        log = LogFollower(real_cluster, release, leader.metadata.name)
        time.sleep(1)  # the watch and the log stream are established

        sent = time.time()
        core.delete_namespaced_pod(leader.metadata.name, release)  # the default 30 s grace
        new_holder = wait_for(
            lambda: (
                (h := lease_holder(real_cluster, release, "rl-scheduler")).startswith(
                    standby.metadata.name + "_"
                )
                and h
            ),
            30,
            "the standby to take the Lease",
            interval_s=0.05,
        )
        took_over = time.time() - sent
        terminated = wait_for(exit_watch.terminated, 40, "the leader to exit")
        lines = log.stop()
        # The scheduler's own account: when the signal arrived (its log's clock is the
        # machine's) and how long it took from there to exit.
        received = next(_log_time(line) for line in lines if "SIGTERM received" in line)
        stopped = next(
            float(m.group(1)) for line in lines if (m := re.search(r"stopped in ([0-9.]+) s", line))
        )
        delivered = received - sent
        print(f"\ndelete to SIGTERM {delivered:.2f} s, SIGTERM to stopped {stopped:.2f} s, exit code "
              f"{terminated.exit_code}, finishedAt {terminated.finished_at.timestamp() - sent:+.0f} s; "
              f"standby led {took_over:.2f} s after the delete")  # fmt: skip
        assert terminated.exit_code == 0, terminated
        assert stopped <= 2.0, lines
        # finishedAt has whole seconds: the container ended within 2 s of the signal
        assert terminated.finished_at.timestamp() - received <= 2.0
        assert took_over <= 5.0, f"standby {new_holder} led {took_over:.1f} s after the delete"

        # The new leader binds.
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "after-failover", "namespace": scratch},
            "spec": {
                "schedulerName": "rl-scheduler",
                "containers": [
                    {
                        "name": "c",
                        "image": images["scheduler"],
                        "imagePullPolicy": "Never",
                        "command": ["sleep", "3600"],
                    }
                ],
            },
        }
        core.create_namespaced_pod(scratch, pod)
        wait_for(
            lambda: core.read_namespaced_pod("after-failover", scratch).spec.node_name,
            30,
            "a bind by the new leader",
        )
    finally:
        apps.patch_namespaced_deployment_scale(name, release, {"spec": {"replicas": 1}})


def _log_time(line: str) -> float:
    """The time of a scheduler log line (``2026-11-23 20:51:02,123 INFO ...``, local time)."""
    stamp = " ".join(line.split()[:2])
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


class LogFollower:
    """``kubectl logs -f`` of a pod's scheduler container, from now until ``stop``."""

    def __init__(self, cluster: RealCluster, namespace: str, name: str) -> None:
        command = [str(cluster.binaries.kubectl), "--kubeconfig", str(cluster.kubeconfig), "logs", "-f",
                   "--since=1s", "-n", namespace, name, "-c", "scheduler"]  # fmt: skip
        self._process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self.lines.append(line.rstrip("\n"))

    def stop(self) -> list[str]:
        self._thread.join(timeout=10)  # the stream ends with the container
        self._process.kill()
        return self.lines


class ExitWatch:
    """Watches one pod from before its deletion, keeping the scheduler container's
    terminated state as the kubelet reports it (the pod object goes right after)."""

    def __init__(self, cluster: RealCluster, namespace: str, name: str) -> None:
        self.state: Any = None
        self._watch = watch.Watch()
        core = client.CoreV1Api(cluster.api_client())
        self._stream = self._watch.stream(
            core.list_namespaced_pod, namespace, field_selector=f"metadata.name={name}", timeout_seconds=60
        )
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for event in self._stream:
            for status in event["object"].status.container_statuses or []:
                if status.name == "scheduler" and status.state.terminated is not None:
                    self.state = status.state.terminated
                    self._watch.stop()
                    return

    def terminated(self) -> Any:
        return self.state


def test_a_scheduler_started_without_the_api_server_says_so_and_recovers(
    real_cluster: RealCluster, core: client.CoreV1Api, images: dict[str, str]
) -> None:
    """Pods cannot reach the API server (packets dropped, as before kube-proxy runs):
    the scheduler logs its retries, is not Ready, and becomes Ready once they pass."""
    del images
    release, namespace = "rl-probe", "rl-probe"
    port = real_cluster.api_server_port()
    rule = ["INPUT", "-i", "rlnode0", "-p", "tcp", "--dport", str(port), "-j", "DROP"]
    _iptables("-I", *rule)
    try:
        values = {"schedulerName": "rl-probe", "trainer.enabled": False}
        done = real_cluster.helm(
            "install", release, str(CHART), "--namespace", namespace, "--create-namespace",
            *set_flags(values),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        pod = wait_for(
            lambda: next((p for p in scheduler_pods(core, namespace, release) if _started(p)), None),
            120,
            "the scheduler container to start",
        )

        def retried_twice() -> str:
            out = real_cluster.kubectl("logs", "-n", namespace, pod.metadata.name, check=False)
            return out if out.count("retrying") >= 2 else ""

        logs = wait_for(retried_twice, 90, "two logged retries")
        assert "cache synced" not in logs
        assert not is_ready(core.read_namespaced_pod(pod.metadata.name, namespace))
    finally:
        _iptables("-D", *rule)
    try:
        wait_for(lambda: is_ready(core.read_namespaced_pod(pod.metadata.name, namespace)), 120, "Ready after")
        log = real_cluster.kubectl("logs", "-n", namespace, pod.metadata.name)
        assert "cache synced" in log
    finally:
        uninstall_chart(real_cluster, release, namespace)


def _started(pod: Any) -> bool:
    return any(s.state.running is not None for s in pod.status.container_statuses or [])


def _iptables(*args: str) -> None:
    subprocess.run(["iptables", *args], check=True)


def test_a_pod_with_an_unbound_claim_waits_and_says_why(
    real_cluster: RealCluster, core: client.CoreV1Api, release: str, scratch: str
) -> None:
    del release
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": scratch},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
            "storageClassName": "",
        },
    }
    core.create_namespaced_persistent_volume_claim(scratch, claim)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "with-claim", "namespace": scratch},
        "spec": {
            "schedulerName": "rl-scheduler",
            "containers": [{"name": "c", "image": "localhost/none:never", "imagePullPolicy": "Never"}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
        },
    }
    core.create_namespaced_pod(scratch, pod)

    def failed() -> list[Any]:
        return [
            e
            for e in core.list_namespaced_event(scratch).items
            if e.reason == "FailedScheduling" and e.involved_object.name == "with-claim"
        ]

    event = wait_for(failed, 30, "a FailedScheduling event")[0]
    assert event.reporting_component == "rl-scheduler"
    # No volume and no class: the PV controller's to bind, and kube-scheduler's reason.
    assert "pod has unbound immediate PersistentVolumeClaims" in event.message, event.message
    assert core.read_namespaced_pod("with-claim", scratch).spec.node_name is None
