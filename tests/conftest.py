"""Shared fixtures. `dev_cluster` brings up the local control plane once per session;
`ray_cluster` a local Ray cluster.

Tests that need it carry `@pytest.mark.cluster` (which pulls the fixture in) or ask
for `dev_cluster` directly. The fixture fails the test, loudly, when the cluster
cannot start: CI runs these tests and a skipped cluster test would hide a broken
control plane. RL_DEVCLUSTER_KEEP=1 leaves the cluster running after the session
for a look around (`python -m devcluster status --name rl-test`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.local_cluster import local_cluster

if TYPE_CHECKING:
    from devcluster.testing import DevCluster

CLUSTER_MARKER = "cluster"


@pytest.fixture(autouse=True)
def _cluster_for_marked_tests(request: pytest.FixtureRequest) -> None:
    # A marker cannot add a fixture after collection; asking for it by name can.
    if request.node.get_closest_marker(CLUSTER_MARKER):
        request.getfixturevalue("dev_cluster")


@pytest.fixture(scope="session")
def dev_cluster(request: pytest.FixtureRequest) -> Iterator[DevCluster]:
    """A running cluster (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
    kwok) on 127.0.0.1, with no nodes but those the tests make."""
    yield from local_cluster(request)


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[str]:
    """A local Ray cluster (``ray start --head``, 2 CPUs; ``tests/ray_cluster.py``) for
    the session: its address. Like the control plane, it fails the test, never skips
    it, when it cannot start."""
    from tests import ray_cluster as local_ray  # noqa: PLC0415

    cluster = local_ray.start()
    try:
        yield cluster.address
    finally:
        local_ray.stop(cluster)
