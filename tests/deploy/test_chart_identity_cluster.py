"""What each container's token may do, as the API server answers it: the chart's
identities are applied (accounts, the trainer's token Secret, roles, bindings), each
container's token is got as the kubelet would get it (a TokenRequest for the pod's own
account, the filled-in Secret for the trainer's), and a SelfSubjectRulesReview made
with it is compared with a table. The trainer's token can bind, delete or patch nothing."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from devcluster import kube
from tests.deploy.chart import render
from tests.deploy.cluster import RESTRICTED, fresh_namespace, run_kubectl
from tests.deploy.rbac_table import KUBE_ROLES, Grant, Identity, allows, container_identities, flatten
from tests.e2e.support import wait_for

pytestmark = pytest.mark.cluster
RELEASE = "rl-ids"
NAMESPACE = "rl-ids"
FULLNAME = "rl-ids-rl-scheduler"
VALUES = {"schedulerName": RELEASE, "trainer.enabled": True, "settings.profile": "gnn"}
IDENTITY_KINDS = ("ServiceAccount", "Secret", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
ELSEWHERE = "default"  # any namespace but the release's

# (container, namespace, group, resource, verb, resource name, allowed): what the API
# server must answer for the container's token.
RIGHTS = [
    # the trainer: reads nodes, reviews its scrapers' tokens, and nothing else
    ("trainer", ELSEWHERE, "", "nodes", "list", "", True),
    ("trainer", ELSEWHERE, "authentication.k8s.io", "tokenreviews", "create", "", True),
    ("trainer", ELSEWHERE, "authorization.k8s.io", "subjectaccessreviews", "create", "", True),
    ("trainer", ELSEWHERE, "", "pods/binding", "create", "", False),
    ("trainer", ELSEWHERE, "", "bindings", "create", "", False),
    ("trainer", ELSEWHERE, "", "pods", "delete", "", False),
    ("trainer", ELSEWHERE, "", "pods", "deletecollection", "", False),
    ("trainer", ELSEWHERE, "", "pods", "patch", "", False),
    ("trainer", ELSEWHERE, "", "pods", "update", "", False),
    ("trainer", ELSEWHERE, "", "pods", "create", "", False),
    ("trainer", ELSEWHERE, "", "pods", "list", "", False),
    ("trainer", ELSEWHERE, "", "pods/status", "patch", "", False),
    ("trainer", ELSEWHERE, "", "pods/eviction", "create", "", False),
    ("trainer", ELSEWHERE, "", "nodes", "patch", "", False),
    ("trainer", ELSEWHERE, "", "nodes", "update", "", False),
    ("trainer", ELSEWHERE, "", "nodes", "delete", "", False),
    ("trainer", ELSEWHERE, "", "persistentvolumes", "patch", "", False),
    ("trainer", ELSEWHERE, "", "persistentvolumeclaims", "patch", "", False),
    ("trainer", ELSEWHERE, "events.k8s.io", "events", "create", "", False),
    ("trainer", ELSEWHERE, "", "secrets", "get", "", False),
    ("trainer", NAMESPACE, "", "secrets", "get", f"{FULLNAME}-token", False),
    ("trainer", NAMESPACE, "", "serviceaccounts/token", "create", FULLNAME, False),
    ("trainer", NAMESPACE, "coordination.k8s.io", "leases", "update", RELEASE, False),
    ("trainer", NAMESPACE, "coordination.k8s.io", "leases", "create", "", False),
    # policy versions (trainer.policyStore crd, the default with the trainer): the trainer
    # publishes in the release namespace only and deletes nothing
    ("trainer", NAMESPACE, "rl-scheduler.io", "policyversions", "create", "", True),
    ("trainer", NAMESPACE, "rl-scheduler.io", "policychannels", "patch", "", True),
    ("trainer", NAMESPACE, "rl-scheduler.io", "policyversions", "delete", "", False),
    ("trainer", NAMESPACE, "rl-scheduler.io", "policyversions", "update", "", False),
    ("trainer", ELSEWHERE, "rl-scheduler.io", "policyversions", "create", "", False),
    ("trainer", ELSEWHERE, "rl-scheduler.io", "policychannels", "patch", "", False),
    # ... and every scheduler replica reads them and writes only status.current
    ("scheduler", NAMESPACE, "rl-scheduler.io", "policychannels", "watch", "", True),
    ("scheduler", NAMESPACE, "rl-scheduler.io", "policyversions", "list", "", True),
    ("scheduler", NAMESPACE, "rl-scheduler.io", "policyversions/status", "patch", "", True),
    ("scheduler", NAMESPACE, "rl-scheduler.io", "policyversions", "create", "", False),
    ("scheduler", NAMESPACE, "rl-scheduler.io", "policychannels", "patch", "", False),
    # the scheduler: kube-scheduler's rights it uses, HAMi's node lock, and no more
    ("scheduler", ELSEWHERE, "", "pods/binding", "create", "", True),
    ("scheduler", ELSEWHERE, "", "pods", "delete", "", True),  # preemption
    ("scheduler", ELSEWHERE, "", "pods/status", "patch", "", True),
    ("scheduler", ELSEWHERE, "", "nodes", "patch", "", True),  # HAMi's node lock (rbac.yaml)
    ("scheduler", ELSEWHERE, "", "nodes", "list", "", True),
    ("scheduler", ELSEWHERE, "authentication.k8s.io", "tokenreviews", "create", "", True),
    ("scheduler", ELSEWHERE, "authorization.k8s.io", "subjectaccessreviews", "create", "", True),
    ("scheduler", ELSEWHERE, "events.k8s.io", "events", "create", "", True),
    ("scheduler", NAMESPACE, "coordination.k8s.io", "leases", "create", "", True),
    ("scheduler", NAMESPACE, "coordination.k8s.io", "leases", "update", RELEASE, True),
    ("scheduler", NAMESPACE, "coordination.k8s.io", "leases", "update", "kube-scheduler", False),
    ("scheduler", ELSEWHERE, "coordination.k8s.io", "leases", "create", "", False),
    ("scheduler", ELSEWHERE, "", "pods", "patch", "", False),
    ("scheduler", ELSEWHERE, "", "pods", "update", "", False),
    ("scheduler", ELSEWHERE, "", "pods", "create", "", False),
    ("scheduler", ELSEWHERE, "", "nodes", "update", "", False),
    ("scheduler", ELSEWHERE, "", "nodes", "delete", "", False),
    ("scheduler", ELSEWHERE, "", "secrets", "get", "", False),
    ("scheduler", NAMESPACE, "", "secrets", "get", f"{FULLNAME}-trainer-token", False),
    ("scheduler", ELSEWHERE, "", "configmaps", "get", "", False),
    ("scheduler", NAMESPACE, "", "serviceaccounts/token", "create", f"{FULLNAME}-trainer", False),
    ("scheduler", ELSEWHERE, "", "events", "create", "", False),  # events.k8s.io only
    ("scheduler", ELSEWHERE, "apps", "deployments", "list", "", False),
]


@pytest.fixture(scope="module")
def chart(dev_cluster: Any, helm: Path, kubectl: Path) -> Iterator[list[dict[str, Any]]]:
    """The chart rendered, its identities applied in a fresh namespace (no pods: what a
    token may do is the same whether its pod runs or not)."""
    docs = render(helm, VALUES, release=RELEASE, namespace=NAMESPACE)
    fresh_namespace(dev_cluster.core_v1(), NAMESPACE, RESTRICTED)
    # helm's install order (accounts before the Secret that names one) is the rendering's
    identities = yaml.safe_dump_all([d for d in docs if d["kind"] in IDENTITY_KINDS])
    applied = run_kubectl(kubectl, dev_cluster.kubeconfig, "apply", "-f", "-", stdin=identities)
    assert applied.returncode == 0, applied.stderr
    yield docs
    run_kubectl(kubectl, dev_cluster.kubeconfig, "delete", "--wait=false", "-f", "-", stdin=identities)
    with contextlib.suppress(ApiException):
        dev_cluster.core_v1().delete_namespace(NAMESPACE)


def _token(core: client.CoreV1Api, identity: Identity) -> str:
    """The token the container gets: the kubelet requests one for the pod's account;
    kube-controller-manager fills in a token Secret."""
    if identity.source == "projected":
        request = {"spec": {"expirationSeconds": 3607}}
        return str(
            core.create_namespaced_service_account_token(identity.account, NAMESPACE, request).status.token
        )

    def filled() -> bool:
        return bool((core.read_namespaced_secret(identity.secret, NAMESPACE).data or {}).get("token"))

    wait_for(filled, 60, f"the token controller to fill Secret {identity.secret}")
    data = core.read_namespaced_secret(identity.secret, NAMESPACE).data
    assert base64.b64decode(data["namespace"]).decode() == NAMESPACE
    return base64.b64decode(data["token"]).decode()


def _as(admin_kubeconfig: Path, token: str, path: Path) -> Path:
    """A kubeconfig that is the token's holder, on the dev cluster's server."""
    admin: dict[str, Any] = yaml.safe_load(admin_kubeconfig.read_text())
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "dev", "cluster": admin["clusters"][0]["cluster"]}],
        "users": [{"name": "holder", "user": {"token": token}}],
        "contexts": [{"name": "holder", "context": {"cluster": "dev", "user": "holder"}}],
        "current-context": "holder",
    }
    path.write_text(json.dumps(config))
    return path


@pytest.fixture(scope="module")
def tokens(dev_cluster: Any, chart: list[dict[str, Any]]) -> dict[str, str]:
    """Each container's token."""
    core = dev_cluster.core_v1()
    found = {}
    for container, identity in container_identities(chart).items():
        assert identity is not None, f"{container}: no token (this table expects one)"
        found[container] = _token(core, identity)
    return found


@pytest.fixture(scope="module")
def kubeconfigs(
    dev_cluster: Any, tokens: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    """Each container's token in a kubeconfig of the dev cluster."""
    folder = tmp_path_factory.mktemp("tokens")
    return {c: _as(dev_cluster.kubeconfig, token, folder / c) for c, token in tokens.items()}


@pytest.fixture(scope="module")
def effective(kubeconfigs: dict[str, Path]) -> dict[str, dict[str, Any]]:
    """Per container: its account's name as the API server authenticates its token, and
    its resource grants and non-resource rules per namespace (SelfSubjectRulesReview)."""
    found: dict[str, dict[str, Any]] = {}
    for container, kubeconfig in kubeconfigs.items():
        with kube.api_client(kubeconfig) as api:
            who = client.AuthenticationV1Api(api).create_self_subject_review({})
            reviews = {
                namespace: api.sanitize_for_serialization(
                    client.AuthorizationV1Api(api).create_self_subject_rules_review(
                        {"spec": {"namespace": namespace}}
                    )
                )["status"]
                for namespace in (NAMESPACE, ELSEWHERE)
            }
        found[container] = {
            "user": who.status.user_info.username,
            "grants": {
                namespace: {g for g in flatten(review["resourceRules"]) if not g[1].startswith("selfsubject")}
                for namespace, review in reviews.items()
            },
            "non_resource": {
                (url, verb)
                for rule in reviews[ELSEWHERE]["nonResourceRules"]
                for url in rule["nonResourceURLs"]
                for verb in rule["verbs"]
            },
        }
    return found


def test_each_container_authenticates_as_its_own_account(effective: dict[str, dict[str, Any]]) -> None:
    assert {c: e["user"] for c, e in effective.items()} == {
        "scheduler": f"system:serviceaccount:{NAMESPACE}:{FULLNAME}",
        "trainer": f"system:serviceaccount:{NAMESPACE}:{FULLNAME}-trainer",
    }


@pytest.mark.parametrize(
    ("container", "namespace", "group", "resource", "verb", "name", "allowed"),
    RIGHTS,
    ids=[f"{r[0]}-{r[4]}-{r[2] or 'core'}/{r[3]}{'/' + r[5] if r[5] else ''}-in-{r[1]}" for r in RIGHTS],
)
def test_each_containers_token_may_do_what_the_table_says(
    effective: dict[str, dict[str, Any]],
    container: str,
    namespace: str,
    group: str,
    resource: str,
    verb: str,
    name: str,
    allowed: bool,
) -> None:
    grants = effective[container]["grants"][namespace]
    assert allows(grants, group, resource, verb, name) is allowed


def test_each_token_has_its_roles_rules_and_no_more(
    effective: dict[str, dict[str, Any]], chart: list[dict[str, Any]]
) -> None:
    def rules(kind: str, name: str) -> list[dict[str, Any]]:
        return next(d for d in chart if d["kind"] == kind and d["metadata"]["name"] == name)["rules"]

    # policy versions: the scheduler's read (and status.current) cluster-wide, the
    # trainer's writes in the release namespace
    scheduler = flatten(rules("ClusterRole", FULLNAME)) | flatten(
        rules("ClusterRole", f"{FULLNAME}-policy-versions")
    )
    leader_election = flatten(rules("Role", f"{FULLNAME}-leader-election"))
    trainer = flatten(rules("ClusterRole", f"{FULLNAME}-trainer"))
    publishing = flatten(rules("Role", f"{FULLNAME}-policy-versions-trainer"))
    assert effective["scheduler"]["grants"] == {ELSEWHERE: scheduler, NAMESPACE: scheduler | leader_election}
    assert effective["trainer"]["grants"] == {ELSEWHERE: trainer, NAMESPACE: trainer | publishing}
    # the trainer reads the scheduler's /metrics (rollbacks): the metrics reader's rule
    assert ("/metrics", "get") in effective["trainer"]["non_resource"]
    assert ("/metrics", "get") not in effective["scheduler"]["non_resource"]


def test_the_copy_of_kube_schedulers_roles_is_the_api_servers(dev_cluster: Any) -> None:
    """rbac.yaml's comparison (tests/deploy/test_chart_identity.py) uses KUBE_ROLES."""
    with kube.api_client(dev_cluster.kubeconfig) as api:
        rbac = client.RbacAuthorizationV1Api(api)
        served: dict[str, set[Grant]] = {
            name: flatten(api.sanitize_for_serialization(rbac.read_cluster_role(name))["rules"])
            for name in KUBE_ROLES
        }
    assert served == KUBE_ROLES


def test_the_trainers_calls_succeed_with_its_token(
    kubeconfigs: dict[str, Path], tokens: dict[str, str]
) -> None:
    """The trainer's own code with its token: the node listing (the twin) and the
    delegated auth of its /metrics (TokenReview, SubjectAccessReview) are allowed; its
    token may read the scheduler's /metrics, the scheduler's token may not."""
    from scheduler.k8s.serving.delegated_auth import ALLOWED, delegated_auth  # noqa: PLC0415
    from scheduler.online.cli import _api_client, _nodes_from_api  # noqa: PLC0415

    api_client = _api_client(kubeconfigs["trainer"])
    try:
        _nodes_from_api(api_client)()  # raises on a 403
        auth = delegated_auth(api_client, (5, 30))
        try:
            trainer = asyncio.run(auth.check("/metrics", f"Bearer {tokens['trainer']}"))
            scheduler = asyncio.run(auth.check("/metrics", f"Bearer {tokens['scheduler']}"))
        finally:
            auth.close()
    finally:
        api_client.close()
    assert trainer == ALLOWED
    assert scheduler.status == 403, scheduler
