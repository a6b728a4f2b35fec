"""Policy versions as custom resources against a real kube-apiserver: the store
publishes two versions, ``kubectl get policyversions`` lists them, a ``kubectl patch``
of the PolicyChannel rolls back and both scheduler replicas load the rolled-back
version; a corrupt version is refused by both (each keeps its policy, naming the
object and the field), and ``rl-scheduler policy rollback`` points the channel back."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from devcluster.binaries import Binaries
from scheduler.k8s.scheduling.policy_versions import KubePolicyObjects
from scheduler.online.store_crd import VERSIONS, CrdPolicyStore, encode_version, read_folder
from scheduler.policy.weights import default_checkpoint_path
from tests.e2e.policy_crds import fresh_policy_objects, scheduler_env
from tests.e2e.support import SchedulerProcess, wait_for

pytestmark = pytest.mark.cluster
NAMESPACE = "policy-versions"
CHANNEL = "rl-pv"


def kubectl(kubeconfig: Path, *args: str) -> str:
    command = [str(Binaries.in_cache().kubectl), "--kubeconfig", str(kubeconfig), "-n", NAMESPACE, *args]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def table(listing: str) -> list[dict[str, str]]:
    """kubectl's table, each row by column name (an empty cell read as "")."""
    header, *rows = listing.splitlines()
    names = header.split()
    starts = [header.index(f" {name}") + 1 if i else 0 for i, name in enumerate(names)]
    ends = [*starts[1:], None]
    return [{n: row[a:b].strip() for n, a, b in zip(names, starts, ends, strict=True)} for row in rows]


def shipped_with_stage(folder: Path, stage: str) -> Path:
    """The shipped checkpoint, its manifest saying ``stage`` (a loadable checkpoint
    that differs from the other versions)."""
    shutil.copytree(default_checkpoint_path(), folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["training"] = {"stage": stage, "gate": {"promote": True, "candidate": 0.5}}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


@pytest.fixture(scope="module")
def objects(dev_cluster: Any) -> KubePolicyObjects:
    return fresh_policy_objects(dev_cluster.api_client(), dev_cluster.core_v1(), NAMESPACE)


def replica(kubeconfig: Path, tmp_path: Path, i: int) -> SchedulerProcess:
    return SchedulerProcess(
        "rl-pv",
        kubeconfig,
        tmp_path / f"rl-pv-{i}.log",
        ("--profile", "gnn"),
        {
            "RL_SCHEDULER_LEADER_ELECTION__IDENTITY": f"rl-pv-{i}",
            **scheduler_env(NAMESPACE, CHANNEL, tmp_path / f"cache-{i}"),
            "RL_SCHEDULER_POLICY_RELOAD_S": "1",
        },
    )


def loaded(replicas: list[SchedulerProcess], version: int) -> bool:
    return all(r.metric("rl_scheduler_policy_version") == version for r in replicas)


def test_kubectl_lists_versions_and_rolls_back_and_both_replicas_follow(
    dev_cluster: Any, objects: KubePolicyObjects, tmp_path: Path
) -> None:
    kubeconfig = dev_cluster.kubeconfig
    store = CrdPolicyStore(objects, CHANNEL, tmp_path / "trainer-cache")
    for stage in ("first", "second"):
        checkpoint = shipped_with_stage(tmp_path / stage, stage)
        store.publish(partial(shutil.copytree, checkpoint, dirs_exist_ok=True))
    assert store.versions() == ["v000001", "v000002"]

    rows = table(kubectl(kubeconfig, "get", "policyversions"))
    assert [list(row) for row in rows] == [
        ["NAME", "VERSION", "CURRENT", "STAGE", "VERDICT", "SCORE", "CREATED"]
    ] * 2
    assert [(r["NAME"], r["VERSION"], r["STAGE"], r["VERDICT"], r["SCORE"]) for r in rows] == [
        (f"{CHANNEL}-v000001", "v000001", "first", "promoted", "0.5"),
        (f"{CHANNEL}-v000002", "v000002", "second", "promoted", "0.5"),
    ]
    assert kubectl(kubeconfig, "get", "policychannel", CHANNEL, "-o", "jsonpath={.spec.currentVersion}") == (
        "v000002"
    )

    replicas = [replica(kubeconfig, tmp_path, i).start() for i in range(2)]
    try:
        for r in replicas:
            r.wait_ready()
        # both load the current version at start (read before the first profile is built)
        assert loaded(replicas, 2), [r.log()[-2000:] for r in replicas]

        # the documented rollback: one write of the channel's pointer
        kubectl(
            kubeconfig,
            "patch",
            "policychannel",
            CHANNEL,
            "--type",
            "merge",
            "-p",
            '{"spec":{"currentVersion":"v000001"}}',
        )
        wait_for(lambda: loaded(replicas, 1), 90, "both replicas to load v000001 after kubectl patch")
        for r in replicas:
            assert r.metric("rl_scheduler_policy_info", {"version": "v000001", "source": "policy"}) == 1
        wait_for(
            lambda: (
                [r["CURRENT"] for r in table(kubectl(kubeconfig, "get", "policyversions"))]
                == ["true", "false"]
            ),
            30,
            "kubectl get policyversions to mark v000001 current",
        )

        # a corrupt version (its weights do not match their digest): both refuse it,
        # name the object and the field, and keep v000001
        files = read_folder(tmp_path / "second")
        bad = encode_version(files, CHANNEL, "v000003")
        weights = next(f for f in bad["spec"]["files"] if f["path"] == "model.safetensors")
        weights["sha256"] = "0" * 64
        objects.create(VERSIONS, bad)
        failures = [r.metric("rl_scheduler_policy_load_failures_total") for r in replicas]
        kubectl(
            kubeconfig,
            "patch",
            "policychannel",
            CHANNEL,
            "--type",
            "merge",
            "-p",
            '{"spec":{"currentVersion":"v000003"}}',
        )
        refusal = f"PolicyVersion {NAMESPACE}/{CHANNEL}-v000003: spec.files[1].sha256"
        wait_for(lambda: all(refusal in r.log() for r in replicas), 60, "both replicas to refuse v000003")
        assert [r.metric("rl_scheduler_policy_load_failures_total") for r in replicas] == [
            f + 1 for f in failures
        ]
        assert loaded(replicas, 1)
        assert all(r.process is not None and r.process.poll() is None for r in replicas)

        # rl-scheduler policy rollback: the version before the current one, through the API
        command = [
            sys.executable,
            "-m",
            "scheduler.cli",
            "policy",
            "--shared-dir",
            str(tmp_path / "cli"),
            "--kubeconfig",
            str(kubeconfig),
            "--policy-namespace",
            NAMESPACE,
            "--policy-channel",
            CHANNEL,
        ]
        rolled = subprocess.run([*command, "rollback"], capture_output=True, text=True, check=False)
        assert rolled.returncode == 0, rolled.stderr
        assert rolled.stdout.strip() == "current is now v000002"
        listed = subprocess.run(
            [*command, "list"], capture_output=True, text=True, check=True, env=os.environ
        )
        assert listed.stdout.splitlines() == ["  v000001", "* v000002", "  v000003"]
        wait_for(lambda: loaded(replicas, 2), 90, "both replicas to load v000002 after the CLI's rollback")
    finally:
        for r in replicas:
            r.stop()
