"""CPU per API write of rl-scheduler's client against the official client's: the HTTP/1.1
transport on the event loop (``KubeApi.post_event``), and the generated ``EventsV1Api``
in ``KubeApi``'s thread pool (the path the scheduler kept for proxies until it had one
stack). It posts ``--events`` Events (the write made for every scheduled pod, as a bind
is) by each path in turn, one at a time and all
at once, ``--rounds`` times, and prints the process CPU and wall time per call once the
connections are open (a first pass opens them: with up to ``client.connections`` of
them, a burst pays a TCP and TLS handshake per connection once). The first pass of the
bursts is shown on a line of its own ("all at once, new"): what a burst costs when it
finds no connection open, as the first after a start or after ``IDLE_S`` of quiet does.
With ``--http2`` the same Events also go through httpx over HTTP/2 (one connection,
multiplexed, as client-go writes); httpx is not a dependency of the scheduler
(``pip install --target DIR 'httpx[http2]'`` and put DIR on PYTHONPATH).

    hack/cluster.sh up
    .venv/bin/python benchmarks/api_write_cost.py --kubeconfig .cache/clusters/rl-dev/kubeconfig.yaml

The Events go to the namespace ``--namespace`` (created if missing) and are deleted
at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import ssl
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from scheduler.k8s.client.api import KubeApi, micro_time, now, object_reference
from scheduler.k8s.process.settings import ClientSettings
from scheduler.objects.pod import Pod


def transport_post(api: KubeApi, pod: Pod) -> Callable[[int], Awaitable[None]]:
    async def post(i: int) -> None:
        await api.post_event(pod, type_="Normal", reason="Benchmark", action="Posting", note=f"call {i}")

    return post


def event_manifest(api: KubeApi, pod: Pod, i: int) -> dict[str, Any]:
    """The Event ``post_event`` writes for call ``i``, for the paths that build their own."""
    return {
        "metadata": {"name": f"{pod.name}.{time.time_ns():x}", "namespace": pod.namespace},
        "eventTime": micro_time(now()),
        "reportingController": api.scheduler_name,
        "reportingInstance": api.identity,
        "action": "Posting",
        "reason": "Benchmark",
        "type": "Normal",
        "note": f"call {i}",
        "regarding": object_reference(pod),
    }


def official_post(api: KubeApi, pod: Pod) -> Callable[[int], Awaitable[None]]:
    """The same Event through the generated class and its model, in a worker thread."""
    events_api = client.EventsV1Api(api.api_client)

    def create(i: int) -> None:
        body = client.EventsV1Event.model_validate(event_manifest(api, pod, i))
        response: Any = events_api.create_namespaced_event(
            pod.namespace, body, _preload_content=False, _request_timeout=api.timeout
        )
        try:
            response.read()
        finally:
            response.release_conn()

    async def post(i: int) -> None:
        await api.call(create, i, limiter=api.event_limiter)

    return post


def http2_post(api: KubeApi, pod: Pod, session: Any) -> Callable[[int], Awaitable[None]]:
    """The same Event through ``session``, an ``httpx.AsyncClient`` speaking HTTP/2."""
    path = f"/apis/events.k8s.io/v1/namespaces/{pod.namespace}/events"

    async def post(i: int) -> None:
        event = {"apiVersion": "events.k8s.io/v1", "kind": "Event", **event_manifest(api, pod, i)}
        answer = await session.post(
            path, content=json.dumps(event).encode(), headers={"Content-Type": "application/json"}
        )
        if answer.status_code != 201 or answer.http_version != "HTTP/2":
            raise SystemExit(f"httpx: {answer.http_version} {answer.status_code}: {answer.text[:200]}")

    return post


def httpx_module() -> Any:
    try:
        importlib.import_module("h2")
        return importlib.import_module("httpx")
    except ImportError:
        raise SystemExit("--http2 needs httpx[http2]: pip install --target DIR 'httpx[http2]'") from None


def http2_session(api: KubeApi) -> Any:
    """An ``httpx.AsyncClient`` for HTTP/2 with ``api``'s server, CA and client certificate."""
    httpx = httpx_module()
    configuration = api.configuration
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file)
    return httpx.AsyncClient(http2=True, verify=context, base_url=configuration.host)


Figures = tuple[float, float]  # CPU seconds, wall seconds, per call


async def cost_per_call(
    post: Callable[[int], Awaitable[None]], events: int, concurrent: bool
) -> tuple[Figures, Figures]:
    """Per ``post``: the first pass (connections opened as needed) and the second
    (over the connections the first left open)."""

    async def send_all() -> None:
        if concurrent:
            await asyncio.gather(*(post(i) for i in range(events)))
        else:
            for i in range(events):
                await post(i)

    passes = []
    for _ in range(2):  # the first opens the connections (TLS handshakes); they stay open
        cpu, wall = time.process_time(), time.perf_counter()
        await send_all()
        passes.append(((time.process_time() - cpu) / events, (time.perf_counter() - wall) / events))
    return passes[0], passes[1]


def paths(args: argparse.Namespace) -> tuple[str, ...]:
    return ("transport", "official client", *(("httpx http/2",) if args.http2 else ()))


async def measure(args: argparse.Namespace) -> dict[tuple[str, str], list[Figures]]:
    settings = ClientSettings.model_validate({"qps": 1e6, "burst": 1_000_000, "kubeconfig": args.kubeconfig})
    pod = Pod(name="write-cost", namespace=args.namespace)
    results: dict[tuple[str, str], list[Figures]] = {}
    for _round in range(args.rounds):
        for path in paths(args):
            for mode in ("one at a time", "all at once"):
                api = KubeApi(settings, "write-cost", "benchmark")
                session = http2_session(api) if path == "httpx http/2" else None
                if session is not None:
                    post = http2_post(api, pod, session)
                else:
                    post = (official_post if path == "official client" else transport_post)(api, pod)
                try:
                    first, figures = await cost_per_call(post, args.events, mode == "all at once")
                finally:
                    if session is not None:
                        await session.aclose()
                    await api.close()
                results.setdefault((path, mode), []).append(figures)
                if mode == "all at once":
                    results.setdefault((path, "all at once, new"), []).append(first)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--events", type=int, default=300, help="events per path and mode")
    parser.add_argument("--rounds", type=int, default=3, help="repetitions, interleaved; medians shown")
    parser.add_argument("--namespace", default="write-cost")
    parser.add_argument("--http2", action="store_true", help="also through httpx over HTTP/2")
    args = parser.parse_args()
    if args.http2:
        httpx_module()  # missing: said before anything is sent
    api_client = config.new_client_from_config(config_file=str(args.kubeconfig))  # type: ignore[no-untyped-call]
    core, events = client.CoreV1Api(api_client), client.EventsV1Api(api_client)
    with contextlib.suppress(ApiException):  # already there
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=args.namespace)))
    events.delete_collection_namespaced_event(args.namespace)
    try:
        results = asyncio.run(measure(args))
        # post_event logs and drops a failed write: count what arrived.
        posted = len(events.list_namespaced_event(args.namespace).items)
        expected = args.rounds * len(paths(args)) * 2 * 2 * args.events  # rounds, paths, modes, passes
        if posted != expected:
            raise SystemExit(f"{posted} of {expected} events reached the API server")
    finally:
        events.delete_collection_namespaced_event(args.namespace)
    print(f"{'path':<16} {'calls':<17} {'CPU ms/call':>11} {'wall ms/call':>12}   (medians of {args.rounds})")
    for (path, mode), figures in results.items():
        cpu = statistics.median(c for c, _ in figures) * 1000
        wall = statistics.median(w for _, w in figures) * 1000
        print(f"{path:<16} {mode:<17} {cpu:>11.2f} {wall:>12.2f}")


if __name__ == "__main__":
    main()
