"""``/metrics`` (Prometheus), ``/healthz`` (the process is alive: answering, and not
stuck at start) and ``/readyz`` (caches synced and a profile loaded) on one address."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from scheduler.k8s.metrics import Metrics

Probe = Callable[[], tuple[bool, str]]


@dataclass
class StartupDeadline:
    """``/healthz`` while the caches sync: healthy for ``timeout_s`` after start, then
    unhealthy until they have synced, so that a kubelet restarts a scheduler stuck at
    start (the API server unreachable) instead of waiting on it forever. Once synced,
    always healthy: later API trouble is the watches' and the resync's to retry."""

    timeout_s: float
    synced: Callable[[], bool]
    clock: Callable[[], float] = time.monotonic
    started_at: float = field(init=False)

    def __post_init__(self) -> None:
        self.started_at = self.clock()

    def check(self) -> tuple[bool, str]:
        if self.synced():
            return True, "ok"
        waited = self.clock() - self.started_at
        if waited < self.timeout_s:
            return True, f"ok (starting: caches not synced for {waited:.0f} s)"
        return False, f"caches not synced {waited:.0f} s after start (startup_timeout_s: {self.timeout_s:g})"


def build_app(metrics: Metrics, ready: Probe, healthy: Probe) -> web.Application:
    async def metrics_handler(_: web.Request) -> web.Response:
        body = generate_latest(metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    def probe(check: Probe) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handler(_: web.Request) -> web.Response:
            ok, why = check()
            return web.Response(text=why or "ok", status=200 if ok else 503)

        return handler

    app = web.Application()
    app.router.add_get("/metrics", metrics_handler)
    app.router.add_get("/healthz", probe(healthy))
    app.router.add_get("/readyz", probe(ready))
    return app


async def serve(app: web.Application, address: str) -> web.AppRunner:
    host, _, port = address.rpartition(":")
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, int(port)).start()
    return runner
