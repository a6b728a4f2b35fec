"""A DRA pod on a real kubelet: rl-scheduler allocates the claim, the kubelet has the
driver prepare it, and the container sees what the driver's CDI spec injects.

The driver is Kubernetes' own DRA test driver (``dra-test-driver kubelet-plugin``,
``devcluster.realnode.dra``), registered with the node's kubelet through its plugin
registry; it publishes four devices in a ResourceSlice for the node and, on
NodePrepareResources, writes a CDI spec that sets environment variables in the
containers using the claim: ``claim_<claim>_<request>=true``, ``admin_<key>`` for the
DeviceClass's opaque parameters and ``user_<key>`` for the claim's. containerd (1.7,
``enable_cdi``) applies the spec. What only a node decides: the claim is prepared,
the container starts with those variables, and deleting the pod unprepares the claim.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from devcluster.realnode import dra, node
from devcluster.realnode.config import NodeLayout
from tests.realnode.conftest import CLUSTER_NAME
from tests.realnode.support import RealCluster, wait_for

pytestmark = pytest.mark.realnode
REQUEST = "gpu"
CLASS_PARAMETERS = {"vendor_note": "from-the-class"}  # -> admin_vendor_note in the container
CLAIM_PARAMETERS = {"model": "rl-test"}  # -> user_model in the container
_METHOD = r'method="[^"]*/{}"'


@pytest.fixture
def resource(real_cluster: RealCluster) -> client.ResourceV1Api:
    return client.ResourceV1Api(real_cluster.api_client())


@pytest.fixture
def driver(real_cluster: RealCluster, resource: client.ResourceV1Api) -> Iterator[NodeLayout]:
    """The test driver on the real node, its ResourceSlice published; stopped after."""
    layout = node.layout_of(CLUSTER_NAME)
    start = time.monotonic()
    dra.start_driver(layout, real_cluster.kubeconfig)
    try:
        wait_for(lambda: node_slices(resource, real_cluster.node_name), 60, "the driver's ResourceSlice")
        print(f"\nDRA test driver registered and its slice published in {time.monotonic() - start:.1f} s")
        yield layout
    finally:
        dra.stop_driver(layout)
        print("driver log (tail):\n" + dra.driver_log(layout)[-3000:])


@pytest.fixture
def device_class(resource: client.ResourceV1Api, scratch: str) -> Iterator[str]:
    """A class of the driver's devices, with opaque parameters the driver turns into env."""
    name = f"{scratch}-test-driver"
    resource.create_device_class(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {
                "selectors": [{"cel": {"expression": f'device.driver == "{dra.DRIVER_NAME}"'}}],
                "config": [{"opaque": {"driver": dra.DRIVER_NAME, "parameters": CLASS_PARAMETERS}}],
            },
        }
    )
    try:
        yield name
    finally:
        resource.delete_device_class(name)


def node_slices(resource: client.ResourceV1Api, node_name: str) -> list[Any]:
    slices = resource.list_resource_slice(field_selector=f"spec.nodeName={node_name}").items
    return [s for s in slices if s.spec.driver == dra.DRIVER_NAME]


def claim_template(name: str, device_class: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": REQUEST, "exactly": {"deviceClassName": device_class}}],
                    "config": [
                        {
                            "requests": [REQUEST],
                            "opaque": {"driver": dra.DRIVER_NAME, "parameters": CLAIM_PARAMETERS},
                        }
                    ],
                }
            }
        },
    }


def dra_pod(name: str, template: str, image: str) -> dict[str, Any]:
    """Prints the variables the driver injected, then stays up until deleted."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": "rl-scheduler",
            "terminationGracePeriodSeconds": 1,
            "resourceClaims": [{"name": REQUEST, "resourceClaimTemplateName": template}],
            "containers": [
                {
                    "name": "c",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "command": ["sh", "-c", "env | grep -E '^(claim|admin|user)_' | sort; exec sleep 3600"],
                    "resources": {
                        "requests": {"cpu": "10m", "memory": "16Mi"},
                        "limits": {"memory": "64Mi"},
                        "claims": [{"name": REQUEST}],
                    },
                }
            ],
        },
    }


def running(core: client.CoreV1Api, namespace: str, name: str) -> Any:
    pod = core.read_namespaced_pod(name, namespace)
    statuses = pod.status.container_statuses or []
    return pod if statuses and statuses[0].state.running is not None else None


def log_lines(layout: NodeLayout, method: str, needle: str) -> list[str]:
    """The driver's log lines for gRPC ``method`` that mention ``needle`` (a claim uid)."""
    pattern = re.compile(_METHOD.format(method))
    return [line for line in dra.driver_log(layout).splitlines() if pattern.search(line) and needle in line]


def claim_gone_or_released(resource: client.ResourceV1Api, namespace: str, name: str) -> str:
    """'deleted' or 'released' once no pod holds the claim (the resourceclaim controller
    deletes a template's claim with its pod), '' while one still does."""
    try:
        claim = resource.read_namespaced_resource_claim(name, namespace)
    except ApiException as error:
        if error.status == 404:
            return "deleted"
        raise
    return "released" if not (claim.status and claim.status.reserved_for) else ""


def test_a_dra_pod_is_prepared_runs_with_the_cdi_edits_and_is_unprepared(
    real_cluster: RealCluster,
    core: client.CoreV1Api,
    resource: client.ResourceV1Api,
    release: str,
    scratch: str,
    images: dict[str, str],
    driver: NodeLayout,
    device_class: str,
    tmp_path: Path,
) -> None:
    node_name = real_cluster.node_name
    [published] = node_slices(resource, node_name)
    devices = sorted(d.name for d in published.spec.devices)
    assert devices == [f"device-{i:02d}" for i in range(dra.DEVICES)], devices
    assert dra.registration_socket(driver).is_socket()

    # Through kubectl, as users create it: the API server keeps opaque parameters as the
    # bytes it was sent, and kubectl (like every Go client) sends compact JSON. The Python
    # client sends `{"model": "rl-test"}`; a JSON patch of such a claim, even of its
    # finalizers only, then fails "spec: Invalid value ... field is immutable" (the
    # re-encoded spec differs in bytes), and rl-scheduler's PreBind patches the claim.
    template = tmp_path / "one-gpu.json"
    template.write_text(json.dumps(claim_template("one-gpu", device_class)))
    real_cluster.kubectl("create", "--namespace", scratch, "--filename", str(template))
    created = time.monotonic()
    core.create_namespaced_pod(scratch, dra_pod("dra", "one-gpu", images["scheduler"]))
    pod = wait_for(lambda: running(core, scratch, "dra"), 180, "the DRA pod running")
    print(f"\nDRA pod running {time.monotonic() - created:.1f} s after it was created")
    assert pod.spec.node_name == node_name

    # rl-scheduler allocated one of the node's devices and reserved the claim for the pod.
    [status] = pod.status.resource_claim_statuses
    claim_name = status.resource_claim_name
    claim = resource.read_namespaced_resource_claim(claim_name, scratch)
    allocation = claim.status.allocation
    [result] = allocation.devices.results
    assert (result.driver, result.pool, result.request) == (dra.DRIVER_NAME, node_name, REQUEST)
    assert result.device in devices
    [term] = allocation.node_selector.node_selector_terms
    assert [(f.key, f.operator, f.values) for f in term.match_fields] == [
        ("metadata.name", "In", [node_name])
    ]
    assert [(r.resource, r.name, r.uid) for r in claim.status.reserved_for] == [
        ("pods", "dra", pod.metadata.uid)
    ]
    # The class's and the claim's opaque config, copied into the allocation for the driver.
    configs = {c.source: c.opaque.parameters for c in allocation.devices.config}
    assert configs == {"FromClass": CLASS_PARAMETERS, "FromClaim": CLAIM_PARAMETERS}, configs

    # The kubelet had the driver prepare it: a NodePrepareResources call for the claim,
    # and the CDI spec the driver wrote for it on the node.
    uid = claim.metadata.uid
    assert log_lines(driver, "NodePrepareResources", uid), dra.driver_log(driver)[-3000:]
    [spec] = [p for p in dra.cdi_specs(driver) if uid in p.name]
    print(f"CDI spec {spec.name}: {spec.read_text()}")

    # The container runs with the variables that spec injects.
    expected = {
        f"{dra.claim_env_var(claim_name, REQUEST)}=true",
        *(f"admin_{k}={v}" for k, v in CLASS_PARAMETERS.items()),
        *(f"user_{k}={v}" for k, v in CLAIM_PARAMETERS.items()),
    }

    def printed() -> set[str]:
        lines = set(core.read_namespaced_pod_log("dra", scratch, container="c").splitlines())
        return lines if expected <= lines else set()

    lines = wait_for(printed, 30, "the container's env in its log")
    assert lines == expected, lines

    # Deleting the pod unprepares the claim: the driver removes its CDI spec, and the
    # claim is released (deleted with its pod, as the claim of a template is).
    core.delete_namespaced_pod("dra", scratch, grace_period_seconds=1)
    deleted = time.monotonic()
    wait_for(lambda: log_lines(driver, "NodeUnprepareResources", uid), 90, "NodeUnprepareResources")
    assert not Path(spec).exists()
    outcome = wait_for(
        lambda: claim_gone_or_released(resource, scratch, claim_name), 60, "the claim released"
    )
    print(f"claim unprepared and {outcome} {time.monotonic() - deleted:.1f} s after the pod's delete")
