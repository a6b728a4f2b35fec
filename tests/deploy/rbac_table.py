"""RBAC as tables: kube-scheduler's own roles (a copy, checked against a live API
server by the cluster tests), the comparison table in the chart's rbac.yaml, which
token each container of the chart's pod gets, and whether a set of rules (as
SelfSubjectRulesReview answers them) allows a request."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tests.deploy.chart import CHART

TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
# An API rule flattened: (apiGroup, resource, resourceName or "", verb).
Grant = tuple[str, str, str, str]

# kube-scheduler v1.36's roles (bootstrap policy; `kubectl get clusterrole -o yaml` on
# kube-apiserver v1.36.4 with the GenericWorkload gate), one tuple per group, resource,
# name and verb.
_READ = ("get", "list", "watch")


def _rules(*rules: tuple[Iterable[str], Iterable[str], Iterable[str], Iterable[str]]) -> frozenset[Grant]:
    return frozenset(
        (group, resource, name, verb)
        for groups, resources, names, verbs in rules
        for group in groups
        for resource in resources
        for name in (tuple(names) or ("",))
        for verb in verbs
    )


KUBE_ROLES: dict[str, frozenset[Grant]] = {
    "system:kube-scheduler": _rules(
        (["", "events.k8s.io"], ["events"], [], ["create", "patch", "update"]),
        (["coordination.k8s.io"], ["leases"], [], ["create"]),
        (["coordination.k8s.io"], ["leases"], ["kube-scheduler"], ["get", "list", "update", "watch"]),
        (
            ["coordination.k8s.io"],
            ["leasecandidates"],
            [],
            ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
        ),
        ([""], ["nodes"], [], _READ),
        ([""], ["pods"], [], ["delete", *_READ]),
        ([""], ["bindings", "pods/binding"], [], ["create"]),
        ([""], ["pods/status"], [], ["patch", "update"]),
        ([""], ["replicationcontrollers", "services"], [], _READ),
        (["apps", "extensions"], ["replicasets"], [], _READ),
        (["apps"], ["statefulsets"], [], _READ),
        (["policy"], ["poddisruptionbudgets"], [], _READ),
        ([""], ["persistentvolumeclaims", "persistentvolumes"], [], _READ),
        (["authentication.k8s.io"], ["tokenreviews"], [], ["create"]),
        (["authorization.k8s.io"], ["subjectaccessreviews"], [], ["create"]),
        (["storage.k8s.io"], ["csinodes"], [], _READ),
        (["storage.k8s.io"], ["volumeattachments"], [], _READ),
        ([""], ["namespaces"], [], _READ),
        (["storage.k8s.io"], ["csidrivers"], [], _READ),
        (["storage.k8s.io"], ["csistoragecapacities"], [], _READ),
        (["resource.k8s.io"], ["deviceclasses"], [], _READ),
        (["resource.k8s.io"], ["resourceclaims"], [], ["patch", "update", *_READ]),
        (["resource.k8s.io"], ["resourceclaims/status"], [], ["patch", "update", *_READ]),
        ([""], ["pods/finalizers"], [], ["update"]),
        (["resource.k8s.io"], ["resourceslices"], [], _READ),
        (["resource.k8s.io"], ["resourceclaims"], [], ["create", "delete"]),
        (["resource.k8s.io"], ["resourceclaims/binding"], [], ["patch", "update"]),
        # With the GenericWorkload gate, as the dev cluster's API server runs.
        (["scheduling.k8s.io"], ["podgroups"], [], _READ),
        (["scheduling.k8s.io"], ["podgroups/status"], [], ["patch", "update"]),
    ),
    "system:volume-scheduler": _rules(
        ([""], ["persistentvolumes"], [], ["patch", "update", *_READ]),
        (["storage.k8s.io"], ["storageclasses"], [], _READ),
        ([""], ["persistentvolumeclaims"], [], ["patch", "update", *_READ]),
    ),
}
EXTRA = "extra"


def flatten(rules: Iterable[Mapping[str, Any]]) -> set[Grant]:
    """Resource rules (RBAC's or SelfSubjectRulesReview's) as grants."""
    return {
        (group, resource, name, verb)
        for rule in rules
        for group in rule.get("apiGroups") or [""]
        for resource in rule.get("resources") or []
        for name in rule.get("resourceNames") or [""]
        for verb in rule.get("verbs") or []
    }


def allows(grants: Iterable[Grant], group: str, resource: str, verb: str, name: str = "") -> bool:
    """Whether the grants allow the request, as RBAC matches one: ``*`` matches any
    group, resource or verb, and a rule with names only requests for one of them."""
    return any(
        g in ("*", group) and r in ("*", resource) and v in ("*", verb) and (not n or n == name)
        for g, r, n, v in grants
    )


@dataclass(frozen=True)
class TableRow:
    group: str
    resource: str
    one_name: bool  # "leases (one name)": the rule names the object
    verbs: tuple[str, ...]
    kube_role: str  # a key of KUBE_ROLES, or EXTRA
    why: str


def chart_table() -> list[TableRow]:
    """The comparison table in the comment at the top of templates/rbac.yaml."""
    text = (CHART / "templates" / "rbac.yaml").read_text()
    rows = []
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.split("|")[1:]]
        if len(cells) != 5 or cells[0] == "group" or set(cells[0]) <= {"-"}:
            continue
        group, resource, verbs, kube_role, why = cells
        one_name = resource.endswith("(one name)")
        rows.append(
            TableRow(
                group=group.strip('"'),
                resource=re.sub(r"\s*\(one name\)$", "", resource),
                one_name=one_name,
                verbs=tuple(verbs.split()),
                kube_role=kube_role,
                why=why,
            )
        )
    return rows


@dataclass(frozen=True)
class Identity:
    """What a container of the chart's pod authenticates as: ``account`` (a
    ServiceAccount of the release namespace) through a token ``source`` ("projected":
    the pod's own account, requested by the kubelet; "secret": a ServiceAccount token
    Secret, ``secret`` its name), or None (no token at all)."""

    account: str
    source: str
    secret: str = ""


def container_identities(docs: list[dict[str, Any]]) -> dict[str, Identity | None]:
    """Each container of the chart's Deployment and the identity its token is of."""
    pod = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    secrets = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Secret"}
    automount = pod.get("automountServiceAccountToken", True)
    found: dict[str, Identity | None] = {}
    for container in pod["containers"]:
        mounts = [m for m in container.get("volumeMounts", []) if m["mountPath"].startswith(TOKEN_PATH)]
        if not mounts:
            # the kubelet mounts the pod's account's token unless the pod says not to
            found[container["name"]] = Identity(pod["serviceAccountName"], "projected") if automount else None
            continue
        (mount,) = mounts
        volume = volumes[mount["name"]]
        if "projected" in volume:
            assert any("serviceAccountToken" in s for s in volume["projected"]["sources"]), volume
            found[container["name"]] = Identity(pod["serviceAccountName"], "projected")
        else:
            name = volume["secret"]["secretName"]
            secret = secrets[name]
            assert secret["type"] == "kubernetes.io/service-account-token", secret
            account = secret["metadata"]["annotations"]["kubernetes.io/service-account.name"]
            found[container["name"]] = Identity(account, "secret", name)
    return found
