"""Least privilege per container, on the rendered chart: which token each container
of the pod gets, the trainer's role, and the scheduler's role against kube-scheduler's
(the table in templates/rbac.yaml). tests/deploy/test_chart_identity_cluster.py asks
the API server what each token may do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.chart import CHART, only, render
from tests.deploy.rbac_table import (
    EXTRA,
    KUBE_ROLES,
    TOKEN_PATH,
    Identity,
    chart_table,
    container_identities,
    flatten,
)

pytestmark = pytest.mark.binaries
TRAINER = {"trainer.enabled": True, "settings.profile": "gnn"}
# Verbs that change something: none of them may reach the trainer's token.
WRITES = {"create", "update", "patch", "delete", "deletecollection", "bind", "escalate", "impersonate"}


def test_each_container_gets_its_own_accounts_token_or_none(helm: Path) -> None:
    docs = render(helm, TRAINER)
    pod = only(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False  # no token unless a container mounts one
    assert container_identities(docs) == {
        "scheduler": Identity("rl-scheduler", "projected"),
        "trainer": Identity("rl-scheduler-trainer", "secret", "rl-scheduler-trainer-token"),
    }
    volumes = {v["name"]: v for v in pod["volumes"]}
    # the scheduler's: what the kubelet's automount projects (token, CA, namespace)
    assert volumes["kube-api-access"]["projected"]["sources"] == [
        {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {
            "downwardAPI": {
                "items": [
                    {"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}
                ]
            }
        },
    ]
    # the trainer's: the same three files, from its account's token Secret
    assert [i["path"] for i in volumes["trainer-token"]["secret"]["items"]] == [
        "token",
        "ca.crt",
        "namespace",
    ]
    for container in pod["containers"]:
        token_mounts = [m for m in container["volumeMounts"] if m["mountPath"] == TOKEN_PATH]
        assert [m["readOnly"] for m in token_mounts] == [True], container["name"]
    # both accounts are the chart's, and neither is automounted into other pods
    accounts = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ServiceAccount"}
    assert set(accounts) == {"rl-scheduler", "rl-scheduler-trainer"}
    assert all(a["automountServiceAccountToken"] is False for a in accounts.values())


def test_without_the_trainer_the_scheduler_alone_has_a_token(helm: Path) -> None:
    docs = render(helm)
    assert container_identities(docs) == {"scheduler": Identity("rl-scheduler", "projected")}
    assert not [d for d in docs if d["kind"] == "Secret" or d["metadata"]["name"].endswith("-trainer")]


def test_the_trainers_account_can_be_named_and_brought(helm: Path) -> None:
    docs = render(
        helm, {**TRAINER, "trainer.serviceAccount.create": False, "trainer.serviceAccount.name": "mine"}
    )
    assert container_identities(docs)["trainer"] == Identity("mine", "secret", "mine-token")
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "ServiceAccount"] == ["rl-scheduler"]
    binding = only(docs, "ClusterRoleBinding", "-trainer")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "mine", "namespace": "rl-scheduler"}]


def test_the_trainers_role_reads_nodes_and_writes_nothing(helm: Path) -> None:
    docs = render(helm, TRAINER)
    role = only(docs, "ClusterRole", "-trainer")
    assert flatten(role["rules"]) == {
        ("", "nodes", "", "list"),  # the twin it replays on (scheduler/online/cli.py)
        # its /metrics behind delegated auth; both creates change nothing
        ("authentication.k8s.io", "tokenreviews", "", "create"),
        ("authorization.k8s.io", "subjectaccessreviews", "", "create"),
    }
    writes = {g for g in flatten(role["rules"]) if g[3] in WRITES}
    assert {g[1] for g in writes} == {"tokenreviews", "subjectaccessreviews"}
    binding = only(docs, "ClusterRoleBinding", "-trainer")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "rl-scheduler-trainer", "namespace": "rl-scheduler"}
    ]
    # the trainer's account is bound to nothing else but the metrics reader (it reads
    # the scheduler's /metrics for rollbacks) and its policy versions' Role, and the
    # scheduler's to nothing of the trainer's
    bound = {
        d["metadata"]["name"]
        for d in docs
        if d["kind"] in ("ClusterRoleBinding", "RoleBinding")
        for s in d["subjects"]
        if s["name"] == "rl-scheduler-trainer"
    }
    assert bound == {
        "rl-scheduler-trainer",
        "rl-scheduler-metrics-reader",
        "rl-scheduler-policy-versions-trainer",
    }


@pytest.mark.parametrize(
    ("values", "in_api"),
    [
        (TRAINER, True),  # the default with the trainer: policy versions as custom resources
        ({**TRAINER, "trainer.policyStore": "volume"}, False),
        ({**TRAINER, "settings.policy_store": "/models/store"}, False),  # a folder the user names
        ({"settings.profile": "gnn"}, False),  # no trainer, no versions
    ],
)
def test_policy_versions_in_the_api_grant_the_trainer_writes_in_its_namespace_and_the_scheduler_reads(
    helm: Path, values: dict[str, Any], in_api: bool
) -> None:
    docs = render(helm, values)
    versions = [d for d in docs if "-policy-versions" in d["metadata"]["name"]]
    if not in_api:
        assert versions == []
        return
    trainer_role = only(versions, "Role", "-policy-versions-trainer")
    assert trainer_role["metadata"]["namespace"] == "rl-scheduler"
    # publishing: create a version, create or point the channel; no delete, no update
    assert flatten(trainer_role["rules"]) == {
        ("rl-scheduler.io", "policyversions", "", "get"),
        ("rl-scheduler.io", "policyversions", "", "list"),
        ("rl-scheduler.io", "policyversions", "", "create"),
        ("rl-scheduler.io", "policychannels", "", "get"),
        ("rl-scheduler.io", "policychannels", "", "create"),
        ("rl-scheduler.io", "policychannels", "", "patch"),
    }
    assert only(versions, "RoleBinding")["subjects"] == [
        {"kind": "ServiceAccount", "name": "rl-scheduler-trainer", "namespace": "rl-scheduler"}
    ]
    # every replica reads them (kopf watches cluster-wide) and marks status.current
    scheduler_role = only(versions, "ClusterRole", "-policy-versions")
    assert flatten(scheduler_role["rules"]) == {
        ("rl-scheduler.io", kind, "", verb)
        for kind in ("policyversions", "policychannels")
        for verb in ("get", "list", "watch")
    } | {("rl-scheduler.io", "policyversions/status", "", "patch")}
    assert only(versions, "ClusterRoleBinding")["subjects"] == [
        {"kind": "ServiceAccount", "name": "rl-scheduler", "namespace": "rl-scheduler"}
    ]
    # the settings and the trainer's arguments name the same channel in the same namespace
    settings = yaml.safe_load(only(docs, "ConfigMap", "rl-scheduler")["data"]["settings.yaml"])
    assert settings["policy_versions"] == {
        "namespace": "rl-scheduler",
        "channel": "rl-scheduler",
        "cache_dir": "/var/lib/rl-scheduler/policy-cache",
    }
    assert "policy_store" not in settings
    containers = only(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    args = next(c for c in containers if c["name"] == "trainer")["args"]
    assert args[args.index("--policy-namespace") + 1] == "rl-scheduler"
    assert args[args.index("--policy-channel") + 1] == "rl-scheduler"


def test_the_chart_ships_the_policy_version_crds() -> None:
    crds = {path.name: yaml.safe_load(path.read_text()) for path in (CHART / "crds").glob("policy*.yaml")}
    assert {name: crd["metadata"]["name"] for name, crd in crds.items()} == {
        "policyversions.yaml": "policyversions.rl-scheduler.io",
        "policychannels.yaml": "policychannels.rl-scheduler.io",
    }
    for crd in crds.values():
        assert crd["spec"]["scope"] == "Namespaced"
    (version,) = crds["policyversions.yaml"]["spec"]["versions"]
    columns = [c["name"] for c in version["additionalPrinterColumns"]]
    assert columns == ["Version", "Current", "Stage", "Verdict", "Score", "Bytes", "Created"]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["x-kubernetes-validations"][0]["rule"] == "self == oldSelf"  # versions are immutable


def _scheduler_grants(helm: Path) -> set[tuple[str, str, bool, str]]:
    """(group, resource, named, verb) of the scheduler's ClusterRole and leader-election Role."""
    docs = render(helm)
    rules = (
        only(docs, "ClusterRole", "rl-scheduler")["rules"] + only(docs, "Role", "-leader-election")["rules"]
    )
    return {(g, r, bool(n), v) for g, r, n, v in flatten(rules)}


def test_every_rule_is_kube_schedulers_or_justified(helm: Path) -> None:
    table = chart_table()
    assert len(table) == len({(r.group, r.resource, r.one_name, r.verbs) for r in table}), "a row twice"
    tabled = {(r.group, r.resource, r.one_name, v) for r in table for v in r.verbs}
    # the table is the role: no rule without its row, no row without its rule
    assert tabled == _scheduler_grants(helm)
    for row in table:
        assert len(row.why) > 20, f"{row}: say why rl-scheduler calls it"
        for verb in row.verbs:
            kube_has = {
                role for role, grants in KUBE_ROLES.items()
                if any(g[:2] == (row.group, row.resource) and bool(g[2]) == row.one_name and g[3] == verb
                       for g in grants)
            }  # fmt: skip
            if row.kube_role == EXTRA:
                assert not kube_has, f"{row.resource} {verb} is kube-scheduler's ({kube_has}): not extra"
            else:
                assert row.kube_role in kube_has, (
                    f"{row.resource} {verb}: not in {row.kube_role} ({kube_has})"
                )
    # the verbs kube-scheduler does not have, each justified in the chart
    extras = {(r.group, r.resource, v) for r in table if r.kube_role == EXTRA for v in r.verbs}
    assert extras == {
        ("", "nodes", "patch"),  # HAMi's node lock
        ("scheduling.x-k8s.io", "podgroups", "list"),  # gangs
        ("scheduling.x-k8s.io", "podgroups", "watch"),
    }
