"""The real-node tier: a control plane with one real kubelet node, the chart's images
built with podman and loaded into the node, and the chart installed as a user would.

Tests carry ``@pytest.mark.realnode`` (CI runs them as root: ``make real-node-tests``).
The cluster is started once per session and torn down after it; the teardown checks
that the machine is as it was (sysctls, iptables, mounts, links, network namespaces),
and fails the session otherwise.

The chart runs with its defaults (the ``fgd-reserve`` profile, no trainer) plus a
second profile, ``rl-scheduler-gnn`` with the learned policy (``preset: gnn``), reading
the empty policy store on the shared volume: the one process serves both. The trainer
sidecar needs the trainer image (torch from PyPI: a 10-minute build and several GB
here), so only ``RL_REAL_NODE_TRAINER=1`` builds it and enables the trainer, which
publishes into that store.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from devcluster.binaries import Binaries
from tests.realnode.support import (
    RealCluster,
    host_fingerprint,
    install_chart,
    uninstall_chart,
)

REALNODE_MARKER = "realnode"
WITH_TRAINER = os.environ.get("RL_REAL_NODE_TRAINER") == "1"
CLUSTER_NAME = "rl-real"
RELEASE = "rl-scheduler"
NAMESPACE = "rl-scheduler"
LEARNED_SCHEDULER = "rl-scheduler-gnn"  # the profile with the learned policy added to the defaults


@pytest.fixture(autouse=True)
def _real_cluster_for_marked_tests(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker(REALNODE_MARKER):
        request.getfixturevalue("real_cluster")


@pytest.fixture(scope="session")
def real_cluster() -> Iterator[RealCluster]:
    """The control plane and its real node, Ready; the machine restored afterwards."""
    from devcluster import cluster  # noqa: PLC0415 - only this tier needs it

    before = host_fingerprint()
    start = time.monotonic()
    info = cluster.up(cluster.ClusterConfig(name=CLUSTER_NAME, real_node=True))
    print(f"\nreal-node cluster up in {time.monotonic() - start:.1f} s")
    try:
        yield RealCluster(info.kubeconfig, Binaries.in_cache(), f"{CLUSTER_NAME}-node")
    finally:
        if os.environ.get("RL_DEVCLUSTER_KEEP") != "1":
            cluster.down(CLUSTER_NAME)
            after = host_fingerprint()
            changed = {key: (before[key], after[key]) for key in before if before[key] != after[key]}
            assert not changed, f"the real node left the machine changed: {changed}"


@pytest.fixture(scope="session")
def images(real_cluster: RealCluster) -> dict[str, str]:
    """The chart's images, built (podman's cache makes a rebuild cheap) and in the node."""
    from devcluster.realnode import images as node_images  # noqa: PLC0415
    from devcluster.realnode import node  # noqa: PLC0415

    names = ["scheduler", "trainer"] if WITH_TRAINER else ["scheduler"]
    start = time.monotonic()
    node_images.build(*names)
    built = time.monotonic()
    socket = node.layout_of(CLUSTER_NAME).containerd_socket
    refs = {}
    for name in names:
        result = node_images.import_image(socket, name)
        refs[name] = result.ref
    print(f"\nimages {names}: built in {built - start:.1f} s, imported in {time.monotonic() - built:.1f} s")
    return refs


@pytest.fixture(scope="session")
def core(real_cluster: RealCluster) -> client.CoreV1Api:
    return real_cluster.core_v1()


@pytest.fixture(scope="session")
def release(real_cluster: RealCluster, images: dict[str, str]) -> Iterator[str]:
    """The chart installed with its defaults, plus the learned profile reading the policy
    store on the shared volume (and the trainer with RL_REAL_NODE_TRAINER=1)."""
    values: dict[str, Any] = {
        "settings.profiles": [{"schedulerName": LEARNED_SCHEDULER, "preset": "gnn"}],
        "settings.policy_store": "/var/lib/rl-scheduler/policies",
    }
    if WITH_TRAINER:
        values["trainer.enabled"] = True
    start = time.monotonic()
    install_chart(real_cluster, RELEASE, NAMESPACE, values)
    print(f"\nhelm install --wait: {time.monotonic() - start:.1f} s")
    try:
        yield NAMESPACE
    finally:
        uninstall_chart(real_cluster, RELEASE, NAMESPACE)


@pytest.fixture
def scratch(core: client.CoreV1Api, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace for one test's workload, deleted with everything in it afterwards."""
    name = f"work-{abs(hash(request.node.nodeid)) % 10**6}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    try:
        yield name
    finally:
        core.delete_namespace(name, grace_period_seconds=0)
