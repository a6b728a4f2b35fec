"""A binder that makes no decision: each pending pod of its scheduler name goes to the
next node, round-robin. It uses rl-scheduler's own client (``KubeApi``: a token bucket
with the given QPS and burst, binds through ``pods/binding`` over the same transport),
so its pods/s is the ceiling the API server allows a Python client; the throughput
benchmark (benchmarks/throughput.py) runs it as a process of its own.

    python benchmarks/null_binder.py --kubeconfig K --scheduler-name bench-null \
        --qps 50 --burst 100 --result /tmp/null.json

With ``--events`` it also posts kube-scheduler's ``Scheduled`` event after each bind
(rl-scheduler's reporter, on its own token bucket as in rl-scheduler): the ceiling
for a scheduler that reports its binds as kube-scheduler does, which costs the API
server one more write per pod.

It lists the nodes once, lists and then watches the unbound pods of its scheduler
name, and binds each once (the listing and the watch are outside the token bucket,
as informers are). On SIGTERM it writes ``--result``: how many pods it bound,
how many binds failed, and each bound pod's latency in seconds, from taking the pod
off its queue to the bind's answer (the token bucket's wait included).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.watch.watch import iter_resp_lines

from scheduler.k8s.client import paths
from scheduler.k8s.client.api import BindOutcome, KubeApi
from scheduler.k8s.process.settings import ClientSettings
from scheduler.k8s.scheduling.reporting import Reporter
from scheduler.objects.pod import Pod

# Long enough that a benchmark run never needs a second watch; the loop reconnects anyway.
WATCH_TIMEOUT_S = 600


@dataclass
class Tally:
    latencies_s: list[float] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"bound": len(self.latencies_s), "failures": self.failures, "latencies_s": self.latencies_s}


def unbound_selector(scheduler_name: str) -> str:
    return f"spec.nodeName=,spec.schedulerName={scheduler_name}"


def stub_pod(item: dict[str, Any]) -> Pod:
    metadata = item["metadata"]
    return Pod(name=metadata["name"], namespace=metadata["namespace"], uid=metadata.get("uid", ""))


# The client's helper is untyped; this is its signature.
_response_lines: Callable[[Any], Iterator[str]] = iter_resp_lines


def _pod_lister(core: client.CoreV1Api, namespace: str | None) -> Callable[..., Any]:
    if namespace:
        return partial(core.list_namespaced_pod, namespace)
    return core.list_pod_for_all_namespaces


def raw_watch(
    core: client.CoreV1Api, resource_version: str, namespace: str | None = None, **selectors: str
) -> Iterator[dict[str, Any]]:
    """Watch events of pods as plain JSON (the client's models cost ~1 ms a pod), from
    ``resource_version`` on, in one namespace or all; ends when the server closes the
    watch. Used by this binder and by the benchmark's own watch."""
    response = _pod_lister(core, namespace)(
        resource_version=resource_version,
        watch=True,
        allow_watch_bookmarks=True,
        timeout_seconds=WATCH_TIMEOUT_S,
        _preload_content=False,
        **selectors,
    )
    try:
        for line in _response_lines(response):
            if line:
                yield json.loads(line)
    finally:
        response.release_conn()


def raw_list(core: client.CoreV1Api, namespace: str | None = None, **selectors: str | int) -> dict[str, Any]:
    """A pod list as plain JSON (``items`` and ``metadata.resourceVersion``)."""
    response = _pod_lister(core, namespace)(_preload_content=False, **selectors)
    listing: dict[str, Any] = json.loads(response.data)
    return listing


class NullBinder:
    def __init__(self, api: KubeApi, nodes: list[str], events: bool = False) -> None:
        self.api = api
        self.nodes = nodes
        self.reporter = Reporter(api) if events else None
        self.queue: asyncio.Queue[Pod] = asyncio.Queue()
        self.tally = Tally()
        self._seen: set[str] = set()
        self._next_node = 0
        self._binds: set[asyncio.Task[None]] = set()

    def offer(self, item: dict[str, Any]) -> None:
        """A pod from the listing or the watch; each is queued once."""
        pod = stub_pod(item)
        if pod.key not in self._seen:
            self._seen.add(pod.key)
            self.queue.put_nowait(pod)

    async def run(self) -> None:
        while True:
            pod = await self.queue.get()
            node = self.nodes[self._next_node % len(self.nodes)]
            self._next_node += 1
            task = asyncio.create_task(self._bind(pod, node, time.perf_counter()))
            self._binds.add(task)
            task.add_done_callback(self._binds.discard)

    async def _bind(self, pod: Pod, node: str, taken: float) -> None:
        result = await self.api.bind(pod, node)
        if result.outcome is BindOutcome.BOUND:
            self.tally.latencies_s.append(time.perf_counter() - taken)
            if self.reporter is not None:
                await self.reporter.scheduled(pod, node)
        else:
            outcome = result.outcome.value
            self.tally.failures[outcome] = self.tally.failures.get(outcome, 0) + 1


def follow(api: KubeApi, binder: NullBinder, selector: str, stop: threading.Event,
           loop: asyncio.AbstractEventLoop) -> None:  # fmt: skip
    """List, then watch, in a thread of its own; hands unbound pods to the loop. A
    watch that ends or fails (410 Gone, a dropped connection) is followed by a new list."""
    core = client.CoreV1Api(api.api_client)  # the benchmark's own watch, not the scheduler's
    while not stop.is_set():
        try:
            listing = raw_list(core, field_selector=selector)
            for item in listing.get("items", []):
                loop.call_soon_threadsafe(binder.offer, item)
            for event in raw_watch(core, listing["metadata"]["resourceVersion"], field_selector=selector):
                if stop.is_set():
                    return
                if event.get("type") == "ERROR":
                    break
                if event.get("type") in ("ADDED", "MODIFIED"):
                    loop.call_soon_threadsafe(binder.offer, event["object"])
        except Exception as error:  # the API server is busy or restarting: list again
            print(f"null binder: watch failed ({type(error).__name__}: {error}); listing again", flush=True)
            time.sleep(1.0)


async def main(args: argparse.Namespace) -> None:
    settings = ClientSettings.model_validate(
        {"qps": args.qps, "burst": args.burst, "kubeconfig": args.kubeconfig}
    )
    api = KubeApi(settings, args.scheduler_name, "null-binder")
    nodes = sorted(item["metadata"]["name"] for item in await api.list_items(paths.NODES))
    if not nodes:
        raise SystemExit("null binder: the cluster has no nodes")
    binder = NullBinder(api, nodes, events=args.events)
    loop = asyncio.get_running_loop()
    stop = threading.Event()
    selector = unbound_selector(args.scheduler_name)
    threading.Thread(target=follow, args=(api, binder, selector, stop, loop), daemon=True).start()
    done = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, done.set)
    runner = asyncio.create_task(binder.run())
    await done.wait()
    stop.set()
    runner.cancel()
    args.result.write_text(json.dumps(binder.tally.as_json()))
    await api.close()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--scheduler-name", required=True, help="bind the pods that ask for this name")
    parser.add_argument("--qps", type=float, default=50.0)
    parser.add_argument("--burst", type=int, default=100)
    parser.add_argument("--result", type=Path, required=True, help="JSON written on SIGTERM")
    parser.add_argument("--events", action="store_true", help="post a Scheduled event after each bind")
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
