"""The writes the scheduler makes per pod (the bind, with HAMi's annotations and label on
the Binding, event, PodScheduled condition) and the node lock's, as the API server sees
them, through ``KubeApi``'s HTTP/1.1 transport (its only way to write)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from scheduler.k8s.client.api import BindOutcome, KubeApi
from scheduler.k8s.process.settings import ClientSettings
from scheduler.objects.pod import Pod
from scheduler.resources.hami import NODE_LOCK_ANNOTATION, VGPU_NODE
from tests.e2e.support import delete_namespace_pods, ensure_namespace, run_then_close
from tests.e2e.workloads import pod

pytestmark = pytest.mark.cluster
NAMESPACE = "api-writes"
UNSCHEDULABLE = "0/3 nodes are available: 3 Insufficient cpu."


def created(core: client.CoreV1Api, name: str) -> Pod:
    manifest = core.create_namespaced_pod(NAMESPACE, pod(name, NAMESPACE, "nobody")).metadata
    return Pod(name=manifest.name, namespace=NAMESPACE, uid=manifest.uid)


def test_bind_event_and_condition_reach_the_api_server(dev_cluster: Any) -> None:
    core = dev_cluster.core_v1()
    ensure_namespace(core, NAMESPACE)
    delete_namespace_pods(core, NAMESPACE)  # from an earlier run
    api = KubeApi(ClientSettings(kubeconfig=dev_cluster.kubeconfig), "writes-test", "tester")
    bound, waiting, gone = (created(core, f"{kind}-transport") for kind in ("bound", "waiting", "gone"))
    core.delete_namespaced_pod(gone.name, NAMESPACE, grace_period_seconds=0)
    renamed = Pod(name=bound.name, namespace=NAMESPACE, uid="not-its-uid")
    decision = ({VGPU_NODE: "node-a", "hami.io/bind-phase": "allocating"}, {VGPU_NODE: "node-a"})

    async def scenario() -> list[BindOutcome]:
        outcomes = [
            (await api.bind(renamed, "node-a", *decision)).outcome,  # the UID precondition
            (await api.bind(gone, "node-a", *decision)).outcome,
            (await api.bind(bound, "node-a", *decision)).outcome,  # annotations and label with it
            (await api.bind(bound, "node-b")).outcome,  # already bound
            (await api.bind(renamed, "node-b")).outcome,  # the UID precondition
            (await api.bind(gone, "node-a")).outcome,
        ]
        await api.post_event(bound, type_="Normal", reason="Scheduled", action="Binding", note="x" * 2000)
        await api.set_pod_scheduled_condition(waiting, reason="Unschedulable", message=UNSCHEDULABLE)
        return outcomes

    outcomes = run_then_close(api, scenario)
    assert outcomes == [
        BindOutcome.CONFLICT,
        BindOutcome.POD_GONE,
        BindOutcome.BOUND,
        BindOutcome.CONFLICT,
        BindOutcome.CONFLICT,
        BindOutcome.POD_GONE,
    ]
    after = core.read_namespaced_pod(bound.name, NAMESPACE)
    assert after.spec.node_name == "node-a"
    assert after.metadata.annotations[VGPU_NODE] == "node-a"
    assert after.metadata.annotations["hami.io/bind-phase"] == "allocating"
    assert after.metadata.labels[VGPU_NODE] == "node-a"
    events = client.EventsV1Api(core.api_client).list_namespaced_event(NAMESPACE).items
    [event] = [e for e in events if e.regarding.uid == bound.uid]
    assert (event.reason, event.type, event.action) == ("Scheduled", "Normal", "Binding")
    assert (event.reporting_controller, event.reporting_instance) == ("writes-test", "tester")
    assert (event.regarding.kind, event.regarding.uid) == ("Pod", bound.uid)
    assert len(event.note) == 1024
    assert event.note.endswith(" ...")
    assert abs(event.event_time.timestamp() - time.time()) < 120
    conditions = core.read_namespaced_pod_status(waiting.name, NAMESPACE).status.conditions
    [scheduled] = [c for c in conditions if c.type == "PodScheduled"]
    assert (scheduled.status, scheduled.reason) == ("False", "Unschedulable")
    assert scheduled.message == UNSCHEDULABLE
    delete_namespace_pods(core, NAMESPACE)


def test_the_node_lock_is_set_and_removed_only_at_the_version_read(dev_cluster: Any) -> None:
    core = dev_cluster.core_v1()
    name = "lock-node-with-transport"
    with contextlib.suppress(ApiException):
        core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name=name)))
    api = KubeApi(ClientSettings(kubeconfig=dev_cluster.kubeconfig), "writes-test", "tester")
    missing = Pod(name="no-such-pod", namespace=NAMESPACE)

    async def scenario() -> tuple[bool, bool, bool, bool]:
        taken = False
        for _ in range(5):  # a new node is still being updated by the node controllers
            version = (await api.read_node(name))["metadata"]["resourceVersion"]
            taken = await api.patch_node_annotation(
                name, NODE_LOCK_ANNOTATION, "2026-01-01T00:00:00Z,a,b", version
            )
            if taken:
                break
            await asyncio.sleep(0.5)
        stale = await api.patch_node_annotation(name, NODE_LOCK_ANNOTATION, None, version)  # changed since
        version = (await api.read_node(name))["metadata"]["resourceVersion"]
        released = await api.patch_node_annotation(name, NODE_LOCK_ANNOTATION, None, version)
        return taken, stale, released, await api.pod_exists(missing.namespace, missing.name)

    try:
        assert run_then_close(api, scenario) == (True, False, True, False)
        annotations = core.read_node(name).metadata.annotations or {}
        assert NODE_LOCK_ANNOTATION not in annotations
    finally:
        core.delete_node(name)


def test_new_connections_resume_the_first_connections_tls_session(dev_cluster: Any) -> None:
    """Once a connection has read an answer (and with it the server's ticket), the
    connections a burst opens resume its session instead of a full handshake."""
    api = KubeApi(ClientSettings(kubeconfig=dev_cluster.kubeconfig), "writes-test", "tester")
    transport = api.transport
    assert transport.ssl is not None
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    path = "/apis/authentication.k8s.io/v1/selfsubjectreviews"

    async def scenario() -> list[bool | None]:
        await transport.request("POST", path, review)
        (first,) = transport.pool.idle
        await asyncio.gather(*(transport.request("POST", path, review) for _ in range(4)))
        burst = [connection for connection in transport.pool.idle if connection is not first]
        assert len(burst) >= 3, "the concurrent requests opened connections of their own"
        tls = [connection.ssl_object for connection in (first, *burst)]
        return [state.session_reused if state is not None else None for state in tls]

    first_reused, *burst_reused = run_then_close(api, scenario)
    assert first_reused is False
    assert burst_reused
    assert all(burst_reused)


def test_the_first_write_takes_the_connection_the_start_warmed(dev_cluster: Any) -> None:
    """``warm`` opens a connection while nothing is written yet; the first write goes
    over it, and no other is opened."""
    api = KubeApi(ClientSettings(kubeconfig=dev_cluster.kubeconfig), "writes-test", "tester")
    transport = api.transport
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}

    async def scenario() -> tuple[tuple[Any, ...], tuple[Any, ...], int]:
        await transport.warm()
        warmed = transport.pool.idle
        await transport.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", review)
        return warmed, transport.pool.idle, transport.pool.open

    warmed, after_write, connections = run_then_close(api, scenario)
    assert len(warmed) == 1
    assert after_write == warmed
    assert connections == 1


# Run in a process of its own, so that a native crash fails the test, not pytest: each
# round a new client (no session yet) whose threads open connections at once, as the
# first listings do at start. Every connection is closed after one request, and its
# resumption counted then, by the thread that used it.
CONCURRENT_OPENS = textwrap.dedent(
    """
    import json, sys, threading
    from pathlib import Path
    from scheduler.k8s.client import blocking
    from scheduler.k8s.client.credentials import load_configuration

    resumed = []
    close = blocking._Connection.close
    def counted(connection):
        resumed.append(bool(connection.sock.session_reused))
        close(connection)
    blocking._Connection.close = counted

    configuration = load_configuration(Path(sys.argv[1]))
    threads, requests, rounds = map(int, sys.argv[2:5])
    statuses = []
    for _ in range(rounds):
        client = blocking.BlockingClient(configuration, None, max_connections=0)  # none kept
        def ask():
            for _ in range(requests):
                statuses.append(client.request("GET", "/version").status)
        workers = [threading.Thread(target=ask) for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        client.close()
    print(json.dumps({"statuses": statuses, "resumed": resumed}))
    """
)


def test_threads_opening_connections_at_once_share_sessions_safely(dev_cluster: Any, tmp_path: Path) -> None:
    """Threads of one client open TLS connections at once while others read answers:
    every request is answered, the process survives, and connections opened after an
    answer resume a session. (A context that read other threads' connections' sessions
    aborted this process in most runs, with ``malloc(): ...`` or ``free(): ...``.)"""
    script = tmp_path / "concurrent_opens.py"
    script.write_text(CONCURRENT_OPENS)
    threads, requests, rounds = 8, 3, 300
    done = subprocess.run(
        [sys.executable, str(script), str(dev_cluster.kubeconfig), str(threads), str(requests), str(rounds)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert not done.stderr, done.stderr[-3000:]  # no thread died of an exception either
    outcome = json.loads(done.stdout)
    assert outcome["statuses"] == [200] * threads * requests * rounds
    assert len(outcome["resumed"]) == threads * requests * rounds
    # Each thread's first connection of a round has no session to resume (the client is
    # new); its later ones find the session its own first answer brought.
    assert sum(outcome["resumed"]) >= len(outcome["resumed"]) / 3
