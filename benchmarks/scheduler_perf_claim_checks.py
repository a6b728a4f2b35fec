"""Whether the DRA claims of the pods a scheduler bound hold, checked on the objects the
API server returns (plain JSON), independently of both schedulers:

- each claim a bound pod names (``resourceClaimName``, or the claim made from its
  template, ``status.resourceClaimStatuses``) exists and is allocated for the pod's node:
  its devices are on that node's slices, satisfy their class' and request's selectors and
  counts and ``matchAttribute`` constraints, its node selector admits the node, and the
  pod is in ``reservedFor``;
- no device is in the allocations of two claims (admin access aside).

The allocation checks are ``tests/e2e/dra_checker.py``'s, which evaluates the selectors
with cel-expr-python and does not use rl-scheduler's allocator (only kube's CEL function
library from ``scheduler.dra.cel_library``). Each broken constraint is one line naming the
pod or the device.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from throughput_schedulers import REPO

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from tests.e2e import dra_checker

Json = dict[str, Any]


def pod_claim_names(pod: Json) -> list[tuple[str, str | None]]:
    """``(entry, claim name)`` for each of the pod's ``resourceClaims`` (None: a claim its
    template has not made yet)."""
    made = {
        s["name"]: s.get("resourceClaimName")
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
    }
    names: list[tuple[str, str | None]] = []
    for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
        names.append((entry["name"], entry.get("resourceClaimName") or made.get(entry["name"])))
    return names


def broken_claim_constraints(
    pods: Iterable[Json],
    nodes: Iterable[Json],
    claims: Iterable[Json],
    classes: Iterable[Json],
    slices: Sequence[Json],
) -> list[str]:
    """One line per broken rule (empty: every bound pod's claims hold)."""
    labels = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in nodes}
    all_claims = list(claims)
    by_key = {(c["metadata"]["namespace"], c["metadata"]["name"]): c for c in all_claims}
    by_class: Mapping[str, Json] = {c["metadata"]["name"]: c for c in classes}
    users: dict[tuple[str, str], dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    broken = []
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            continue
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        for entry, claim_name in pod_claim_names(pod):
            if claim_name is None or (namespace, claim_name) not in by_key:
                broken.append(
                    f"pod {namespace}/{name} on {node}: claim {entry} ({claim_name}) does not exist"
                )
                continue
            users[(namespace, claim_name)][node].append(pod["metadata"]["uid"])
    for key, on_nodes in sorted(users.items()):
        for node, uids in sorted(on_nodes.items()):
            problems = dra_checker.check_claim(
                by_key[key], by_class, slices, node, labels.get(node, {}), uids
            )
            broken += [f"{key[0]}/{problem} (pods on {node})" for problem in problems]
    qualified = [{**c, "metadata": {**c["metadata"], "name": "/".join(key)}} for key, c in by_key.items()]
    twice = dra_checker.devices_given_twice(qualified)
    broken += [f"device {'/'.join(device)} allocated to two claims" for device in twice]
    return broken
