"""``/metrics`` (Prometheus), ``/healthz`` (the process answers) and ``/readyz``
(caches synced and a profile loaded) on one address."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from scheduler.k8s.metrics import Metrics


def build_app(metrics: Metrics, ready: Callable[[], tuple[bool, str]]) -> web.Application:
    async def metrics_handler(_: web.Request) -> web.Response:
        body = generate_latest(metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        ok, why = ready()
        return web.Response(text=why or "ok", status=200 if ok else 503)

    app = web.Application()
    app.router.add_get("/metrics", metrics_handler)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


async def serve(app: web.Application, address: str) -> web.AppRunner:
    host, _, port = address.rpartition(":")
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, int(port)).start()
    return runner
