"""``/metrics`` (Prometheus), ``/healthz`` (the process is alive: answering, and not
stuck at start) and ``/readyz`` (caches synced and a profile loaded) on one address.

Served by a small HTTP/1.1 server on the event loop (``asyncio.start_server``): GET and
HEAD of those three paths, keep-alive, nothing else. It was aiohttp's web server,
whose import (0.3-0.5 s on the 2-core machine) came before the first bind of every
start; the three answers need none of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from scheduler.k8s.metrics import Metrics

Probe = Callable[[], tuple[bool, str]]
# A request's line and headers may not be longer (Prometheus' and a kubelet's are
# < 1 KiB); a connection idle this long between requests is closed.
MAX_HEAD_BYTES = 16 * 1024
IDLE_S = 60.0
REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    503: "Service Unavailable",
}


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


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"


Route = Callable[[], Answer]


def build_routes(metrics: Metrics, ready: Probe, healthy: Probe) -> dict[str, Route]:
    """What each path answers."""

    def probe(check: Probe) -> Route:
        def answer() -> Answer:
            ok, why = check()
            return Answer(200 if ok else 503, (why or "ok").encode())

        return answer

    return {
        "/metrics": lambda: Answer(200, generate_latest(metrics.registry), CONTENT_TYPE_LATEST),
        "/healthz": probe(healthy),
        "/readyz": probe(ready),
    }


def respond(request_head: bytes, routes: dict[str, Route]) -> tuple[bytes, bool]:
    """The bytes to send for one request's head, and whether to keep the connection."""
    lines = request_head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        return encode(Answer(400, b"bad request line"), head_only=False, keep_alive=False), False
    method, target, version = parts
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip().lower()
    connection = headers.get("connection", "")
    keep_alive = connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
    if "content-length" in headers or "transfer-encoding" in headers:
        return encode(Answer(400, b"no request body expected"), False, keep_alive=False), False
    route = routes.get(target.split("?", 1)[0])
    if method not in ("GET", "HEAD"):
        answer = Answer(405, b"GET or HEAD")
    elif route is None:
        answer = Answer(404, b"not found")
    else:
        answer = route()
    return encode(answer, head_only=method == "HEAD", keep_alive=keep_alive), keep_alive


def encode(answer: Answer, head_only: bool, keep_alive: bool) -> bytes:
    head = (
        f"HTTP/1.1 {answer.status} {REASONS.get(answer.status, '')}\r\n"
        f"Content-Type: {answer.content_type}\r\n"
        f"Content-Length: {len(answer.body)}\r\n"
        f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
    ).encode("latin-1")
    return head if head_only else head + answer.body


async def serve_connection(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, routes: dict[str, Route]
) -> None:
    try:
        keep_alive = True
        while keep_alive:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), IDLE_S)
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
                return
            reply, keep_alive = respond(head[:-4], routes)
            writer.write(reply)
            await writer.drain()
    except (ConnectionError, OSError):
        return
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await writer.wait_closed()


async def serve(routes: dict[str, Route], address: str) -> asyncio.Server:
    """Listen on ``host:port`` (``0.0.0.0:10260``; an empty host is every address)."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")  # [::]:10260

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await serve_connection(reader, writer, routes)

    return await asyncio.start_server(on_connection, host or None, int(port), limit=MAX_HEAD_BYTES)
