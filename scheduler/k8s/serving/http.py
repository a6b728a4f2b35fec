"""``/metrics`` (Prometheus), ``/healthz`` (the process is alive: answering, and not
stuck at start) and ``/readyz`` (caches synced and a profile loaded) on one address:
what each request is answered.

Served by a small HTTP/1.1 server on the event loop (``scheduler.k8s.serving.serving``: TLS,
delegated authentication, bounded connections): GET and HEAD of those paths,
keep-alive, nothing else. It was aiohttp's web server, whose import (0.3-0.5 s on the
2-core machine) came before the first bind of every start; the answers need none of it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from scheduler.k8s.serving.metrics import Metrics

Probe = Callable[[], tuple[bool, str]]
# A request's line and headers may not be longer (Prometheus' and a kubelet's are
# < 1 KiB, a service account token ~1 KiB).
MAX_HEAD_BYTES = 16 * 1024
REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
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


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # without the query
    headers: dict[str, str]  # names in lower case, values as sent (a token is case-sensitive)
    keep_alive: bool


def parse_request(head: bytes) -> Request | Answer:
    """A request's line and headers; a 400 answer (the connection then closes) for
    what is not an HTTP/1.x request without a body."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        return Answer(400, b"bad request line")
    method, target, version = parts
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    connection = headers.get("connection", "").lower()
    keep_alive = connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
    if "content-length" in headers or "transfer-encoding" in headers:
        return Answer(400, b"no request body expected")
    return Request(method, target.split("?", 1)[0], headers, keep_alive)


def route(request: Request, routes: dict[str, Route]) -> Answer:
    """The answer to a request that may be served."""
    found = routes.get(request.path)
    if request.method not in ("GET", "HEAD"):
        return Answer(405, b"GET or HEAD")
    if found is None:
        return Answer(404, b"not found")
    return found()


def encode(answer: Answer, head_only: bool, keep_alive: bool) -> bytes:
    head = (
        f"HTTP/1.1 {answer.status} {REASONS.get(answer.status, '')}\r\n"
        f"Content-Type: {answer.content_type}\r\n"
        f"Content-Length: {len(answer.body)}\r\n"
        f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
    ).encode("latin-1")
    return head if head_only else head + answer.body
