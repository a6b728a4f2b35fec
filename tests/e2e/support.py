"""Running rl-scheduler as a real process against the dev cluster, and the waits
and bulk operations the end-to-end tests share."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from devcluster import kube
from devcluster import nodes as devnodes
from scheduler.k8s.client.api import KubeApi

T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class SchedulerProcess:
    """One ``rl-scheduler run`` process; its log is kept for failure reports."""

    name: str
    kubeconfig: Path
    log_path: Path
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    # Who makes the /metrics reader's token: an administrator (the scheduler's own
    # identity may be the chart's, which cannot request tokens); ``kubeconfig`` if None.
    admin_kubeconfig: Path | None = None

    def start(self) -> SchedulerProcess:
        command = [
            sys.executable,
            "-m",
            "scheduler.cli",
            "run",
            "--kubeconfig",
            str(self.kubeconfig),
            "--scheduler-name",
            self.name,
            "--metrics-address",
            f"127.0.0.1:{self.port}",
            *self.args,
        ]
        environment = {
            **os.environ,
            "RL_SCHEDULER_LEADER_ELECTION__NAMESPACE": "default",
            "PYTHONUNBUFFERED": "1",
            **self.env,
        }
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=environment)
        return self

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def get(self, path: str, token: str | None = None) -> tuple[int, str]:
        """GET over HTTPS (the self-signed certificate unverified, as a kubelet's probe);
        /metrics with a token allowed to get it unless ``token`` is given ("" for none)."""
        if token is None and path.startswith("/metrics"):
            token = metrics_token(self.admin_kubeconfig or self.kubeconfig)
        return https_get(self.url(path), token)

    def wait_ready(self, timeout_s: float = 90) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(f"scheduler {self.name} exited: {self.log()[-3000:]}")
            with contextlib.suppress(OSError):
                if self.get("/readyz")[0] == 200:
                    return
            time.sleep(0.5)
        raise AssertionError(f"scheduler {self.name} not ready in {timeout_s} s: {self.log()[-3000:]}")

    def metric(self, name: str, labels: Mapping[str, str] | None = None) -> float:
        """Sum of the samples of ``name`` whose labels include ``labels``."""
        _, text = self.get("/metrics")
        total = 0.0
        for line in text.splitlines():
            if not line.startswith(name):
                continue
            series, _, value = line.rpartition(" ")
            metric, _, label_text = series.partition("{")
            if metric != name:
                continue
            if labels and not all(f'{k}="{v}"' in label_text for k, v in labels.items()):
                continue
            total += float(value)
        return total

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def https_get(url: str, token: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5, context=UNVERIFIED) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as error:
        return int(error.code), error.read().decode()


UNVERIFIED = ssl._create_unverified_context()
METRICS_READER = "rl-metrics-reader"


@functools.cache
def metrics_token(kubeconfig: Path) -> str:
    """A token of the ServiceAccount default/rl-metrics-reader, which a ClusterRole lets
    get /metrics (as Prometheus' account is let in a cluster)."""
    return service_account_token(kubeconfig, "default", METRICS_READER, allowed_metrics=True)


def service_account_token(kubeconfig: Path, namespace: str, name: str, *, allowed_metrics: bool) -> str:
    """A one-hour token (TokenRequest) of a ServiceAccount made here; bound to a
    ClusterRole with nonResourceURLs /metrics get when ``allowed_metrics``."""
    api = kube.api_client(kubeconfig)
    core = client.CoreV1Api(api)
    rbac = client.RbacAuthorizationV1Api(api)
    with contextlib.suppress(ApiException):
        core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    if allowed_metrics:
        role = {"metadata": {"name": name}, "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}
        binding = {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        }
        with contextlib.suppress(ApiException):
            rbac.create_cluster_role(role)
        with contextlib.suppress(ApiException):
            rbac.create_cluster_role_binding(binding)
    request = {"spec": {"expirationSeconds": 3600}}
    answer = core.create_namespaced_service_account_token(name, namespace, request)
    return str(answer.status.token)


@contextlib.contextmanager
def running_scheduler(
    kubeconfig: Path,
    name: str,
    log_dir: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    admin_kubeconfig: Path | None = None,
) -> Iterator[SchedulerProcess]:
    log_path = log_dir / f"{name}-{time.time_ns()}.log"
    scheduler = SchedulerProcess(
        name, kubeconfig, log_path, args, env or {}, admin_kubeconfig=admin_kubeconfig
    )
    scheduler.start()
    try:
        scheduler.wait_ready()
        yield scheduler
    finally:
        scheduler.stop()


def api_dicts(core: client.CoreV1Api, items: list[Any]) -> list[dict[str, Any]]:
    """API objects (the client's models) as plain JSON objects."""
    return [core.api_client.sanitize_for_serialization(item) for item in items]


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str, interval_s: float = 0.5) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def replace_nodes(core: client.CoreV1Api, specs: list[devnodes.NodeSpec]) -> None:
    """The cluster's fake nodes become exactly ``specs`` (Ready)."""
    devnodes.delete_generated_nodes(core)
    wait_for(lambda: not core.list_node().items, 60, "old nodes to go")
    devnodes.create_nodes(core, specs)
    devnodes.wait_ready(core, [s.name for s in specs], timeout_s=120)

    def settled() -> bool:  # the node lifecycle controller lifts its not-ready taints
        return not any(
            t.key.startswith("node.kubernetes.io/")
            for n in core.list_node().items
            for t in (n.spec.taints or [])
        )

    wait_for(settled, 120, "new nodes to lose their not-ready taints")


def ensure_namespace(core: client.CoreV1Api, name: str, labels: Mapping[str, str] | None = None) -> None:
    body = client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=dict(labels or {})))
    with contextlib.suppress(ApiException):
        core.create_namespace(body)


def _has_default_service_account(core: client.CoreV1Api, namespace: str) -> bool:
    try:
        core.read_namespaced_service_account("default", namespace)
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


@contextlib.contextmanager
def scratch_namespace(core: client.CoreV1Api, prefix: str, test_id: str) -> Iterator[str]:
    """A namespace for one test (``prefix`` and a hash of the test's id); its pods are
    deleted afterwards."""
    name = f"{prefix}-{abs(hash(test_id)) % 10**8}"
    ensure_namespace(core, name)
    # Pods are refused until the namespace's default ServiceAccount exists (the
    # controller manager creates it a moment after the namespace).
    wait_for(lambda: _has_default_service_account(core, name), 60, f"namespace {name}'s ServiceAccount")
    yield name
    delete_namespace_pods(core, name)


def create_pods(core: client.CoreV1Api, manifests: Iterable[dict[str, Any]], workers: int = 8) -> None:
    def create(manifest: dict[str, Any]) -> None:
        core.create_namespaced_pod(manifest["metadata"].get("namespace", "default"), manifest)

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(create, manifests))


def run_then_close(api: KubeApi, scenario: Callable[[], Awaitable[T]]) -> T:
    """Run ``scenario`` in a new event loop, closing ``api`` in that loop afterwards
    (its transport's session belongs there)."""

    async def run() -> T:
        try:
            return await scenario()
        finally:
            await api.close()

    return asyncio.run(run())


def delete_namespace_pods(core: client.CoreV1Api, namespace: str) -> None:
    core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
    wait_for(lambda: not core.list_namespaced_pod(namespace).items, 120, f"pods of {namespace} to go")


def pod_events(core: client.CoreV1Api, namespace: str, name: str) -> list[Any]:
    selector = f"involvedObject.name={name},involvedObject.kind=Pod"
    return list(core.list_namespaced_event(namespace, field_selector=selector).items)


@contextlib.contextmanager
def running_trainer(
    shared: Path, kubeconfig: Path, scheduler: SchedulerProcess, log: Path, *args: str
) -> Iterator[int]:
    """An ``rl-scheduler trainer`` process beside ``scheduler``; yields its metrics port."""
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "scheduler.cli",
        "trainer",
        "--shared-dir",
        str(shared),
        "--kubeconfig",
        str(kubeconfig),
        "--metrics-port",
        str(port),
        "--scheduler-metrics",
        scheduler.url("/metrics"),
        "--scheduler-metrics-token-file",
        str(token_file(log.parent, metrics_token(kubeconfig))),
        *args,
    ]
    with log.open("ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    TRAINER_KUBECONFIG[port] = kubeconfig
    try:
        yield port
    finally:
        process.terminate()
        process.wait(timeout=30)


# The kubeconfig each running trainer was started with, by its metrics port.
TRAINER_KUBECONFIG: dict[int, Path] = {}


def token_file(folder: Path, token: str) -> Path:
    path = folder / f"token-{time.time_ns()}"
    path.write_text(token)
    path.chmod(0o600)
    return path


def trainer_metric(port: int, name: str) -> float:
    """Sum of a trainer metric's samples (0 while the trainer is not serving)."""
    try:
        status, text = https_get(f"https://127.0.0.1:{port}/metrics", metrics_token(TRAINER_KUBECONFIG[port]))
    except OSError:
        return 0.0
    if status != 200:
        return 0.0
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if not line.startswith("#") and line.split("{")[0].split(" ")[0] == name
    )


def submit_candidate(shared: Path, checkpoint: Path) -> None:
    """``rl-scheduler policy submit``: hand a checkpoint to the trainer's promotion gate."""
    command = [sys.executable, "-m", "scheduler.cli", "policy", "--shared-dir", str(shared)]
    subprocess.run([*command, "submit", str(checkpoint)], check=True, capture_output=True)


@contextlib.contextmanager
def scheduler_replicas(
    kubeconfig: Path, name: str, log_dir: Path, count: int, *args: str
) -> Iterator[list[SchedulerProcess]]:
    """``count`` replicas of one scheduler (same name, so the same Lease), each with a
    known holder identity (``<name>-<i>``); ready when yielded."""
    started = [
        SchedulerProcess(
            name,
            kubeconfig,
            log_dir / f"{name}-{i}.log",
            args,
            {"RL_SCHEDULER_LEADER_ELECTION__IDENTITY": f"{name}-{i}"},
        ).start()
        for i in range(count)
    ]
    try:
        for replica in started:
            replica.wait_ready()
        yield started
    finally:
        for replica in started:
            replica.stop()


def identity(replica: SchedulerProcess) -> str:
    """The Lease holder identity ``scheduler_replicas`` gave ``replica``."""
    return replica.env["RL_SCHEDULER_LEADER_ELECTION__IDENTITY"]


def leader_of(replicas: list[SchedulerProcess], timeout_s: float = 60) -> SchedulerProcess:
    wait_for(lambda: sum(r.metric("rl_scheduler_leader") for r in replicas) == 1, timeout_s, "one leader")
    return next(r for r in replicas if r.metric("rl_scheduler_leader") == 1)


class LeaseRecorder:
    """Every version of one Lease from now on (a watch in a thread): what a release
    wrote survives a standby's takeover a moment later."""

    def __init__(self, kubeconfig: Path, namespace: str, name: str) -> None:
        self.namespace, self.name = namespace, name
        self.coordination = client.CoordinationV1Api(kube.api_client(kubeconfig))
        self.records: list[dict[str, Any]] = []
        self._stop = False
        start = self.coordination.list_namespaced_lease(namespace, field_selector=f"metadata.name={name}")
        self._version = str(start.metadata.resource_version)
        self._thread = threading.Thread(target=self._watch, name=f"lease-{name}", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop:
            response = self.coordination.list_namespaced_lease(
                self.namespace,
                field_selector=f"metadata.name={self.name}",
                watch=True,
                resource_version=self._version,
                timeout_seconds=5,
                _preload_content=False,
            )
            for line in response:
                event = json.loads(line)
                spec = event["object"].get("spec") or {}
                self._version = event["object"]["metadata"]["resourceVersion"]
                self.records.append({"type": event["type"], **spec})

    def released(self, holder: str) -> list[dict[str, Any]]:
        """The writes that gave up the lease after ``holder`` held it (client-go's
        release: no holder, a 1 s lease)."""
        held = False
        found = []
        for record in self.records:
            if record.get("holderIdentity") == holder:
                held = True
            elif held and not record.get("holderIdentity"):
                found.append(record)
        return found

    def close(self) -> None:
        self._stop = True
        self._thread.join(timeout=10)


class StallingProxy:
    """A TCP proxy in front of the API server that first stalls: it accepts
    connections and never answers, as a Service does before kube-proxy has programmed
    it (packets dropped). After ``forward()`` new connections reach the server; the
    stalled ones stay stalled (their clients time out)."""

    def __init__(self, server: str) -> None:
        target = urllib.parse.urlsplit(server)
        self.target = (str(target.hostname), int(target.port or 443))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.url = f"https://127.0.0.1:{self.port}"
        self.forwarding = threading.Event()
        self.stalled: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, name="stalling-proxy", daemon=True).start()

    def forward(self) -> None:
        self.forwarding.set()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            if not self.forwarding.is_set():
                self.stalled.append(conn)
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                conn.close()
                continue
            upstream.settimeout(None)
            for source, sink in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=_pipe, args=(source, sink), daemon=True).start()

    def kubeconfig(self, original: Path, out: Path) -> Path:
        """``original`` with its server replaced by the proxy (the API server's
        certificate names 127.0.0.1, so TLS checks pass through the proxy too)."""
        config = yaml.safe_load(original.read_text())
        for cluster in config["clusters"]:
            cluster["cluster"]["server"] = self.url
        out.write_text(yaml.safe_dump(config))
        return out

    def close(self) -> None:
        self._closed = True
        self.listener.close()
        for conn in self.stalled:
            conn.close()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


POD_GROUP_CRD = Path(__file__).resolve().parents[2] / "helm" / "rl-scheduler" / "crds" / "podgroups.yaml"


def ensure_pod_group_crd(api_client: client.ApiClient) -> None:
    """The chart's PodGroup CRD (scheduler-plugins' API), created unless it exists, and
    established."""
    extensions = client.ApiextensionsV1Api(api_client)
    crd = yaml.safe_load(POD_GROUP_CRD.read_text())
    name = crd["metadata"]["name"]
    try:
        extensions.create_custom_resource_definition(crd)
    except ApiException as error:
        if error.status != 409:
            raise

    def established() -> bool:
        conditions = extensions.read_custom_resource_definition(name).status.conditions or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    wait_for(established, 60, f"CRD {name} to be established")
