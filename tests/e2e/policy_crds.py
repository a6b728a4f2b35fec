"""The chart's policy version CRDs on the dev cluster, for the tests that publish
through them (test_policy_versions.py, test_online_learning.py)."""

from __future__ import annotations

from pathlib import Path

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from scheduler.k8s.scheduling.policy_versions import KubePolicyObjects
from scheduler.online.store_crd import API_VERSION, CHANNELS, GROUP, VERSIONS
from tests.e2e.support import ensure_namespace, wait_for

CRDS = Path(__file__).resolve().parents[2] / "helm" / "rl-scheduler" / "crds"


def ensure_crd(api_client: client.ApiClient, file: Path) -> None:
    """A CRD of the chart, created or replaced, and established."""
    extensions = client.ApiextensionsV1Api(api_client)
    crd = yaml.safe_load(file.read_text())
    try:
        extensions.create_custom_resource_definition(crd)
    except ApiException as error:
        if error.status != 409:
            raise
        existing = extensions.read_custom_resource_definition(crd["metadata"]["name"])
        crd["metadata"]["resourceVersion"] = existing.metadata.resource_version if existing.metadata else None
        extensions.replace_custom_resource_definition(crd["metadata"]["name"], crd)

    def established() -> bool:
        status = extensions.read_custom_resource_definition(crd["metadata"]["name"]).status
        conditions = (status.conditions if status is not None else None) or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    wait_for(established, 60, f"CRD {crd['metadata']['name']} to be established")


def fresh_policy_objects(
    api_client: client.ApiClient, core: client.CoreV1Api, namespace: str
) -> KubePolicyObjects:
    """The CRDs installed, ``namespace`` there and holding no policy version or channel."""
    for name in ("policyversions.yaml", "policychannels.yaml"):
        ensure_crd(api_client, CRDS / name)
    ensure_namespace(core, namespace)
    custom = client.CustomObjectsApi(api_client)
    for plural in (VERSIONS, CHANNELS):
        custom.delete_collection_namespaced_custom_object(GROUP, API_VERSION, namespace, plural)
    return KubePolicyObjects(api_client, namespace)


def scheduler_env(namespace: str, channel: str, cache: Path) -> dict[str, str]:
    """A scheduler's environment to follow ``channel`` in ``namespace``."""
    return {
        "RL_SCHEDULER_POLICY_VERSIONS__NAMESPACE": namespace,
        "RL_SCHEDULER_POLICY_VERSIONS__CHANNEL": channel,
        "RL_SCHEDULER_POLICY_VERSIONS__CACHE_DIR": str(cache),
    }
