"""The dev cluster end to end: a real control plane, KWOK nodes, kube-scheduler binding.

Tests marked `cluster` share one session cluster (tests/conftest.py); the bad-input
tables below them need no cluster and run in a second.
"""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from devcluster import binaries, cluster, nodes, processes, view, workload
from devcluster.clean import clean_pods
from devcluster.cli import main
from devcluster.errors import (
    BadNodeCountError,
    ClusterStartError,
    NodeListNotFoundError,
    PortInUseError,
    ToolchainMissingError,
)
from devcluster.kube import body, ensure_namespace
from devcluster.names import (
    GPU_RESOURCE,
    HOSTNAME_LABEL,
    RACK_LABEL,
    REGISTER_ANNOTATION,
    ZONE_LABEL,
)
from devcluster.testing import DevCluster, cluster_pids, listening_sockets

OPENB_GPU_NODES = binaries.openb_file("openb_node_list_gpu_node")
OPENB_TRACE = binaries.openb_file("openb_pod_list_default")


def wait_for(what: str, check: Any, timeout_s: float = 60) -> Any:
    """Poll check() until it returns something truthy; fail naming `what`."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.25)


@pytest.fixture(scope="module")
def api(dev_cluster: DevCluster) -> Iterator[client.CoreV1Api]:
    with dev_cluster.api_client() as api_client:
        yield client.CoreV1Api(api_client)


@pytest.fixture(scope="module")
def openb_nodes(api: client.CoreV1Api) -> list[nodes.NodeSpec]:
    """100 fake nodes from the openb GPU node list, Ready."""
    specs = nodes.openb_node_specs(OPENB_GPU_NODES, 100)
    result = nodes.create_nodes(api, specs)
    assert len(result.created) + len(result.existing) == 100
    nodes.wait_ready(api, [s.name for s in specs], timeout_s=60)
    return specs


# --- against the running cluster ---------------------------------------------------


@pytest.mark.cluster
def test_100_openb_nodes_carry_hostname_topology_and_gpu(
    api: client.CoreV1Api, openb_nodes: list[nodes.NodeSpec]
) -> None:
    all_nodes: list[Any] = api.list_node().items
    listed = {n.metadata.name: n for n in all_nodes}
    assert {s.name for s in openb_nodes} <= set(listed)
    for spec in openb_nodes:
        node = listed[spec.name]
        labels = node.metadata.labels
        assert labels[HOSTNAME_LABEL] == spec.name
        assert labels[ZONE_LABEL] == spec.zone
        assert labels[RACK_LABEL] == spec.rack
        assert nodes.is_ready(node), spec.name
        # openb GPU nodes, as HAMi's device plugin registers them: the GPUs of the CSV
        # in the register annotation, nvidia.com/gpu as GPUs x 10 vGPUs.
        assert node.status.allocatable[GPU_RESOURCE] == str(spec.size.gpu_count * 10)
        registered = json.loads(node.metadata.annotations[REGISTER_ANNOTATION])
        assert [d["type"] for d in registered] == [f"NVIDIA-{spec.size.gpu_model}"] * spec.size.gpu_count
    assert len({s.zone for s in openb_nodes}) == 3  # zone-a, zone-b, zone-c
    assert len({s.rack for s in openb_nodes}) == 12  # 3 zones x 4 racks


@pytest.mark.cluster
def test_kube_scheduler_binds_a_gpu_share_pod_and_kwok_runs_it(
    dev_cluster: DevCluster, api: client.CoreV1Api, openb_nodes: list[nodes.NodeSpec]
) -> None:
    ensure_namespace(api, "e2e-bind", dev_cluster.kubeconfig)
    request = workload.PodRequest(cpu_milli=4000, memory_mib=8192, gpu_count=1, gpu_milli=460)
    manifest = workload.pod_manifest(
        "gpu-share", "e2e-bind", request, scheduler_name="default-scheduler", run_id="e2e-bind"
    )
    api.create_namespaced_pod("e2e-bind", body(manifest))

    def running() -> Any:
        pod = api.read_namespaced_pod("gpu-share", "e2e-bind")
        return pod if pod.status and pod.status.phase == "Running" else None

    pod = wait_for("pod gpu-share to be Running", running)
    assert pod.spec.node_name in {s.name for s in openb_nodes}
    # kube-scheduler does not know HAMi's per-GPU resources: its share pod asks a vGPU.
    assert pod.spec.containers[0].resources.requests[GPU_RESOURCE] == "1"
    scheduled = api.list_namespaced_event(
        "e2e-bind", field_selector="involvedObject.name=gpu-share,reason=Scheduled"
    ).items
    assert scheduled, "no Scheduled event: was it kube-scheduler that bound the pod?"
    assert scheduled[0].reporting_component == "default-scheduler"
    api.delete_namespaced_pod("gpu-share", "e2e-bind", grace_period_seconds=0)


@pytest.mark.cluster
def test_every_component_listens_on_loopback_only(dev_cluster: DevCluster) -> None:
    pids = cluster_pids(dev_cluster.info.workdir)
    # etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, hami-device-plugin
    assert len(pids) == 6
    listeners = listening_sockets(pids)
    assert listeners, "found no listening sockets: is /proc readable?"
    public = [x for x in listeners if x.address != "127.0.0.1"]
    assert not public, f"listening beyond loopback: {public}"


@pytest.mark.cluster
@pytest.mark.parametrize(
    ("binary", "args", "version_key"),
    [
        ("etcd", ["--version"], "ETCD_VERSION"),
        ("kube_apiserver", ["--version"], "KUBERNETES_VERSION"),
        ("kube_controller_manager", ["--version"], "KUBERNETES_VERSION"),
        ("kube_scheduler", ["--version"], "KUBERNETES_VERSION"),
        ("kubectl", ["version", "--client"], "KUBERNETES_VERSION"),
        ("kwok", ["--version"], "KWOK_VERSION"),
        ("kwokctl", ["--version"], "KWOK_VERSION"),
    ],
)
def test_binaries_report_the_pinned_release(binary: str, args: list[str], version_key: str) -> None:
    path = getattr(binaries.Binaries.in_cache(), binary)
    out = subprocess.run([path, *args], capture_output=True, text=True, check=True).stdout
    assert binaries.read_versions()[version_key].lstrip("v") in out


@pytest.mark.cluster
def test_generated_workload_shows_in_view_and_clean_removes_only_it(
    dev_cluster: DevCluster, api: client.CoreV1Api, openb_nodes: list[nodes.NodeSpec]
) -> None:
    ns = "e2e-workload"
    ensure_namespace(api, ns, dev_cluster.kubeconfig)
    size = workload.PodRequest(cpu_milli=1000, memory_mib=1024)
    result = workload.run_workload(
        api,
        workload.fixed_requests(5, size),
        namespace=ns,
        scheduler_name="default-scheduler",
        run_id="e2e-wl",
        realtime=False,
        log=lambda _: None,
    )
    assert (result.created, result.failed) == (5, 0)
    # A pod the generator did not make: clean must leave it alone.
    other = workload.pod_manifest("not-generated", ns, size, scheduler_name="default-scheduler", run_id="x")
    other["metadata"]["labels"] = {}
    api.create_namespaced_pod(ns, body(other))

    def all_bound() -> bool:
        pods: list[Any] = api.list_namespaced_pod(ns).items
        return all(p.spec.node_name for p in pods)

    wait_for("6 pods to be bound", all_bound)
    table = view.snapshot(api)
    assert "TOTAL (100 nodes)" in table
    assert "pending: none" in table
    assert clean_pods(api, namespace=ns) == 5
    wait_for("generated pods to go", lambda: len(api.list_namespaced_pod(ns).items) == 1)
    left: list[Any] = api.list_namespaced_pod(ns).items
    assert left[0].metadata.name == "not-generated"
    api.delete_namespaced_pod("not-generated", ns, grace_period_seconds=0)


@pytest.mark.cluster
def test_openb_replay_creates_pods_and_deletes_them_when_their_lifetime_ends(
    dev_cluster: DevCluster, api: client.CoreV1Api, openb_nodes: list[nodes.NodeSpec]
) -> None:
    ns = "e2e-replay"
    ensure_namespace(api, ns, dev_cluster.kubeconfig)
    # 20 trace pods, a trace day squeezed into seconds; each lives its trace lifetime.
    requests = workload.openb_trace_requests(OPENB_TRACE, start=0, limit=20, speed=5_000_000)
    result = workload.run_workload(
        api,
        requests,
        namespace=ns,
        scheduler_name="default-scheduler",
        run_id="e2e-replay",
        log=lambda _: None,
    )
    assert (result.created, result.deleted, result.failed) == (20, 20, 0)


@pytest.mark.cluster
def test_second_up_reuses_the_running_cluster(dev_cluster: DevCluster) -> None:
    start = time.monotonic()
    again = cluster.up(cluster.ClusterConfig(name=dev_cluster.info.name), out=io.StringIO())
    assert again == dev_cluster.info
    assert time.monotonic() - start < 5


@pytest.mark.cluster
def test_warm_start_of_a_second_cluster_is_under_30_s() -> None:
    name = "rl-warm"
    cluster.down(name, out=io.StringIO())  # a leftover from an aborted run would skew it
    start = time.monotonic()
    try:
        info = cluster.up(cluster.ClusterConfig(name=name, kube_scheduler=False), out=io.StringIO())
        elapsed = time.monotonic() - start
        assert info.kubeconfig.exists()
    finally:
        cluster.down(name, out=io.StringIO())
    assert elapsed < 30, f"warm start took {elapsed:.1f} s"
    assert not cluster.cluster_workdir(name).exists()


@pytest.mark.cluster
def test_down_stops_a_component_restarted_by_a_test() -> None:
    """A test that restarts kube-apiserver (tests/e2e/test_operator_ha.py) must not leave
    it running after the cluster is torn down."""
    name = "rl-restarted"
    cluster.down(name, out=io.StringIO())
    try:
        info = cluster.up(cluster.ClusterConfig(name=name, kube_scheduler=False), out=io.StringIO())
        processes.restart(info.workdir, "kube-apiserver")
    finally:
        cluster.down(name, out=io.StringIO())
    workdir = cluster.cluster_workdir(name)
    leftovers = subprocess.run(["pgrep", "-af", str(workdir)], capture_output=True, text=True, check=False)
    assert leftovers.stdout == "", f"processes left running: {leftovers.stdout}"


@pytest.mark.cluster
def test_a_component_that_fails_leaves_nothing_running(tmp_path: Path) -> None:
    """kube-apiserver dies at start: up() fails clearly and stops etcd again."""
    real = binaries.Binaries.in_cache()
    versions = binaries.read_versions()
    kube_dir = tmp_path / "bin" / f"kubernetes-{versions['KUBERNETES_VERSION']}"
    kube_dir.mkdir(parents=True)
    for group_dir in real.etcd.parent, real.kwokctl.parent, real.helm.parent:
        (tmp_path / "bin" / group_dir.name).symlink_to(group_dir)
    for name in "kube-controller-manager", "kube-scheduler", "kubectl":
        (kube_dir / name).symlink_to(real.kube_apiserver.parent / name)
    fake = kube_dir / "kube-apiserver"
    fake.write_text(
        "#!/bin/sh\n"
        f'[ "$1" = --version ] && echo "Kubernetes {versions["KUBERNETES_VERSION"]}" && exit 0\n'
        "echo 'kube-apiserver: simulated failure' >&2; exit 1\n"
    )
    fake.chmod(0o755)
    (kube_dir / ".complete").touch()
    config = cluster.ClusterConfig(name="rl-broken", start_timeout_s=20)
    start = time.monotonic()
    with pytest.raises(ClusterStartError, match="kube-apiserver exited while starting") as failed:
        cluster.up(config, cache=tmp_path, out=io.StringIO())
    assert "simulated failure" in str(failed.value)  # the dead component's log is quoted
    assert time.monotonic() - start < 15  # noticed at once, not after kwokctl's --wait
    workdir = cluster.cluster_workdir("rl-broken", tmp_path)
    assert not workdir.exists()
    leftovers = subprocess.run(["pgrep", "-f", str(workdir)], capture_output=True, text=True, check=False)
    assert leftovers.stdout == "", f"processes left running: {leftovers.stdout}"


# --- bad input: no cluster needed ----------------------------------------------------


@pytest.mark.parametrize(
    ("count", "message"),
    [
        (0, "node count 0: must be at least 1"),
        (-5, "node count -5: must be at least 1"),
        (10_001, "at most 10000"),
        (5_000, "lists only 1213 nodes"),  # the GPU node list has 1213 rows
    ],
)
def test_bad_node_counts_are_rejected(count: int, message: str) -> None:
    with pytest.raises(BadNodeCountError, match=message):
        nodes.openb_node_specs(OPENB_GPU_NODES, count)
    if count <= 0:
        with pytest.raises(BadNodeCountError, match=message):
            nodes.mix_node_specs(count, {"cpu-small": 1})


def test_missing_node_list_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "no_such_node_list.csv"
    with pytest.raises(NodeListNotFoundError, match=r"no_such_node_list\.csv"):
        nodes.openb_node_specs(missing, 3)


@pytest.mark.parametrize(
    ("argv", "exit_code", "message"),
    [
        (["nodes", "--count", "0", "--mix", "cpu-small=1"], 2, "node count 0"),
        (["nodes", "--count", "-1"], 2, "node count -1"),
        (["nodes", "--count", "3", "--openb", "/missing/nodes.csv"], 2, "/missing/nodes.csv"),
        (["nodes", "--mix", "gpu-h100=1"], 2, "node type 'gpu-h100'"),
        (["nodes", "--mix", "cpu-small=1", "--taint", "no-effect"], 2, "taint 'no-effect'"),
        (["nodes", "--mix", "cpu-small=1", "--zones", "0"], 2, "zones=0"),
        (["up", "--port", "80"], 2, "port 80"),
        (["up", "--name", "Bad_Name"], 2, "cluster name 'Bad_Name'"),
        (["workload", "--openb-trace", "/nonexistent/pods.csv"], 2, "/nonexistent/pods.csv"),
        (
            ["workload", "--count", "1", "--gpu-milli", "1500"],
            2,
            "gpu_milli must be a multiple of 10 in 10..1000",
        ),
        (["build", "kubelet"], 2, "unknown build groups"),
        (["status", "--name", "never-started"], 1, "'never-started' is not running"),
    ],
)
def test_cli_rejects_bad_input_with_a_clear_message(
    argv: list[str], exit_code: int, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == exit_code
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_port_in_use_is_refused_before_anything_starts(busy_port: int, tmp_path: Path) -> None:
    config = cluster.ClusterConfig(name="rl-port", port=busy_port)
    with pytest.raises(PortInUseError, match=f"port {busy_port} on 127.0.0.1 is already in use"):
        cluster.up(config, cache=tmp_path, out=io.StringIO())
    assert not cluster.cluster_workdir("rl-port", tmp_path).exists()
    assert not (tmp_path / "bin").exists()  # nothing was built either


def _path_without_go() -> str:
    dirs = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(d for d in dirs if d and not (Path(d) / "go").exists())


def test_no_go_toolchain_is_a_clear_error_and_leaves_no_debris(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", _path_without_go())
    with pytest.raises(ToolchainMissingError, match="no Go toolchain on PATH"):
        cluster.up(cluster.ClusterConfig(name="rl-nogo"), cache=tmp_path, out=io.StringIO())
    assert not cluster.cluster_workdir("rl-nogo", tmp_path).exists()
    assert not list((tmp_path / "bin").glob("*"))  # no half-built binaries


def test_build_script_exits_3_without_go(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": _path_without_go(), "RL_DEVCLUSTER_CACHE": str(tmp_path)}
    done = subprocess.run(
        ["bash", str(binaries.BUILD_SCRIPT), "etcd"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 3
    assert "no Go toolchain on PATH" in done.stderr
