"""The API server decides what our readers must survive: fuzzed pods and nodes are
sent to it with dryRun=All, and whatever it accepts, in the form it would store, is
read by rl-scheduler's readers or refused with our input error, within the unit
tier's time and memory bound (``tests/unit/test_readers_fuzz.py``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from scheduler.errors import SchedulerInputError
from scheduler.objects.node_manifest import node_from_manifest
from scheduler.objects.pod_manifest import pod_from_manifest
from tests.unit.test_readers_fuzz import NUMBERISH, within_bounds

pytestmark = pytest.mark.cluster
# Quantities with exponents up to 9999, and the stored extremes (1e1048577 and the
# like): a long mantissa times a 7-digit exponent costs the API server more than its
# request timeout (504 after a minute), which tests it, not us.
QUANTITY = st.one_of(
    st.from_regex(
        r"[+-]?[0-9]{0,30}(\.[0-9]{0,20})?([eE][+-]?[0-9]{1,4}|Ki|Mi|Gi|Ei|m|k|M|G|E|n|u)?", fullmatch=True
    ),
    st.sampled_from(["1" * 5000, "100e1048575", "1e1048577", "1e-1048577", "1e400"]),
)
RESOURCES = ["cpu", "memory", "ephemeral-storage", "example.com/widget", "hugepages-2Mi"]
LABEL_VALUE = st.from_regex(r"([A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?", fullmatch=True)
ANNOTATION = st.one_of(st.text(max_size=200), NUMBERISH)


ACCEPTED: Counter[str] = Counter()


@pytest.fixture(scope="module")
def core(dev_cluster: Any) -> Iterator[client.CoreV1Api]:
    api: client.CoreV1Api = dev_cluster.core_v1()
    yield api
    # Not vacuous: the API server stored some of the fuzzed objects of each kind.
    assert ACCEPTED["Pod"] > 0, ACCEPTED
    assert ACCEPTED["Node"] > 0, ACCEPTED


def stored(core: client.CoreV1Api, create: Any) -> dict[str, Any] | None:
    """The object as the API server would store it, or None when it refuses it."""
    try:
        created = create()
    except ApiException as error:
        # 504: the API server gave up on it (a quantity such as 1.2E1230640 costs it
        # more than its request timeout): not stored either.
        if error.status in (400, 422, 504):
            return None
        raise
    result: dict[str, Any] = core.api_client.sanitize_for_serialization(created)
    ACCEPTED[result["kind"]] += 1
    return result


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    requests=st.dictionaries(st.sampled_from(RESOURCES), QUANTITY, max_size=3),
    limits=st.dictionaries(st.sampled_from(RESOURCES), QUANTITY, max_size=3),
    labels=st.dictionaries(st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True), LABEL_VALUE, max_size=3),
    annotations=st.dictionaries(
        st.sampled_from(["hami.io/vgpu-devices-allocated", "nvidia.com/use-gputype", "x"]),
        ANNOTATION,
        max_size=2,
    ),
)
def test_pods_the_api_server_accepts_are_read_or_refused_with_our_error(
    core: client.CoreV1Api,
    requests: dict[str, str],
    limits: dict[str, str],
    labels: dict[str, str],
    annotations: dict[str, str],
) -> None:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "fuzzed", "namespace": "default", "labels": labels, "annotations": annotations},
        "spec": {
            "schedulerName": "rl-scheduler",
            "containers": [
                {"name": "c", "image": "x", "resources": {"requests": requests, "limits": limits}}
            ],
        },
    }
    manifest = stored(core, lambda: core.create_namespaced_pod("default", body, dry_run="All"))
    if manifest is not None:
        within_bounds(lambda: pod_from_manifest(manifest), (SchedulerInputError,))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    capacity=st.dictionaries(st.sampled_from([*RESOURCES, "nvidia.com/gpu", "pods"]), QUANTITY, max_size=4),
    annotations=st.dictionaries(
        st.sampled_from(["hami.io/node-nvidia-register", "hami.io/mutex.lock"]), ANNOTATION, max_size=2
    ),
)
def test_nodes_the_api_server_accepts_are_read_or_refused_with_our_error(
    core: client.CoreV1Api, capacity: dict[str, str], annotations: dict[str, str]
) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "fuzzed-node", "annotations": annotations},
        "status": {"capacity": capacity, "allocatable": capacity},
    }
    manifest = stored(core, lambda: core.create_node(body, dry_run="All"))
    if manifest is not None:
        # A node's status is written by its kubelet; create keeps what we sent there.
        manifest.setdefault("status", {}).update(body["status"])
        within_bounds(lambda: node_from_manifest(manifest), (SchedulerInputError,))
