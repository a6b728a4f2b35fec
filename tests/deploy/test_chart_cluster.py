"""The chart against a real API server: every rendered object passes a server-side dry
run (Pod Security ``restricted`` included), an install creates every object, and the
scheduler, run with the chart's ServiceAccount and nothing else, schedules pods while
every request outside its RBAC is refused."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from devcluster import kube
from manifests import MANIFESTS
from tests.deploy.chart import CHART, REPO, set_flags
from tests.deploy.cluster import (
    RESTRICTED,
    SERVICE_MONITOR_CRD,
    fresh_namespace,
    mixed_cluster,
    run_kubectl,
    service_account_kubeconfig,
)
from tests.e2e.support import ensure_namespace, pod_events, running_scheduler, wait_for
from tests.e2e.workloads import pod

pytestmark = pytest.mark.cluster
RELEASE = "rl-chart"
NAMESPACE = "rl-chart"
FULLNAME = "rl-chart-rl-scheduler"  # <release>-<chart>: the chart's objects and its ServiceAccount
SCHEDULER = "rl-chart"  # the chart's schedulerName here: pods and the Lease carry it
EVERYTHING = {
    "schedulerName": SCHEDULER,
    "replicaCount": 2,
    "trainer.enabled": True,
    "settings.profile": "gnn",  # the trainer's versions schedule only for a learned profile
    "sharedVolume.persistence.enabled": True,
    "metrics.serviceMonitor.enabled": True,
}


@pytest.fixture(scope="module")
def core(dev_cluster: Any, kubectl: Path) -> Iterator[client.CoreV1Api]:
    api = dev_cluster.core_v1()
    with mixed_cluster(api):
        applied = run_kubectl(
            kubectl, dev_cluster.kubeconfig, "apply", "-f", "-", stdin=json.dumps(SERVICE_MONITOR_CRD)
        )
        assert applied.returncode == 0, applied.stderr
        established = run_kubectl(
            kubectl, dev_cluster.kubeconfig, "wait", "--for=condition=Established", "--timeout=60s",
            "crd/servicemonitors.monitoring.coreos.com",
        )  # fmt: skip
        assert established.returncode == 0, established.stderr
        yield api


@pytest.fixture(scope="module")
def release(dev_cluster: Any, core: client.CoreV1Api, helm: Path) -> Iterator[str]:
    fresh_namespace(core, NAMESPACE, RESTRICTED)
    command = [str(helm), "install", RELEASE, str(CHART), "--namespace", NAMESPACE, *set_flags(EVERYTHING)]
    installed = _run(command, dev_cluster.kubeconfig)
    assert installed.returncode == 0, installed.stderr
    yield RELEASE
    _run([str(helm), "uninstall", RELEASE, "--namespace", NAMESPACE, "--wait"], dev_cluster.kubeconfig)
    with contextlib.suppress(ApiException):
        core.delete_namespace(NAMESPACE)


def _run(command: list[str], kubeconfig: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    return subprocess.run(command, capture_output=True, text=True, check=False, env=env)


def dry_run(kubectl: Path, kubeconfig: Path, manifests: str, *args: str) -> None:
    result = run_kubectl(kubectl, kubeconfig, "apply", "--dry-run=server", *args, "-f", "-", stdin=manifests)
    assert result.returncode == 0, result.stderr
    # Pod Security admission warns (namespace label pod-security.kubernetes.io/warn) on
    # workloads whose pods it would refuse.
    assert "PodSecurity" not in result.stderr, result.stderr


@pytest.mark.parametrize("values", [{}, EVERYTHING], ids=["defaults", "everything"])
def test_helm_template_passes_a_server_side_dry_run(
    dev_cluster: Any, core: client.CoreV1Api, helm: Path, kubectl: Path, values: dict[str, Any]
) -> None:
    ensure_namespace(core, "rl-chart-dry", RESTRICTED)
    rendered = _run(
        [str(helm), "template", RELEASE, str(CHART), "--namespace", "rl-chart-dry", *set_flags(values)],
        dev_cluster.kubeconfig,
    )
    assert rendered.returncode == 0, rendered.stderr
    dry_run(kubectl, dev_cluster.kubeconfig, rendered.stdout)


def test_plain_manifests_and_examples_pass_a_server_side_dry_run(
    dev_cluster: Any, core: client.CoreV1Api, kubectl: Path
) -> None:
    # A dry run creates no namespace, so the objects inside it need a real one.
    ensure_namespace(core, "rl-scheduler", RESTRICTED)
    ensure_namespace(core, "rl-chart-dry", RESTRICTED)
    dashboard = (REPO / "deploy" / "grafana-dashboard.yaml").read_text()
    dry_run(kubectl, dev_cluster.kubeconfig, MANIFESTS.read_text() + "\n---\n" + dashboard)
    for example in sorted((REPO / "deploy" / "examples").glob("*.yaml")):
        dry_run(kubectl, dev_cluster.kubeconfig, example.read_text(), "--namespace", "rl-chart-dry")


def test_installing_the_chart_creates_every_object(
    dev_cluster: Any, core: client.CoreV1Api, helm: Path, kubectl: Path, release: str
) -> None:
    manifest = _run([str(helm), "get", "manifest", release, "--namespace", NAMESPACE], dev_cluster.kubeconfig)
    assert manifest.returncode == 0, manifest.stderr
    expected = sorted(
        f"{doc['kind']}/{doc['metadata']['name']}".lower()
        for doc in yaml.safe_load_all(manifest.stdout)
        if doc
    )
    found = run_kubectl(
        kubectl, dev_cluster.kubeconfig, "get", "-f", "-", "-o", "name", stdin=manifest.stdout
    )
    assert found.returncode == 0, found.stderr
    # kubectl names each object group-qualified (deployment.apps/rl-chart)
    names = sorted(re.sub(r"^([a-z]+)\.[^/]*/", r"\1/", line) for line in found.stdout.split())
    assert names == expected
    # secret: the trainer's token (serviceaccount.yaml); networkpolicy: networkpolicy.yaml
    assert {n.split("/")[0] for n in names} == {
        "clusterrole", "clusterrolebinding", "configmap", "deployment", "networkpolicy",
        "persistentvolumeclaim", "poddisruptionbudget", "role", "rolebinding", "secret", "service",
        "serviceaccount", "servicemonitor",
    }  # fmt: skip

    # The ReplicaSet's pods got past Pod Security admission (restricted) in the namespace.
    def pods() -> list[Any]:
        selector = f"app.kubernetes.io/instance={release}"
        return list(core.list_namespaced_pod(NAMESPACE, label_selector=selector).items)

    wait_for(lambda: len(pods()) == 2, 60, "the chart's two pods to be created")
    assert {c.name for c in pods()[0].spec.containers} == {"scheduler", "trainer"}


@pytest.fixture(scope="module")
def identity(
    dev_cluster: Any, core: client.CoreV1Api, release: str, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """A kubeconfig that is the chart's ServiceAccount."""
    folder = tmp_path_factory.mktemp("identity")
    return service_account_kubeconfig(
        dev_cluster.kubeconfig, core, NAMESPACE, FULLNAME, folder / "kubeconfig"
    )


def test_the_scheduler_runs_on_the_charts_rbac(
    dev_cluster: Any, core: client.CoreV1Api, identity: Path, tmp_path: Path
) -> None:
    settings = core.read_namespaced_config_map(FULLNAME, NAMESPACE).data["settings.yaml"]
    (tmp_path / "settings.yaml").write_text(settings)
    namespace = "rl-chart-pods"
    ensure_namespace(core, namespace)
    env = {"RL_SCHEDULER_LEADER_ELECTION__NAMESPACE": NAMESPACE}  # the downward API's value in the pod
    args = ("--config", str(tmp_path / "settings.yaml"))
    admin = dev_cluster.kubeconfig
    with running_scheduler(
        identity, SCHEDULER, tmp_path, *args, env=env, admin_kubeconfig=admin
    ) as scheduler:
        pods = [pod(f"cpu-{i}", namespace, SCHEDULER) for i in range(8)]
        pods.append(pod("gpu-whole", namespace, SCHEDULER, gpus=1))
        pods.append(pod("gpu-share", namespace, SCHEDULER, gpus=1, gpu_percent=50))
        pods.append(pod("too-big", namespace, SCHEDULER, cpu="1000"))
        for manifest in pods:
            core.create_namespaced_pod(namespace, manifest)
        fitting = [p["metadata"]["name"] for p in pods[:-1]]

        def bound() -> bool:
            return all(core.read_namespaced_pod(n, namespace).spec.node_name for n in fitting)

        wait_for(bound, 120, "the pods to be bound by the chart's identity")

        def reported(name: str, reason: str) -> bool:
            return any(e.reason == reason for e in pod_events(core, namespace, name))

        # events.k8s.io events (create) and the PodScheduled condition (pods/status patch)
        wait_for(lambda: all(reported(n, "Scheduled") for n in fitting), 60, "Scheduled events")
        wait_for(lambda: reported("too-big", "FailedScheduling"), 60, "a FailedScheduling event")
        conditions = core.read_namespaced_pod("too-big", namespace).status.conditions or []
        assert [(c.type, c.status, c.reason) for c in conditions] == [
            ("PodScheduled", "False", "Unschedulable")
        ]
        lease = client.CoordinationV1Api(core.api_client).read_namespaced_lease(SCHEDULER, NAMESPACE)
        assert scheduler.metric("rl_scheduler_leader") == 1
        assert lease.spec.holder_identity
        log = scheduler.log()
    core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
    assert not re.search(r"forbidden|\b403\b", log, re.IGNORECASE), log[-3000:]


def _denied(call: Callable[[], Any]) -> bool:
    try:
        call()
    except ApiException as error:
        return error.status == 403
    return False


def test_requests_outside_the_rbac_are_refused(core: client.CoreV1Api, identity: Path) -> None:
    with kube.api_client(identity) as api:
        as_chart = client.CoreV1Api(api)
        leases = client.CoordinationV1Api(api)
        lease = {"metadata": {"name": "someone-else"}, "spec": {"holderIdentity": "me"}}
        regarding = {"kind": "Pod", "name": "x", "namespace": "default"}
        core_event = {"metadata": {"name": "x"}, "involvedObject": regarding}
        refused = {
            "list secrets": as_chart.list_secret_for_all_namespaces,
            "read a configmap": lambda: as_chart.read_namespaced_config_map(FULLNAME, NAMESPACE),
            "create a pod": lambda: as_chart.create_namespaced_pod("default", pod("x", "default", SCHEDULER)),
            "delete a pod": lambda: as_chart.delete_collection_namespaced_pod("default"),
            "patch a pod": lambda: as_chart.patch_namespaced_pod("x", "default", {"metadata": {}}),
            "update a pod": lambda: as_chart.replace_namespaced_pod(
                "x", "default", pod("x", "default", SCHEDULER)
            ),
            "update a node": lambda: as_chart.replace_node(
                "e2e-node-000", {"metadata": {"name": "e2e-node-000"}}
            ),
            "delete a node": lambda: as_chart.delete_node("e2e-node-000"),
            "core events": lambda: as_chart.create_namespaced_event("default", core_event),
            "another lease": lambda: leases.read_namespaced_lease("kube-scheduler", NAMESPACE),
            "update another lease": lambda: leases.replace_namespaced_lease("someone-else", NAMESPACE, lease),
            "a lease elsewhere": lambda: leases.create_namespaced_lease("default", lease),
            "list deployments": client.AppsV1Api(api).list_deployment_for_all_namespaces,
        }
        allowed = [what for what, call in refused.items() if not _denied(call)]
        assert allowed == [], f"the chart's identity may {allowed}"
        granted = {
            namespace: _resource_rules(client.AuthorizationV1Api(api), namespace)
            for namespace in (NAMESPACE, "default")
        }
    everywhere = {
        ("", "pods", "", "get"), ("", "pods", "", "list"), ("", "pods", "", "watch"),
        ("", "pods", "", "delete"),
        ("policy", "poddisruptionbudgets", "", "list"), ("policy", "poddisruptionbudgets", "", "watch"),
        ("", "nodes", "", "get"), ("", "nodes", "", "list"), ("", "nodes", "", "watch"),
        ("", "nodes", "", "patch"),
        ("", "namespaces", "", "list"), ("", "namespaces", "", "watch"),
        ("", "pods/binding", "", "create"), ("", "pods/status", "", "patch"),
        ("events.k8s.io", "events", "", "create"),
        ("", "persistentvolumeclaims", "", "list"), ("", "persistentvolumeclaims", "", "watch"),
        ("", "persistentvolumeclaims", "", "patch"),
        ("", "persistentvolumes", "", "list"), ("", "persistentvolumes", "", "watch"),
        ("", "persistentvolumes", "", "patch"),
        ("storage.k8s.io", "storageclasses", "", "list"), ("storage.k8s.io", "storageclasses", "", "watch"),
        ("storage.k8s.io", "csinodes", "", "list"), ("storage.k8s.io", "csinodes", "", "watch"),
        ("scheduling.x-k8s.io", "podgroups", "", "list"), ("scheduling.x-k8s.io", "podgroups", "", "watch"),
        ("scheduling.k8s.io", "podgroups", "", "list"), ("scheduling.k8s.io", "podgroups", "", "watch"),
        ("resource.k8s.io", "deviceclasses", "", "list"), ("resource.k8s.io", "deviceclasses", "", "watch"),
        ("resource.k8s.io", "resourceslices", "", "list"), ("resource.k8s.io", "resourceslices", "", "watch"),
        ("resource.k8s.io", "resourceclaims", "", "list"), ("resource.k8s.io", "resourceclaims", "", "watch"),
        ("resource.k8s.io", "resourceclaims", "", "patch"),
        ("resource.k8s.io", "resourceclaims/status", "", "patch"),
        ("resource.k8s.io", "resourceclaims/binding", "", "patch"),
        # policy versions as custom resources (the trainer is on, trainer.policyStore crd)
        ("rl-scheduler.io", "policyversions", "", "get"), ("rl-scheduler.io", "policyversions", "", "list"),
        ("rl-scheduler.io", "policyversions", "", "watch"),
        ("rl-scheduler.io", "policychannels", "", "get"), ("rl-scheduler.io", "policychannels", "", "list"),
        ("rl-scheduler.io", "policychannels", "", "watch"),
        ("rl-scheduler.io", "policyversions/status", "", "patch"),
        ("authentication.k8s.io", "tokenreviews", "", "create"),
        ("authorization.k8s.io", "subjectaccessreviews", "", "create"),
    }  # fmt: skip
    leader_election = {
        ("coordination.k8s.io", "leases", "", "create"),
        ("coordination.k8s.io", "leases", SCHEDULER, "get"),
        ("coordination.k8s.io", "leases", SCHEDULER, "update"),
    }
    assert granted["default"] == everywhere
    assert granted[NAMESPACE] == everywhere | leader_election


def _resource_rules(api: client.AuthorizationV1Api, namespace: str) -> set[tuple[str, str, str, str]]:
    """(group, resource, name, verb) the API server says this identity may do in
    ``namespace``, less the self-review APIs every authenticated user has."""
    review = api.create_self_subject_rules_review(
        client.V1SelfSubjectRulesReview(spec=client.V1SelfSubjectRulesReviewSpec(namespace=namespace))
    )
    rules = set()
    for rule in review.status.resource_rules:
        for group in rule.api_groups or [""]:
            for resource in rule.resources or []:
                for name in rule.resource_names or [""]:
                    for verb in rule.verbs:
                        if not resource.startswith("selfsubject"):
                            rules.add((group, resource, name, verb))
    return rules
