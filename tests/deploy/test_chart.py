"""The Helm chart, rendered offline: lint, schema, the settings it writes, the pods'
hardening, the RBAC rules, the options, and the files in deploy/ rendered from it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from manifests import MANIFESTS
from manifests import render as render_manifests
from scheduler.k8s.process.settings import ClientSettings, Settings, load_settings
from tests.deploy.chart import (
    CHART,
    REPO,
    chart_values,
    kinds,
    only,
    render,
    set_flags,
    settings_of,
    template,
)

pytestmark = pytest.mark.binaries
SHARED = "/var/lib/rl-scheduler"
# Every option at once: what the chart can render beyond its defaults.
EVERYTHING = {
    "replicaCount": 2,
    "trainer.enabled": True,
    "settings.profile": "gnn",  # the trainer's versions schedule only for a learned profile
    "sharedVolume.persistence.enabled": True,
    "metrics.serviceMonitor.enabled": True,
}


def test_helm_lint_passes(helm: Path) -> None:
    for values in ({}, EVERYTHING):
        result = subprocess.run(
            [str(helm), "lint", "--strict", str(CHART), *set_flags(values)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert "0 chart(s) failed" in result.stdout


@pytest.mark.parametrize(
    ("values", "message"),
    [
        pytest.param(
            {"replicaCount": 2, "leaderElection.enabled": False},
            "at '/leaderElection/enabled': value must be true",
            id="two replicas without leader election",
        ),
        pytest.param({"settings.profile": "best"}, "at '/settings/profile'", id="unknown profile"),
        pytest.param(
            {"settings.fallback_profile": "gnn"}, "at '/settings/fallback_profile'", id="gnn fallback"
        ),
        pytest.param(
            {"settings.scheduler_name": "x"}, "'scheduler_name' not allowed", id="chart-owned setting"
        ),
        pytest.param({"settings.client.qps": 0}, "at '/settings/client/qps'", id="zero qps"),
        pytest.param({"metrics.port": 70000}, "at '/metrics/port'", id="port out of range"),
        pytest.param({"image.pullPolicy": "Sometimes"}, "at '/image/pullPolicy'", id="bad pull policy"),
        pytest.param({"schedulerName": "RL_Scheduler"}, "at '/schedulerName'", id="name not a DNS label"),
        pytest.param({"replicas": 2}, "'replicas' not allowed", id="misspelt key"),
        pytest.param(
            {"leaderElection.renewDeadlineSeconds": 20},
            "leaderElection: need retryPeriodSeconds < renewDeadlineSeconds < leaseDurationSeconds",
            id="lease timings out of order",
        ),
        pytest.param(
            {"settings.startup_timeout_s": 0}, "at '/settings/startup_timeout_s'", id="no start-up time"
        ),
    ],
)
def test_the_schema_refuses_bad_values(helm: Path, values: dict[str, Any], message: str) -> None:
    result = template(helm, values)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


def test_the_schema_knows_every_setting_the_operator_takes() -> None:
    schema = yaml.safe_load((CHART / "values.schema.json").read_text())
    in_schema = set(schema["properties"]["settings"]["properties"])
    chart_owned = {"scheduler_name", "metrics_address", "leader_election"}
    assert in_schema | chart_owned == set(Settings.model_fields)
    # What a scheduler process knows: a fresh interpreter, since training tools in this one
    # may add profiles of their own (register_profile).
    names = subprocess.run(
        [sys.executable, "-c",
         "from scheduler.k8s.process import operator, settings as s; print(*s.profile_names())"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert "fgd" in names
    assert sorted(schema["definitions"]["profile"]["enum"]) == names
    assert set(chart_values()["settings"]) <= in_schema


BOUNDS = {"gt": "exclusiveMinimum", "ge": "minimum", "lt": "exclusiveMaximum", "le": "maximum"}


def _bounds(field: Any) -> dict[str, float]:
    return {
        BOUNDS[name]: getattr(rule, name)
        for rule in field.metadata
        for name in BOUNDS
        if getattr(rule, name, None) is not None
    }


def test_the_schema_bounds_each_number_as_the_operator_does() -> None:
    """A value the scheduler would refuse at start is refused at `helm install`."""
    schema = yaml.safe_load((CHART / "values.schema.json").read_text())["properties"]["settings"][
        "properties"
    ]
    models = {"": (Settings, schema), "client.": (ClientSettings, schema["client"]["properties"])}
    compared = 0
    for prefix, (model, properties) in models.items():
        for name, field in model.model_fields.items():
            if name not in properties:
                continue  # chart-owned, or client.kubeconfig (in-cluster)
            chart = {k: v for k, v in properties[name].items() if k in BOUNDS.values()}
            assert chart == _bounds(field), f"settings.{prefix}{name}"
            compared += bool(chart)
    assert compared >= 10


@pytest.mark.parametrize(
    "values",
    [
        pytest.param({}, id="defaults"),
        pytest.param(EVERYTHING, id="everything"),
        pytest.param({"schedulerName": "gpu-packer", "settings.profile": "fgd"}, id="renamed heuristic"),
        pytest.param({"trainer.enabled": False}, id="no trainer"),
        pytest.param({"trainer.enabled": True, "settings.profile": "gnn"}, id="learning online"),
    ],
)
def test_the_settings_file_is_one_the_operator_accepts(
    helm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, values: dict[str, Any]
) -> None:
    for key in [k for k in os.environ if k.startswith("RL_SCHEDULER_")]:
        monkeypatch.delenv(key)
    docs = render(helm, values, namespace="schedulers")
    path = tmp_path / "settings.yaml"
    path.write_text(yaml.safe_dump(settings_of(docs)))
    settings = load_settings(path)
    name = values.get("schedulerName", "rl-scheduler")
    assert settings.scheduler_name == name
    assert settings.leader_election.enabled
    assert settings.leader_election.namespace == "schedulers"
    assert settings.lease_name == name
    # the Role may update exactly that Lease
    role = only(docs, "Role", "-leader-election")
    assert [r.get("resourceNames") for r in role["rules"]] == [None, [name]]
    assert settings.metrics_address == "0.0.0.0:10259"
    assert settings.serving.tls_cert_file is None  # self-signed unless metrics.tls.secretName
    trainer = bool(values.get("trainer.enabled", False))
    assert settings.profile == values.get("settings.profile", "fgd-reserve")
    # None (trainer off): the policy shipped in the image, and no experience log
    assert settings.checkpoint is None
    # with the trainer, policy versions are custom resources in the release namespace,
    # the current one kept in a cache folder on the shared volume
    assert settings.policy_store == (Path(SHARED, "policy-cache") if trainer else None)
    assert settings.policy_versions.namespace == ("schedulers" if trainer else None)
    assert settings.experience_dir == (Path(SHARED, "experience") if trainer else None)


def test_defaults_render_the_documented_objects(helm: Path) -> None:
    assert kinds(render(helm)) == sorted(
        [
            "ClusterRole",
            "ClusterRole",  # metrics-reader: who may get /metrics
            "ClusterRoleBinding",
            "ConfigMap",  # settings
            "ConfigMap",  # dashboard
            "Deployment",
            "NetworkPolicy",  # only the metrics port comes in
            "PodDisruptionBudget",
            "Role",
            "RoleBinding",
            "Service",
            "ServiceAccount",
        ]
    )
    deployment = only(render(helm), "Deployment")
    assert [c["name"] for c in deployment["spec"]["template"]["spec"]["containers"]] == ["scheduler"]
    assert deployment["spec"]["template"]["spec"]["volumes"][2] == {
        "name": "shared",
        "emptyDir": {"sizeLimit": "2Gi"},
    }


def test_options_add_the_trainer_a_claim_and_a_service_monitor(helm: Path) -> None:
    docs = render(helm, EVERYTHING)
    assert {"PersistentVolumeClaim", "ServiceMonitor"} <= set(kinds(docs))
    pod = only(docs, "Deployment")["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["scheduler", "trainer"]
    assert pod["volumes"][2] == {"name": "shared", "persistentVolumeClaim": {"claimName": "rl-scheduler"}}
    monitor = only(docs, "ServiceMonitor")
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics", "trainer-metrics"]
    existing = render(helm, {**EVERYTHING, "sharedVolume.persistence.existingClaim": "policies"})
    assert "PersistentVolumeClaim" not in kinds(existing)
    claim = only(existing, "Deployment")["spec"]["template"]["spec"]["volumes"][2]
    assert claim["persistentVolumeClaim"] == {"claimName": "policies"}


def test_every_container_is_hardened_and_shares_the_volume(helm: Path) -> None:
    pod = only(render(helm, EVERYTHING), "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["serviceAccountName"] == "rl-scheduler"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["tmp"] == {"name": "tmp", "emptyDir": {"sizeLimit": "512Mi"}}
    for container in pod["containers"]:
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False
        assert context["readOnlyRootFilesystem"] is True
        assert context["privileged"] is False
        assert context["capabilities"] == {"drop": ["ALL"]}
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        # the only writable places: /tmp and the shared volume; each container its own
        # account's token (tests/deploy/test_chart_identity.py)
        token = {"scheduler": "kube-api-access", "trainer": "trainer-token"}[container["name"]]
        assert mounts == {
            "/etc/rl-scheduler": "settings",
            "/tmp": "tmp",
            SHARED: "shared",
            "/var/run/secrets/kubernetes.io/serviceaccount": token,
        }
        env = {e["name"]: e for e in container["env"]}
        assert env["HOME"]["value"].startswith("/tmp")
        assert env["MPLCONFIGDIR"]["value"].startswith("/tmp")
        namespace = env["RL_SCHEDULER_LEADER_ELECTION__NAMESPACE"]["valueFrom"]["fieldRef"]
        assert namespace == {"fieldPath": "metadata.namespace"}
    scheduler = pod["containers"][0]
    assert scheduler["args"] == ["run", "--config", "/etc/rl-scheduler/settings.yaml"]
    assert scheduler["ports"] == [{"name": "metrics", "containerPort": 10259, "protocol": "TCP"}]
    for probe, path in (
        ("startupProbe", "/healthz"),
        ("livenessProbe", "/healthz"),
        ("readinessProbe", "/readyz"),
    ):
        assert scheduler[probe]["httpGet"] == {"path": path, "port": "metrics", "scheme": "HTTPS"}


def test_rbac_is_what_the_scheduler_calls_and_no_more(helm: Path) -> None:
    docs = render(helm)
    rules = only(docs, "ClusterRole", "rl-scheduler")["rules"]
    granted = {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    assert granted == {
        ("", "pods", "get"),  # after a bind whose answer was lost; the pod named by a HAMi node lock
        ("", "pods", "list"),
        ("", "pods", "watch"),
        ("", "pods", "delete"),  # preemption's victims
        ("policy", "poddisruptionbudgets", "list"),  # preemption respects them, kept from a watch
        ("policy", "poddisruptionbudgets", "watch"),
        ("", "nodes", "get"),  # the HAMi node lock: read, then set or removed at that version
        ("", "nodes", "patch"),
        ("", "nodes", "list"),
        ("", "nodes", "watch"),
        ("", "namespaces", "list"),
        ("", "namespaces", "watch"),
        ("", "pods/binding", "create"),  # with HAMi's allocation annotations and label
        ("", "pods/status", "patch"),
        ("events.k8s.io", "events", "create"),
        # volumes: read as kube-scheduler's volume plugins read them; a chosen PV gets
        # its claimRef, a claim to provision its selected-node annotation
        ("", "persistentvolumeclaims", "list"),
        ("", "persistentvolumeclaims", "watch"),
        ("", "persistentvolumeclaims", "patch"),
        ("", "persistentvolumes", "list"),
        ("", "persistentvolumes", "watch"),
        ("", "persistentvolumes", "patch"),
        ("storage.k8s.io", "storageclasses", "list"),
        ("storage.k8s.io", "storageclasses", "watch"),
        ("storage.k8s.io", "csinodes", "list"),
        ("storage.k8s.io", "csinodes", "watch"),
        ("scheduling.x-k8s.io", "podgroups", "list"),  # gangs, as Coscheduling reads them
        ("scheduling.x-k8s.io", "podgroups", "watch"),
        ("scheduling.k8s.io", "podgroups", "list"),  # gangs of the Workload API
        ("scheduling.k8s.io", "podgroups", "watch"),
        # DRA, as kube-scheduler's DynamicResources: read from the watches; PreBind writes
        # each claim's allocation and reservedFor, Unreserve takes the pod out
        ("resource.k8s.io", "deviceclasses", "list"),
        ("resource.k8s.io", "deviceclasses", "watch"),
        ("resource.k8s.io", "resourceslices", "list"),
        ("resource.k8s.io", "resourceslices", "watch"),
        ("resource.k8s.io", "resourceclaims", "list"),
        ("resource.k8s.io", "resourceclaims", "watch"),
        ("resource.k8s.io", "resourceclaims", "patch"),  # kube's finalizer on a claim it allocates
        ("resource.k8s.io", "resourceclaims/status", "patch"),
        ("resource.k8s.io", "resourceclaims/binding", "patch"),  # v1.36: allocation, reservedFor
        # /metrics behind delegated auth, as kube-scheduler's
        ("authentication.k8s.io", "tokenreviews", "create"),
        ("authorization.k8s.io", "subjectaccessreviews", "create"),
    }
    assert not any("resourceNames" in rule for rule in rules)
    role = only(docs, "Role", "-leader-election")
    assert role["metadata"]["namespace"] == "rl-scheduler"
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["rl-scheduler"],
            "verbs": ["get", "update"],
        },
    ]
    for binding in (only(docs, "ClusterRoleBinding", "rl-scheduler"), only(docs, "RoleBinding")):
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "rl-scheduler", "namespace": "rl-scheduler"}
        ]


def test_notes_tell_the_user_to_set_the_scheduler_name(helm: Path) -> None:
    result = subprocess.run(
        [str(helm), "install", "demo", str(CHART), "--dry-run=client", "--set", "schedulerName=packer"],
        capture_output=True,
        text=True,
        check=True,
    )
    notes = result.stdout.split("NOTES:", 1)[1]
    assert "schedulerName: packer" in notes
    assert "nvidia.com/gpucores" in notes
    assert "rl-scheduler.io/gpu-milli" not in notes


def test_plain_manifests_are_the_rendered_chart(helm: Path) -> None:
    assert MANIFESTS.read_text() == render_manifests(helm), "deploy/ is stale: run `make generate`"
    docs = [d for d in yaml.safe_load_all(MANIFESTS.read_text()) if d]
    namespace = only(docs, "Namespace")
    assert namespace["metadata"]["labels"] == {"pod-security.kubernetes.io/enforce": "restricted"}
    assert {d["metadata"].get("namespace", "rl-scheduler") for d in docs if d["kind"] != "Namespace"} == {
        "rl-scheduler"
    }


def test_the_dashboard_configmap_is_the_same_in_the_chart_and_deploy(helm: Path) -> None:
    (from_chart,) = render(helm, {}, "--show-only", "templates/dashboard.yaml")
    (in_deploy,) = yaml.safe_load_all((REPO / "deploy" / "grafana-dashboard.yaml").read_text())
    for doc in (from_chart, in_deploy):
        assert doc["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert from_chart["metadata"]["name"] == in_deploy["metadata"]["name"]
    assert from_chart["metadata"]["namespace"] == in_deploy["metadata"]["namespace"]
    assert from_chart["data"] == in_deploy["data"]
    moved = render(helm, {"dashboards.namespace": "monitoring"}, "--show-only", "templates/dashboard.yaml")
    assert moved[0]["metadata"]["namespace"] == "monitoring"


def test_metrics_are_served_over_https_to_allowed_readers_only(helm: Path) -> None:
    prometheus = {"kind": "ServiceAccount", "name": "prometheus", "namespace": "monitoring"}
    docs = render(helm, {**EVERYTHING, "metrics.readers": [prometheus]})
    monitor = only(docs, "ServiceMonitor")
    for endpoint in monitor["spec"]["endpoints"]:
        assert endpoint["scheme"] == "https"
        assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
        assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}  # the self-signed default
    reader = only(docs, "ClusterRole", "-metrics-reader")
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    binding = only(docs, "ClusterRoleBinding", "-metrics-reader")
    assert binding["roleRef"]["name"] == reader["metadata"]["name"]
    # the reader given, and the trainer's account: it reads the scheduler's /metrics
    assert binding["subjects"] == [
        prometheus,
        {"kind": "ServiceAccount", "name": "rl-scheduler-trainer", "namespace": "rl-scheduler"},
    ]
    policy = only(docs, "NetworkPolicy")["spec"]
    assert policy["policyTypes"] == ["Ingress"]
    assert policy["ingress"] == [
        {"ports": [{"port": "metrics", "protocol": "TCP"}, {"port": "trainer-metrics", "protocol": "TCP"}]}
    ]
    pod = only(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["containers"][1]["args"][-2:] == ["--scheduler-metrics", "https://127.0.0.1:10259/metrics"]


def test_a_mounted_certificate_serves_both_ports(helm: Path) -> None:
    docs = render(helm, {**EVERYTHING, "metrics.tls.secretName": "rl-scheduler-tls"})
    settings = Settings(**yaml.safe_load(only(docs, "ConfigMap", "rl-scheduler")["data"]["settings.yaml"]))
    assert settings.serving.tls_cert_file == Path("/etc/rl-scheduler/tls/tls.crt")
    assert settings.serving.tls_key_file == Path("/etc/rl-scheduler/tls/tls.key")
    pod = only(docs, "Deployment")["spec"]["template"]["spec"]
    volume = {v["name"]: v for v in pod["volumes"]}["serving-tls"]
    assert volume["secret"]["secretName"] == "rl-scheduler-tls"
    for container in pod["containers"]:
        assert {"name": "serving-tls", "mountPath": "/etc/rl-scheduler/tls", "readOnly": True} in container[
            "volumeMounts"
        ]
    assert "--tls-cert-file" in pod["containers"][1]["args"]


def test_the_network_policy_admits_the_configured_peers_only(helm: Path) -> None:
    peers = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    docs = render(helm, {"networkPolicy.metricsFrom": [peers]})
    assert only(docs, "NetworkPolicy")["spec"]["ingress"] == [
        {"ports": [{"port": "metrics", "protocol": "TCP"}], "from": [peers]}
    ]
    assert "NetworkPolicy" not in kinds(render(helm, {"networkPolicy.enabled": False}))
