"""Which HTTP client carries each request ``rl-scheduler run`` makes to a real API
server, counted inside the process while it starts, lists, watches and binds a pod:
every one goes over the scheduler's own HTTP/1.1 client (``scheduler.k8s.client.http1``,
its requests counted where ``encode_request`` writes them), none over urllib3 (the
official client's REST layer, loaded with its credential loader) nor ``http.client``.
kopf's own aiohttp session is the one exception, and stays: kopf watches namespaces
and reconciles PolicyVersions, which is what kopf is for; its requests are counted
and reported, not refused. And both drivers of that client reach the API server
through an HTTP proxy's CONNECT tunnel, as the official client would with the same
Configuration."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from scheduler.k8s.client.blocking import BlockingClient
from scheduler.k8s.client.credentials import load_configuration
from scheduler.k8s.client.transport import ApiTransport
from tests.e2e.support import SchedulerProcess, create_pods, replace_nodes, scratch_namespace, wait_for
from tests.e2e.workloads import mixed_nodes, pod
from tests.k8s.test_blocking import ConnectProxy

pytestmark = pytest.mark.cluster

# Imported by the interpreter before the scheduler (``sitecustomize`` on PYTHONPATH):
# wraps each library's request call, and writes the counts twice a second.
COUNTING = textwrap.dedent(
    """
    import json, os, threading, time
    counts = {"ours": 0, "urllib3": 0, "http.client": 0, "aiohttp (kopf)": 0}
    out = os.environ["RL_COUNT_REQUESTS_TO"]

    def counted(owner, name, key):
        original = getattr(owner, name)
        def wrapper(*args, **kwargs):
            counts[key] += 1
            return original(*args, **kwargs)
        setattr(owner, name, wrapper)

    import http.client
    counted(http.client.HTTPConnection, "request", "http.client")
    import urllib3.connectionpool
    counted(urllib3.connectionpool.HTTPConnectionPool, "urlopen", "urllib3")
    import aiohttp
    counted(aiohttp.ClientSession, "_request", "aiohttp (kopf)")
    # Before transport and blocking bind the name: every request of ours is written here.
    import scheduler.k8s.client.http1 as http1
    counted(http1, "encode_request", "ours")

    def write():
        while True:
            with open(out + ".tmp", "w") as f:
                json.dump(counts, f)
            os.replace(out + ".tmp", out)
            time.sleep(0.5)

    threading.Thread(target=write, daemon=True).start()
    """
)


@pytest.fixture(scope="module")
def core(dev_cluster: Any) -> client.CoreV1Api:
    api = dev_cluster.core_v1()
    replace_nodes(api, mixed_nodes(10))
    return api


@pytest.fixture
def namespace(core: client.CoreV1Api, request: pytest.FixtureRequest) -> Iterator[str]:
    with scratch_namespace(core, "stacks", request.node.nodeid) as name:
        yield name


def test_every_request_but_kopfs_goes_over_our_http_client(
    dev_cluster: Any, core: client.CoreV1Api, namespace: str, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(COUNTING)
    counts_file = tmp_path / "counts.json"
    name = "rl-http-stacks"
    scheduler = SchedulerProcess(
        name,
        Path(dev_cluster.kubeconfig),
        tmp_path / f"{name}.log",
        ("--profile", "fgd", "--no-leader-elect"),
        {
            "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
            "RL_COUNT_REQUESTS_TO": str(counts_file),
        },
    ).start()
    try:
        scheduler.wait_ready()
        create_pods(core, [pod("counted", namespace, name)])
        wait_for(
            lambda: bool(core.read_namespaced_pod("counted", namespace).spec.node_name), 60, "the pod to bind"
        )
        time.sleep(1.5)  # the bind's event and the next writes of the counts
        counts = json.loads(counts_file.read_text())
    finally:
        scheduler.stop()
    print(f"\nrequests by HTTP client: {counts}")
    assert counts["ours"] >= 10  # eight listings, two watches, the bind, its event, ...
    assert (counts["urllib3"], counts["http.client"]) == (0, 0), counts


def test_reads_watches_and_writes_go_through_a_connect_proxy(dev_cluster: Any, namespace: str) -> None:
    proxy = ConnectProxy()
    configuration = copy.copy(load_configuration(Path(dev_cluster.kubeconfig)))
    configuration.proxy = f"http://127.0.0.1:{proxy.port}"
    configuration.no_proxy = None
    api_client = client.ApiClient(configuration)
    http = BlockingClient(configuration, api_client)
    try:
        nodes = http.json("GET", "/api/v1/nodes?limit=1")
        assert nodes["kind"] == "NodeList"
        watched = b"".join(
            http.stream(f"/api/v1/namespaces/{namespace}/pods?watch=1&timeoutSeconds=1", (5, 10))
        )
        assert watched == b""  # no pods: the watch ends at its timeout, empty

        async def write() -> None:
            transport = ApiTransport(api_client, 2)
            config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "tunnelled"}}
            await transport.request("POST", f"/api/v1/namespaces/{namespace}/configmaps", config_map)
            await transport.close()

        asyncio.run(write())
        assert http.json("GET", f"/api/v1/namespaces/{namespace}/configmaps/tunnelled")["metadata"][
            "name"
        ] == ("tunnelled")
    finally:
        http.close()
        proxy.close()
    server = str(configuration.host).removeprefix("https://")
    assert len(proxy.asked) >= 2
    assert all(head.startswith(f"CONNECT {server} HTTP/1.1".encode()) for head in proxy.asked)
