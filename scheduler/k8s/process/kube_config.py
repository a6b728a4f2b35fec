"""A KubeSchedulerConfiguration file (``kubescheduler.config.k8s.io/v1``) as settings.

What rl-scheduler implements of it is taken over; every other field is refused with
its path, so a configuration never silently means less than it says:

| KubeSchedulerConfiguration                   | rl-scheduler setting                       |
|----------------------------------------------|--------------------------------------------|
| ``profiles``                                 | ``profiles`` (the first one's schedulerName |
|                                              | is ``scheduler_name``)                     |
| ``clientConnection.kubeconfig/qps/burst``    | ``client.kubeconfig/qps/burst``            |
| ``leaderElection.leaderElect``               | ``leader_election.enabled``                |
| ``leaderElection.leaseDuration/renewDeadline/retryPeriod`` | ``leader_election.*_s``      |
| ``leaderElection.resourceName/resourceNamespace`` | ``leader_election.name/namespace``    |
| ``leaderElection.resourceLock``              | ``leases`` only                            |
| ``percentageOfNodesToScore``                 | 100 only (every feasible node is scored)   |

Without ``profiles`` there is one profile, ``default-scheduler`` with kube's default
plugins, as in kube-scheduler.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from scheduler.errors import SchedulerInputError

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"

# Fields of kube-scheduler v1.36's KubeSchedulerConfiguration that rl-scheduler does not
# implement (anything else unknown is not a field of it at all).
NOT_SUPPORTED = (
    "parallelism",
    "podInitialBackoffSeconds",
    "podMaxBackoffSeconds",
    "extenders",
    "delayCacheUntilActive",
    "enableProfiling",
    "enableContentionProfiling",
)
CLIENT = {"kubeconfig": "kubeconfig", "qps": "qps", "burst": "burst"}
CLIENT_NOT_SUPPORTED = ("acceptContentTypes", "contentType")
LEADER_DURATIONS = {
    "leaseDuration": "lease_duration_s",
    "renewDeadline": "renew_deadline_s",
    "retryPeriod": "retry_period_s",
}
LEADER_NAMES = {"resourceName": "name", "resourceNamespace": "namespace"}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


class KubeConfigError(SchedulerInputError):
    """A KubeSchedulerConfiguration field that is malformed or not implemented."""


def is_kube_scheduler_configuration(document: Mapping[str, Any]) -> bool:
    return document.get("kind") == KIND or str(document.get("apiVersion", "")).startswith(
        "kubescheduler.config.k8s.io/"
    )


def parse_duration(text: Any, where: str, field: str) -> float:
    """Seconds of a Go duration (``15s``, ``1m30s``, ``500ms``)."""
    value = str(text)
    if not value or _DURATION.sub("", value) != "":
        raise KubeConfigError(where, field, f"expected a duration such as 15s, got {text!r}")
    return sum(float(n) * _UNIT_S[unit] for n, unit in _DURATION.findall(value))


def _mapping(value: Any, where: str, field: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise KubeConfigError(where, field, "expected a mapping")
    return value


def _client(value: Any, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in _mapping(value, where, "clientConnection").items():
        path = f"clientConnection.{key}"
        if key in CLIENT:
            out[CLIENT[key]] = item
        elif key in CLIENT_NOT_SUPPORTED:
            raise KubeConfigError(where, path, "not supported by rl-scheduler")
        else:
            raise KubeConfigError(where, path, "unknown field")
    return out


def _leader_election(value: Any, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in _mapping(value, where, "leaderElection").items():
        path = f"leaderElection.{key}"
        if key == "leaderElect":
            out["enabled"] = item
        elif key in LEADER_DURATIONS:
            out[LEADER_DURATIONS[key]] = parse_duration(item, where, path)
        elif key in LEADER_NAMES:
            out[LEADER_NAMES[key]] = item
        elif key == "resourceLock":
            if item != "leases":
                raise KubeConfigError(where, path, f"rl-scheduler takes a Lease (leases), not {item!r}")
        else:
            raise KubeConfigError(where, path, "unknown field")
    return out


def settings_values(document: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The settings a KubeSchedulerConfiguration document stands for."""
    if document.get("apiVersion") != API_VERSION:
        raise KubeConfigError(
            where, "apiVersion", f"expected {API_VERSION}, got {document.get('apiVersion')!r}"
        )
    if document.get("kind") != KIND:
        raise KubeConfigError(where, "kind", f"expected {KIND}, got {document.get('kind')!r}")
    values: dict[str, Any] = {}
    for key, value in document.items():
        if key in ("apiVersion", "kind"):
            continue
        if key == "profiles":
            if not isinstance(value, list):
                raise KubeConfigError(where, key, "expected a list of profiles")
            values["profiles"] = value
        elif key == "clientConnection":
            values["client"] = _client(value, where)
        elif key == "leaderElection":
            values["leader_election"] = _leader_election(value, where)
        elif key == "percentageOfNodesToScore":
            if value != 100:
                raise KubeConfigError(
                    where, key, "not supported by rl-scheduler (it scores every feasible node): only 100"
                )
        elif key in NOT_SUPPORTED:
            raise KubeConfigError(where, key, "not supported by rl-scheduler")
        else:
            raise KubeConfigError(where, key, "unknown field")
    profiles = values.setdefault("profiles", [{}])
    first = profiles[0] if profiles and isinstance(profiles[0], Mapping) else {}
    values["scheduler_name"] = first.get("schedulerName") or "default-scheduler"
    return values
