"""The local control plane as a fixture's body (``tests/conftest.py``'s ``dev_cluster``,
and a module's own where it needs a control plane to itself)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from devcluster.testing import DevCluster


def local_cluster(request: pytest.FixtureRequest, suffix: str = "") -> Iterator[DevCluster]:
    """A fixture's body: the local control plane named after the session (and
    ``suffix``, for a module's own), up for the fixture's scope."""
    # Imported here so unit tests run without the Kubernetes client installed.
    from devcluster import cluster  # noqa: PLC0415
    from devcluster.testing import DevCluster  # noqa: PLC0415

    # One cluster per xdist worker: a shared name would have workers stop each other's.
    name = os.environ.get("RL_DEVCLUSTER_TEST_NAME", "rl-test") + suffix
    workerinput = getattr(request.config, "workerinput", None)
    if workerinput:
        name = f"{name}-{workerinput['workerid']}"
    info = cluster.up(cluster.ClusterConfig(name=name))
    try:
        yield DevCluster(info)
    finally:
        if os.environ.get("RL_DEVCLUSTER_KEEP") != "1":
            cluster.down(name)
